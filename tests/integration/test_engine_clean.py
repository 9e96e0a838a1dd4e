"""Cleanup by label, also after the process that owned the run was killed with SIGKILL."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bot.config import load_settings
from bot.engine import Engine
from bot.engine.core import new_run_id

HOLDER = textwrap.dedent("""
    import sys, tempfile, time
    from bot.config import load_settings
    from bot.engine import Engine
    engine = Engine.from_settings(load_settings(None))
    ctx = tempfile.mkdtemp()
    built = engine.build(ctx, "FROM debian:bookworm-slim\\nRUN touch /built\\n", "setupbot-test/held:" + engine.run_id)
    assert built.ok, built.log
    with engine.network() as net:
        engine.start_container("debian:bookworm-slim", "sibling", network=net, aliases=["db"],
                               command=["sleep", "600"])
        with engine.session("python:3.13-slim", network=net) as s:
            s.exec(["touch", "/tmp/tried"])  # a change: the snapshot is a commit, not the image
            s.snapshot("held")
            print("READY", flush=True)
            time.sleep(600)
""")


def _leftovers(run_id: str) -> dict[str, list[str]]:
    label = f"label=setupbot.run={run_id}"

    def ids(*args):
        return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout.split()

    return {
        "containers": ids("ps", "-aq", "--filter", label),
        "networks": ids("network", "ls", "-q", "--filter", label),
        "volumes": ids("volume", "ls", "-q", "--filter", label),
        "images": ids("images", "-aq", "--filter", label),
    }


@pytest.mark.serial
def test_clean_after_sigkill_leaves_nothing_of_the_run(docker_available):
    run_id = new_run_id()
    env = {**os.environ, "SETUPBOT_RUN_ID": run_id}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("READY"):
                break
        assert lines and lines[-1].startswith("READY"), "".join(lines)
        before = _leftovers(run_id)
        # the service network, and the run's egress network where the egress guard holds
        assert len(before["containers"]) == 2 and len(before["networks"]) in (1, 2)
        assert len(before["images"]) >= 2  # the build and the snapshot
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert _leftovers(run_id)["containers"], "SIGKILL gave the process no chance to clean up"
    finally:
        if proc.poll() is None:
            proc.kill()
    r = subprocess.run(["setupbot", "clean", "--run-id", run_id], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "2 containers" in r.stdout
    assert _leftovers(run_id) == {"containers": [], "networks": [], "volumes": [], "images": []}
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout if os.geteuid() == 0 else ""
    assert f"setupbot:{run_id}" not in rules  # the egress rules went with the run


def test_clean_of_one_run_leaves_other_runs_and_stand_ins(docker_available):
    settings = load_settings(None)
    mine, other = Engine.from_settings(settings), Engine.from_settings(settings)
    a = mine.start_container("debian:bookworm-slim", "a", command=["sleep", "60"])
    b = other.start_container("debian:bookworm-slim", "b", command=["sleep", "60"])
    try:
        counts = mine.clean(mine.run_id)
        assert counts["containers"] == 1
        assert not a.running() and b.running()
        assert mine.image_exists("python:3.13-slim") and mine.image_exists("debian:bookworm-slim")
    finally:
        other.clean(other.run_id)
        mine.clean(mine.run_id)


def test_sibling_on_a_private_network_is_reachable_by_alias(docker_available):
    engine = Engine.from_settings(load_settings(None))
    try:
        with engine.network() as net:
            engine.start_container(
                "python:3.13-slim", "web", network=net, aliases=["web"], command=["python", "-m", "http.server", "8080"]
            )
            with engine.session("python:3.13-slim", network=net) as s:
                res = s.exec(
                    [
                        "python",
                        "-c",
                        "import time, urllib.request as u\n"
                        "for _ in range(50):\n"
                        "    try:\n"
                        "        print(u.urlopen('http://web:8080/').status); break\n"
                        "    except OSError: time.sleep(0.2)\n",
                    ],
                    timeout=60,
                )
                assert res.output.strip() == "200"
            info = subprocess.run(
                ["docker", "network", "inspect", net, "-f", "{{.Labels}}"], capture_output=True, text=True
            ).stdout
            assert engine.run_id in info
        # the network and its containers are gone with the block
        assert subprocess.run(["docker", "network", "inspect", net], capture_output=True).returncode != 0
    finally:
        engine.clean(engine.run_id)


def test_clean_without_a_run_id_leaves_runs_whose_owner_is_alive(docker_available):
    """S10/clean: `setupbot clean` removes only finished runs; --all removes every run."""
    from bot.engine.core import OWNER_LABEL, owner_token

    settings = load_settings(None)
    live = Engine.from_settings(settings)  # owned by this (running) test process
    dead = Engine.from_settings(settings)
    gone = subprocess.Popen(["sleep", "0"])
    gone.wait()
    dead.labels[OWNER_LABEL] = owner_token(gone.pid)  # a process that has ended
    legacy = Engine.from_settings(settings)
    del legacy.labels[OWNER_LABEL]  # an older version: owner unknown
    a = live.start_container("debian:bookworm-slim", "live", command=["sleep", "120"])
    b = dead.start_container("debian:bookworm-slim", "dead", command=["sleep", "120"])
    c = legacy.start_container("debian:bookworm-slim", "legacy", command=["sleep", "120"])
    try:
        # what `setupbot clean` (no option) does, limited to this test's runs: the machine is shared
        counts, kept = live.clean_finished(among={live.run_id, dead.run_id, legacy.run_id})
        assert a.running() and not b.running() and c.running()
        assert counts["containers"] == 1 and sorted(kept) == sorted([live.run_id, legacy.run_id])
        assert _leftovers(dead.run_id) == {"containers": [], "networks": [], "volumes": [], "images": []}
    finally:
        for e in (live, dead, legacy):
            e.clean(e.run_id)


def test_the_shared_ca_image_outlives_the_run_that_built_it(docker_available, tmp_path):
    """One run's cleanup must not delete the CA derivative other runs are using."""
    pem = Path("/etc/ssl/certs/ca-certificates.crt")
    if not pem.is_file():
        pytest.skip("no CA bundle on this machine")
    settings = load_settings(None, overrides={"ca": {"file": str(pem)}})
    first, second = Engine.from_settings(settings), Engine.from_settings(settings)
    try:
        tag = first.ca_derivative("debian:bookworm-slim")
        assert second.ca_derivative("debian:bookworm-slim") == tag
        first.clean(first.run_id)
        assert second.image_exists(tag), "the first run's cleanup deleted the shared CA image"
        labels = second.image_labels(tag)
        assert "setupbot.run" not in labels and labels.get("setupbot.shared") == "1"
    finally:
        first.clean(first.run_id)
        second.clean(second.run_id)


