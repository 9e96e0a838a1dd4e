"""`setupbot run` end to end on the real engine: outcomes that are not a plain success
(no test found, budget exhausted, SIGTERM) still end in time, exit with their own code, and
write the report and the records."""

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

from bot.errors import BelowGate

ROOT = Path(__file__).resolve().parents[2]
REPOS = ROOT / "tests" / "fixtures" / "repos"

pytestmark = [pytest.mark.slow]


def copy(name: str, tmp_path: Path) -> Path:
    repo = tmp_path / name
    shutil.copytree(REPOS / name, repo)
    return repo


def setupbot(*args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "bot", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def leftovers(run_id: str) -> list[str]:
    out = []
    for kind in ("ps", "network ls", "volume ls"):
        cmd = ["docker", *kind.split(), "-q", "--filter", f"label=setupbot.run={run_id}"]
        if kind == "ps":
            cmd.insert(2, "-a")
        out += subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()
    return out


@pytest.mark.timeout(900)
def test_run_whose_tests_cannot_be_found_exits_below_gate(docker_available, tmp_path):
    repo = copy("run-no-tests", tmp_path)
    proc = setupbot("run", str(repo), "--no-knowledge", "--no-verify", "--wall-clock", "600")
    out, err = proc.communicate(timeout=850)
    assert proc.returncode == BelowGate.exit_code, (out, err)
    assert "no test ran" in err and "Test commands tried: `python -m pytest`" in err, err
    assert "no tests/, test/" in err
    record = json.loads((repo / ".setupbot" / "run.json").read_text())
    assert record["status"] == "no_tests" and record["replay"]["tests_ran"] == 0
    assert leftovers(record["run_id"]) == []
    report = (repo / ".devcontainer" / "setup-report.md").read_text()
    assert "ran no test" in report
    # the files it wrote are not evidence for the next plan
    from bot.graph import make_plan

    plan = make_plan(repo, None, available_pythons=["3.11", "3.13"], resolve=False)
    cited = {e[0] for n in plan.graph.nodes.values() for e in n.evidence}
    assert not {c for c in cited if c.startswith((".devcontainer/", ".setupbot/"))}, cited
