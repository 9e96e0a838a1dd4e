"""SECURITY.md S10: `setupbot run` killed with SIGKILL in the middle of a repair (a runner, its
snapshot images and the build image exist), then `setupbot clean --run-id`: no container,
network, volume or image of that run remains; stand-in images stay."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from sec_helpers import copy_repo, docker, leftovers

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.serial, pytest.mark.timeout(600)]


def test_sigkill_mid_run_then_clean_leaves_nothing(docker_available, tmp_path):
    from bot.engine.core import new_run_id

    repo = copy_repo("hostile-env", tmp_path)
    run_id = new_run_id()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETUPBOT_")}
    env.update(SETUPBOT_RUN_ID=run_id, SETUPBOT_ENGINE_COMMAND_TIMEOUT="120")
    proc = subprocess.Popen(
        ["setupbot", "run", str(repo), "--no-knowledge"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        # wait for the middle of a repair: the runner exists and has a snapshot (make is missing,
        # so the loop trials apt-get install make after a snapshot)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            snapshots = docker(
                "images", "-q", "--filter", f"label=setupbot.run={run_id}", "--filter", "label=setupbot.snapshot=1"
            ).split()
            if snapshots and leftovers(run_id)["containers"]:
                break
            time.sleep(1)
        assert proc.poll() is None, "the run ended before it could be killed"
        before = leftovers(run_id)
        assert before["containers"] and before["images"], before
        os.killpg(proc.pid, signal.SIGKILL)  # the bot and its engine CLI calls, as a cancelled job
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    time.sleep(2)
    assert leftovers(run_id)["containers"], "SIGKILL left the bot no chance to clean up"

    r = subprocess.run(["setupbot", "clean", "--run-id", run_id], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "removed (run " in r.stdout
    after = leftovers(run_id)
    assert after["containers"] == [] and after["networks"] == [] and after["volumes"] == [], after
    if after["images"]:
        # a commit the daemon was finishing when the client died can land after the clean;
        # running clean again (SECURITY.md S10: "run it again") removes it
        subprocess.run(["setupbot", "clean", "--run-id", run_id], env=env, capture_output=True, timeout=300)
    assert leftovers(run_id) == {"containers": [], "networks": [], "volumes": [], "images": []}
    # stand-ins carry no run label: the base image the run used is still there
    assert docker("image", "inspect", "--format", "{{.Id}}", "python:3.11-slim").strip()
