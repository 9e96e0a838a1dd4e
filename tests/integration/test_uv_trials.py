"""A trial's pip install runs with the host's uv in the runner (bot.loop.trials): what the
container's pip settings say still holds, a setting uv does not read sends the install to pip,
and uv leaves nothing behind for a snapshot or a test to see."""

from __future__ import annotations

import pytest

from bot.atoms import Atom
from bot.config import load_settings
from bot.engine import Engine
from bot.loop.orchestrator import SetupLoop
from bot.loop.records import RunRecord
from bot.loop.trajectory import Budget
from bot.loop.trials import UV_IN_RUNNER
from bot.loop.workspace import Workspace

IMAGE = "python:3.11-slim"


@pytest.fixture
def engine(docker_available):
    e = Engine.from_settings(load_settings(None))
    yield e
    e.clean(e.run_id)


def _loop() -> SetupLoop:
    lp = SetupLoop.__new__(SetupLoop)
    lp.record = RunRecord(repo="r", run_id="x")
    lp.traj = lp.record.trajectory
    lp.budget = Budget(max_steps=20, wall_clock=3600, command_timeout=300)
    lp._final = False
    return lp


def _trials(lp: SetupLoop) -> list[list[str]]:
    return [s.command for s in lp.traj.steps if s.action == "trial"]


def test_a_trial_s_pip_install_runs_with_uv_under_the_container_s_constraint(engine):
    lp = _loop()
    # a CI workflow's env that quietens pip (jaraco's projects) changes nothing uv installs
    env = {"PIP_CONSTRAINT": "/tmp/constraints.txt", "PIP_NO_WARN_SCRIPT_LOCATION": "true"}
    with engine.session(IMAGE, env=env) as s:
        s.exec(["sh", "-c", "echo 'six==1.16.0' > /tmp/constraints.txt"])
        ws = Workspace("t", None)
        ws.session = s
        assert lp._run_trial_commands(ws, Atom("pip_install", {"packages": ["six"]}), {}) == ""
        # one command, uv's, and no pip after it
        (ran,) = _trials(lp)
        assert ran[:2] == ["sh", "-c"] and UV_IN_RUNNER in ran and "--system" in ran
        assert s.exec(["python", "-c", "import six; print(six.__version__)"]).output.strip() == "1.16.0"
        assert s.exec(["test", "-e", UV_IN_RUNNER.rsplit("/", 1)[0]]).exit_code == 1
        # a pip setting uv does not read: uv does nothing and pip installs as written
        only = Atom("pip_install", {"packages": ["six==1.16.0"]})
        assert lp._run_trial_commands(ws, only, {"PIP_ONLY_BINARY": ":all:"}) == ""
        uv_run, pip_run = _trials(lp)[1:]
        assert UV_IN_RUNNER in uv_run and pip_run[:4] == ["python", "-m", "pip", "install"]
        assert lp.traj.steps[-2].exit_code == 97
        assert "PIP_ONLY_BINARY is set and uv does not read it" in lp.traj.steps[-2].output_tail


def test_a_package_that_does_not_exist_fails_the_trial_as_pip_says_it(engine):
    lp = _loop()
    with engine.session(IMAGE) as s:
        ws = Workspace("t", None)
        ws.session = s
        failed = lp._run_trial_commands(ws, Atom("pip_install", {"packages": ["setupbot-no-such-dist-zzq"]}), {})
        assert failed.startswith("python -m pip install") and failed.endswith("exited 1")
        assert [c[0] for c in _trials(lp)] == ["sh", "python"]