def test_a_build_labels_its_image_with_every_run_label_in_one_step(docker_available, tmp_path):
    """The run's labels (what cleanup finds the image by) are on the built image. The classic
    builder turns each --label into a step of its own, which commits a container of the whole
    image; the engine gives it one LABEL instead, so the log shows one step for all of them."""
    engine = Engine.from_settings(load_settings(None))
    tag = f"setupbot-test/labelled:{engine.run_id}"
    try:
        built = engine.build(tmp_path, "FROM debian:bookworm-slim\nRUN touch /built\n", tag)
        assert built.ok, built.log
        labels = engine.image_labels(tag)
        assert {k: labels.get(k) for k in engine.labels} == dict(engine.labels)
        assert labels["setupbot.run"] == engine.run_id
        if not engine.buildkit_available():
            steps = [ln for ln in built.log.splitlines() if re.match(r"^(?:Step|STEP) \d+/\d+ ?: ?LABEL\b", ln)]
            assert len(steps) == 1, built.log
            assert all(k in steps[0] for k in engine.labels)
        engine.clean(engine.run_id)
        assert not engine.image_exists(tag), "cleanup by the run's label left the image"
    finally:
        engine.clean(engine.run_id)


def test_the_engine_says_how_much_is_free_where_it_keeps_its_images(docker_available):
    """The bench's disk guard reads the free space of the filesystem under the engine's root
    directory (docker info), the one its build cache fills."""
    import shutil

    engine = Engine.from_settings(load_settings(None))
    root = subprocess.run(
        ["docker", "info", "--format", "{{.DockerRootDir}}"], capture_output=True, text=True, check=True
    ).stdout.strip()
    free = engine.free_disk_bytes()
    assert free is not None and free > 0
    # the same filesystem: within what other writers change while the two are read
    assert abs(free - shutil.disk_usage(root).free) < 2**30
