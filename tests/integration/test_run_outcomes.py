"""`setupbot run` end to end on the real engine: outcomes that are not a plain success
(budget exhausted, SIGTERM) still end in time, exit with their own code, and write the report
and the records. The run that finds no test is in test_leftovers.py, with what it leaves."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPOS = ROOT / "tests" / "fixtures" / "repos"

pytestmark = [pytest.mark.slow]


def copy(name: str, tmp_path: Path) -> Path:
    repo = tmp_path / name
    shutil.copytree(REPOS / name, repo)
    return repo


def setupbot(*args: str, env_extra: dict | None = None, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env_extra or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "bot", *args],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )


def leftovers(run_id: str) -> list[str]:
    out = []
    for kind in ("ps", "network ls", "volume ls"):
        cmd = ["docker", *kind.split(), "-q", "--filter", f"label=setupbot.run={run_id}"]
        if kind == "ps":
            cmd.insert(2, "-a")
        out += subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()
    return out


# A run may end this much after its budget: 5 % (the target) plus a fixed slack for the
# interpreter's start, the last `docker rm` and the engine's kill-on-timeout path, which matter
# only for the small budgets tests can afford.
OVERSHOOT_SHARE = 0.05
OVERSHOOT_FIXED = 15.0


def assert_wrote_outputs(repo: Path) -> dict:
    assert (repo / ".devcontainer" / "Dockerfile").is_file()
    assert (repo / ".devcontainer" / "setup-report.md").is_file()
    assert (repo / ".setupbot" / "trajectory.jsonl").is_file()
    return json.loads((repo / ".setupbot" / "run.json").read_text())


@pytest.mark.extended
@pytest.mark.timeout(900)
def test_tests_that_sleep_past_the_budget_end_in_time_with_outputs(docker_available, tmp_path):
    budget = 300
    repo = copy("run-slow-tests", tmp_path)
    started = time.monotonic()
    proc = setupbot("run", str(repo), "--no-knowledge", "--wall-clock", str(budget))
    out, err = proc.communicate(timeout=budget * 3)
    wall = time.monotonic() - started
    print(
        f"\nbudget {budget}s, wall {wall:.1f}s, overshoot {100 * (wall - budget) / budget:+.1f} %, exit {proc.returncode}"
    )
    assert wall <= budget * (1 + OVERSHOOT_SHARE) + OVERSHOOT_FIXED, (wall, out, err)
    record = assert_wrote_outputs(repo)
    assert leftovers(record["run_id"]) == []
    # the suite was cut, never let run on: every test command got at most what was left
    steps = [json.loads(line) for line in (repo / ".setupbot" / "trajectory.jsonl").read_text().splitlines()]
    tests = [s for s in steps if s["action"] == "test"]
    summary = [(s["action"], s["outcome"], round(s.get("duration") or 0), " ".join(s["command"])[:60]) for s in steps]
    assert tests and all(s["outcome"] == "timeout" for s in tests), summary
    assert record["replay"], ("the best state was not replayed", record["remaining"], summary)


@pytest.mark.extended
@pytest.mark.timeout(900)
def test_sigterm_mid_run_writes_outputs_and_records_and_exits_130(docker_available, tmp_path):
    repo = copy("run-slow-tests", tmp_path)
    run_id = f"sigterm{os.getpid()}"
    started = time.monotonic()
    proc = setupbot("run", str(repo), "--no-knowledge", "--wall-clock", "1200", env_extra={"SETUPBOT_RUN_ID": run_id})
    # wait until the runner container is up (the build is done, the target is running)
    deadline = started + 600
    while time.monotonic() < deadline and proc.poll() is None:
        running = subprocess.run(
            ["docker", "ps", "-q", "--filter", f"label=setupbot.run={run_id}"], capture_output=True, text=True
        ).stdout.split()
        if running:
            break
        time.sleep(2)
    time.sleep(10)  # inside the sleeping test run
    assert proc.poll() is None, proc.communicate()
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    stop = time.monotonic() - sent
    print(f"\nSIGTERM after {sent - started:.0f}s; stopped, wrote and cleaned up in {stop:.1f}s")
    assert proc.returncode == 130, (out, err)
    assert "SIGTERM" in err, err
    assert stop < 60
    record = assert_wrote_outputs(repo)
    assert record["status"] == "interrupted" and "left undone" in record["remaining"]
    assert leftovers(run_id) == []
