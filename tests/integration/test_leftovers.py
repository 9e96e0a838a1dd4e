"""Leave nothing behind: a failed build keeps no intermediate container, and a whole `setupbot
run` -- one that fails and one that finds no test and ends below the gate -- leaves no container, network, volume or
image carrying its run label. Only this test's own run label is counted: other runs may be
active on the same engine."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from bot.compile.plan import make_plan
from bot.config import load_settings
from bot.engine import Engine
from bot.engine.core import new_run_id
from bot.errors import BelowGate

ROOT = Path(__file__).parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "repos"


def _count(run_id: str) -> dict[str, int]:
    label = f"label=setupbot.run={run_id}"

    def ids(*args: str) -> list[str]:
        return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout.split()

    return {
        "containers": len(ids("ps", "-aq", "--filter", label)),
        "networks": len(ids("network", "ls", "-q", "--filter", label)),
        "volumes": len(ids("volume", "ls", "-q", "--filter", label)),
        "images": len(ids("images", "-aq", "--filter", label)),
    }


def _engine_env() -> dict[str, str]:
    # the machine's engine settings (e.g. SETUPBOT_ENGINE_NETWORK_MODE on a host without docker0)
    return {k: v for k, v in os.environ.items() if k.startswith("SETUPBOT_ENGINE_")}


NOTHING = {"containers": 0, "networks": 0, "volumes": 0, "images": 0}


def test_a_failed_build_keeps_no_intermediate_container(docker_available, tmp_path):
    engine = Engine.from_settings(load_settings(None, environ=_engine_env()))
    # The LABEL makes the step containers countable: they inherit the image's labels. Without
    # --force-rm the classic builder keeps the container of the failing RUN.
    text = (
        f"FROM debian:bookworm-slim\nLABEL setupbot.run={engine.run_id}\n"
        "RUN touch /step-one\nRUN echo failing on purpose && exit 3\n"
    )
    try:
        result = engine.build(tmp_path, text, f"setupbot-test/failing:{engine.run_id}", ca=False)
        assert not result.ok and "failing on purpose" in result.log
        assert _count(engine.run_id)["containers"] == 0
    finally:
        engine.clean(engine.run_id)
    assert _count(engine.run_id) == NOTHING


def _run(repo: Path, run_id: str, *flags: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETUPBOT_")}
    env.update(_engine_env())
    env.update(SETUPBOT_RUN_ID=run_id, PYTHONPATH=str(ROOT), SETUPBOT_BUDGETS_WALL_CLOCK="900")
    return subprocess.run(
        # no lock: its extra build leaves what the other builds leave, and is cleaned the same way
        [sys.executable, "-m", "bot", "run", str(repo), "--no-knowledge", "--no-lock", "--json", "-", *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )


def _validate(doc: dict) -> None:
    jsonschema.validate(doc, json.loads((ROOT / "schemas" / "output" / "run.schema.json").read_text()))


@pytest.mark.timeout(1300)  # the run's own bound is 1200 s
@pytest.mark.slow
def test_a_failing_run_leaves_nothing(docker_available, tmp_path):
    repo = tmp_path / "broken"
    (repo / "tests").mkdir(parents=True)
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "broken"\nversion = "0.1"\ndependencies = ["setupbot-no-such-distribution-x9q==1.0"]\n'
    )
    (repo / "tests" / "test_it.py").write_text("def test_it():\n    assert True\n")
    run_id = new_run_id()
    r = _run(repo, run_id, "--max-steps", "3", "--no-verify")
    assert r.returncode in (7, 20), r.stderr[-3000:]  # budget exhausted or unresolved
    # not a terminal: the real loop's progress as timestamped lines on stderr
    assert re.search(r"^\d{4}-\d\d-\d\dT[\d:]+Z \+\d\d:\d\d run broken · build · step 1/3$", r.stderr, re.M), r.stderr[
        -3000:
    ]
    doc = json.loads(r.stdout)
    _validate(doc)
    assert doc["exit_code"] == r.returncode and doc["status"] != "success" and doc["run_id"] == run_id
    assert _count(run_id) == NOTHING


@pytest.mark.timeout(1300)  # the run's own bound is 1200 s
@pytest.mark.slow
def test_a_run_that_finds_no_test_exits_21_below_the_gate_says_why_and_leaves_nothing(docker_available, tmp_path):
    """A project with no tests: the replay ran none, so the run is not a success, it ends below
    the gate (exit 21), and the report says which test commands were tried and where."""
    repo = tmp_path / "run-no-tests"
    shutil.copytree(FIXTURES / "run-no-tests", repo)
    run_id = new_run_id()
    r = _run(repo, run_id, "--max-steps", "8", "--no-verify")
    doc = json.loads(r.stdout) if r.stdout.strip() else {}
    assert r.returncode == BelowGate.exit_code == 21, (r.returncode, doc, r.stderr[-3000:])
    _validate(doc)
    assert doc["status"] == "no_tests" and doc["exit_code"] == 21 and doc["run_id"] == run_id
    assert "no test ran" in r.stderr and "Test commands tried: `python -m pytest`" in r.stderr, r.stderr[-3000:]
    assert "no tests/, test/" in r.stderr
    record = json.loads((repo / ".setupbot" / "run.json").read_text())
    assert record["status"] == "no_tests" and record["replay"]["tests_ran"] == 0
    assert "ran no test" in (repo / ".devcontainer" / "setup-report.md").read_text()
    assert _count(run_id) == NOTHING
    # the files it wrote are not evidence for the next plan
    plan = make_plan(repo, None, available_pythons=["3.11", "3.13"], resolve=False)
    cited = {e[0] for n in plan.graph.nodes.values() for e in n.evidence}
    assert not {c for c in cited if c.startswith((".devcontainer/", ".setupbot/"))}, cited
