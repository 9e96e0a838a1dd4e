"""Limits hold through a whole run (SECURITY.md S7, S8): the runner of tests/fixtures/repos/
hostile-limits meets a fork bomb, a memory hog, a disk filler and `sleep infinity`. Each is
contained, the run ends within its timeout and reports it, and the host stays usable.

Disk: on this engine's storage driver (fuse-overlayfs) `--storage-opt size=` is unavailable, so
a runner's writable layer has no quota. What bounds a disk filler is the command timeout and the
removal of the container (and its layer) at the end of the run; the test shows the filler's
bytes lived only in the container's layer and are gone with it. The fixture stops at 512 MB so
the shared machine is not put at risk.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest
from sec_helpers import (
    ContainerWatcher,
    assert_build_step_confined,
    assert_hardened,
    copy_repo,
    docker,
    is_build_step,
    leftovers,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.serial, pytest.mark.timeout(900)]

PIDS, MEMORY_MB, TIMEOUT = 96, 256, 60


def test_fork_bomb_memory_hog_disk_filler_and_sleep_forever_are_contained(docker_available, tmp_path):
    from bot.config import load_settings
    from bot.engine import Engine
    from bot.pipeline import run_pipeline

    repo = copy_repo("hostile-limits", tmp_path)
    settings = load_settings(
        repo,
        environ={},
        overrides={
            "engine": {
                "pids_limit": PIDS,
                "memory": f"{MEMORY_MB}m",
                "cpus": 1.0,
                "command_timeout": TIMEOUT,
                "keep_containers": True,
            },
            "budgets": {"max_steps": 6, "wall_clock": 600},
        },
    )
    engine = Engine.from_settings(settings)
    outputs: list[str] = []
    real_exec = engine.exec_in

    def spy_exec(*a, **k):
        res = real_exec(*a, **k)
        outputs.append(res.output)
        return res

    engine.exec_in = spy_exec
    started = time.monotonic()
    try:
        with ContainerWatcher(engine.run_id) as watcher:
            result = run_pipeline(
                repo, settings, engine=engine, use_knowledge=False, verify=False, repository="example/hostile-limits"
            )
        seconds = time.monotonic() - started
        # the filler's bytes are in the runner's own writable layer (no host mount to write to)
        sizes = docker(
            "ps", "-a", "-s", "--filter", f"label=setupbot.run={engine.run_id}", "--format", "{{.Names}} {{.Size}}"
        )
    finally:
        engine.clean(engine.run_id)
    out = "\n".join(outputs)

    # fork bomb: refused by the kernel at the pids limit
    m = re.search(r"\[limits\] fork bomb stopped after (\d+) processes: (.+)", out)
    assert m, out[-3000:]
    assert int(m.group(1)) < PIDS and "Resource temporarily unavailable" in m.group(2)
    # memory hog: killed by the OOM killer before it got far past the limit
    m = re.search(r"\[limits\] memory hog exited (-?\d+) after: allocated (\d+) MB", out)
    assert m, out[-3000:]
    assert int(m.group(1)) in (-9, 137) and int(m.group(2)) <= MEMORY_MB
    # disk filler: wrote into the container layer only
    assert re.search(r"\[limits\] disk filler wrote (\d+) MB", out)
    runner_sizes = [line for line in sizes.splitlines() if "runner" in line]
    assert runner_sizes and any(re.search(r"\d+(\.\d+)?MB|GB", line) for line in runner_sizes), sizes
    # sleep forever: killed at the command timeout, and the run says so
    assert "[limits] sleeping forever" in out
    assert f"killed after the {TIMEOUT}s timeout" in out
    record = result.run_record
    assert record.status in ("unresolved", "over_budget")
    timeouts = [s for s in record.trajectory.steps if s.outcome == "timeout"]
    assert timeouts and all(s.duration < TIMEOUT + 60 for s in timeouts)
    report = result.generated.files[result.generated.report_path]
    assert "timeout" in (record.remaining + report).lower()
    assert seconds < 600

    # every container of the run was hardened with the configured limits
    assert watcher.seen
    for info in watcher.seen.values():
        assert info["HostConfig"]["Memory"] == MEMORY_MB * 1024 * 1024
        if is_build_step(info):
            assert_build_step_confined(info)
            continue
        assert_hardened(info)
        assert info["HostConfig"]["PidsLimit"] == PIDS

    # the host stays usable and nothing of the run is left
    t0 = time.monotonic()
    for _ in range(20):
        subprocess.run([sys.executable, "-c", "pass"], check=True, timeout=30)
    docker("info")
    assert time.monotonic() - t0 < 30
    assert leftovers(engine.run_id) == {"containers": [], "networks": [], "volumes": [], "images": []}


def test_image_builds_run_repository_code_under_the_memory_limit(docker_available, tmp_path):
    """setup.py runs inside `docker build` (pip install .): the build's RUN containers get the
    runner's memory limit too, so an allocation over it fails the build instead of the host."""
    from bot.config import load_settings
    from bot.engine import Engine

    engine = Engine.from_settings(load_settings(None, environ={}, overrides={"engine": {"memory": "128m"}}))
    try:
        over = engine.build(
            tmp_path,
            "FROM python:3.11-slim\nRUN python -c \"b = bytearray(600 * 1024 * 1024); print('ALLOC' + 'ATED')\"\n",
            f"setupbot-sectest/over:{engine.run_id}",
        )
        under = engine.build(
            tmp_path,
            "FROM python:3.11-slim\nRUN python -c \"b = bytearray(32 * 1024 * 1024); print('allocated 32 MB')\"\n",
            f"setupbot-sectest/under:{engine.run_id}",
        )
    finally:
        engine.clean(engine.run_id)
    assert not over.ok and "ALLOCATED" not in over.log and "137" in over.log, over.log[-1000:]
    assert under.ok, under.log[-1000:]
    assert leftovers(engine.run_id)["containers"] == []
