"""`setupbot images bootstrap --jobs N`: several stand-ins are made at once, each only after its
base; a failed base still skips its users. The builds are stand-ins here (the real bootstrap
is tests/integration/test_images_bootstrap.py)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from bot.engine import images


@dataclass
class _Recipe:
    tag: str
    base: str


class _Engine:
    def ping(self) -> None:
        return None


def _run(monkeypatch, recipes, jobs, failing=(), rootfs_failing=()):
    events: list[tuple[str, str]] = []
    lock = threading.Lock()
    live = {"now": 0, "most": 0}

    def ensure_rootfs(engine, settings, suite, log_line):
        tag = f"{images.ROOTFS_REPOSITORY}:{suite}"
        return images.Outcome(tag, "failed" if suite in rootfs_failing else "built", 0.0)

    def build_standin(engine, settings, recipe, *, force=False, log_line=None):
        with lock:
            events.append(("start", recipe.tag))
            live["now"] += 1
            live["most"] = max(live["most"], live["now"])
        time.sleep(0.05)
        with lock:
            live["now"] -= 1
            events.append(("end", recipe.tag))
        return images.Outcome(recipe.tag, "failed" if recipe.tag in failing else "built", 0.05)

    monkeypatch.setattr(images, "select_recipes", lambda settings, pythons, services: list(recipes))
    monkeypatch.setattr(images, "ensure_rootfs", ensure_rootfs)
    monkeypatch.setattr(images, "build_standin", build_standin)
    out = images.bootstrap(_Engine(), None, jobs=jobs, log_line=lambda line: None)
    return out, events, live["most"]


ROOT = images.ROOTFS_REPOSITORY


def test_images_whose_bases_are_made_are_built_at_once(monkeypatch):
    recipes = [
        _Recipe("debian:bookworm-slim", f"{ROOT}:bookworm"),
        _Recipe("debian:trixie-slim", f"{ROOT}:trixie"),
        _Recipe("python:3.11-slim", "debian:bookworm-slim"),
        _Recipe("python:3.13-slim", "debian:trixie-slim"),
        _Recipe("postgres:17", "debian:trixie-slim"),
        _Recipe("redis:8", "debian:trixie-slim"),
    ]
    out, events, most = _run(monkeypatch, recipes, jobs=3)
    assert sorted(o.tag for o in out if o.action == "built") == sorted(
        [f"{ROOT}:bookworm", f"{ROOT}:trixie", *(r.tag for r in recipes)]
    )
    assert 1 < most <= 3
    # no image starts before its base ended
    for r in recipes:
        if not r.base.startswith(ROOT):
            assert events.index(("end", r.base)) < events.index(("start", r.tag)), (r.tag, events)
    # one job: one at a time, in the recipes' order
    out, events, most = _run(monkeypatch, recipes, jobs=1)
    assert most == 1 and [t for e, t in events if e == "start"] == [r.tag for r in recipes]


def test_a_failed_base_skips_its_users_and_the_others_go_on(monkeypatch):
    recipes = [
        _Recipe("debian:bookworm-slim", f"{ROOT}:bookworm"),
        _Recipe("debian:trixie-slim", f"{ROOT}:trixie"),
        _Recipe("python:3.11-slim", "debian:bookworm-slim"),
        _Recipe("python:3.13-slim", "debian:trixie-slim"),
        _Recipe("redis:8", "debian:trixie-slim"),
    ]
    out, events, _ = _run(monkeypatch, recipes, jobs=3, failing={"debian:trixie-slim"}, rootfs_failing={"bookworm"})
    by = {o.tag: o for o in out}
    assert by["debian:bookworm-slim"].detail.startswith("skipped: its base")
    assert by["python:3.11-slim"].action == "failed" and by["python:3.13-slim"].action == "failed"
    assert by["redis:8"].detail == "skipped: its base debian:trixie-slim failed"
    assert [t for e, t in events if e == "start"] == ["debian:trixie-slim"]


def test_one_egress_network_per_engine_when_builds_run_in_threads(monkeypatch):
    """Three builds at once ask for the run's egress network: one is made (two would ask the
    daemon for the same bridge name, and the second fails)."""
    import shutil
    import subprocess

    import pytest

    from bot.config import load_settings
    from bot.engine import core

    if shutil.which("docker") is None:
        pytest.skip("Engine() needs a docker binary on PATH to name")
    e = core.Engine(load_settings(None, environ={}), run_id="threads", environ={})
    created: list[list[str]] = []

    def run_cli(argv, check=True, timeout=None):
        if argv[:2] == ["network", "create"]:
            time.sleep(0.1)  # the daemon takes a while: the other threads arrive meanwhile
            created.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, "10.0.0.1\n", "")

    monkeypatch.setattr(e, "run_cli", run_cli)
    monkeypatch.setattr(core.egress_guard, "why_not", lambda kind: "")
    monkeypatch.setattr(core.egress_guard, "add_rules", lambda run_id, iface: None)
    monkeypatch.setattr(e, "_release_egress", lambda: None)
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(e.egress_network())) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(created) == 1 and len(set(got)) == 1 and got[0].endswith("-egress")
