"""output.lock: false (or `setupbot run --no-lock`): a maintainer who keeps version ranges gets
no requirements.lock, no locked image, and an earlier lock is not installed."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from doubles.loop_world import FakeEngine, Need, World, fake_compile, fake_plan_maker  # noqa: E402

from bot.cli import build_parser  # noqa: E402
from bot.compile.plan import make_plan  # noqa: E402
from bot.config import load_settings  # noqa: E402
from bot.graph.lock import LOCK_NODE, LockEntry, RequirementsLock  # noqa: E402
from bot.graph.mapping import Registry  # noqa: E402
from bot.loop.orchestrator import run_setup  # noqa: E402

REPOS = Path(__file__).parents[1] / "fixtures" / "repos"


def test_the_repository_may_keep_its_version_ranges(tmp_path):
    assert load_settings(tmp_path, environ={}).output.lock is True
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "setupbot.yml").write_text("output:\n  lock: false\n")
    assert load_settings(tmp_path, environ={}).output.lock is False
    args = build_parser().parse_args(["run", str(tmp_path), "--no-lock"])
    assert args.no_lock is True


def test_an_earlier_lock_is_not_installed_when_the_lock_is_off(tmp_path, monkeypatch):
    from bot.compile import plan as plan_mod
    from bot.graph.resolve import Resolution

    # no index: the ranges resolve to nothing here, and only the lock's reuse is looked at
    monkeypatch.setattr(plan_mod, "sdist_only", lambda *a, **k: None)
    monkeypatch.setattr(plan_mod, "uv_compile", lambda *a, **k: Resolution(True, {}))
    repo = tmp_path / "r"
    shutil.copytree(REPOS / "plan-ci-services", repo)

    def plan(settings, resolve=True):
        return make_plan(repo, settings, available_pythons=["3.11"], resolve=resolve, registry=Registry(enabled=False))

    inputs = plan(load_settings(repo, environ={}), resolve=False).graph.meta["inputs_hash"]
    lock = RequirementsLock([LockEntry("redis", "5.0.1")], inputs, "3.11")
    (repo / ".devcontainer").mkdir()
    (repo / ".devcontainer" / "requirements.lock").write_text(lock.render())
    assert LOCK_NODE in plan(load_settings(repo, environ={})).graph.nodes  # reused while the lock is on
    off = plan(load_settings(repo, environ={}, overrides={"output": {"lock": False}}))
    assert LOCK_NODE not in off.graph.nodes and "-r /tmp/requirements.lock" not in off.dockerfile.text
    assert any("output.lock is false" in w.message for w in off.warnings)


def test_the_run_records_that_it_locked_nothing(tmp_path):
    engine = FakeEngine(World([Need("pip:PyYAML", "E   ModuleNotFoundError: No module named 'yaml'")]))
    rec = run_setup(
        tmp_path,
        load_settings(tmp_path, environ={}, overrides={"output": {"lock": False}}),
        engine,
        None,
        None,
        make_plan=fake_plan_maker("3.11"),
        compile_dockerfile=fake_compile,
        available_pythons=["3.11", "3.13"],
    )
    assert rec.status == "success", rec.remaining
    assert rec.replay["lock"] == {"status": "off", "reason": "output.lock is false"}
    assert not rec.lock_text
