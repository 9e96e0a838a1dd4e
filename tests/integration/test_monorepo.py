"""Workspaces on the real engine: one image for the workspace, the members installed editable
in dependency order, every member's tests run in the clean replay with its own results."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.config import load_settings

REPOS = Path(__file__).resolve().parents[1] / "fixtures" / "repos"

pytestmark = [pytest.mark.slow, pytest.mark.extended]


@pytest.fixture(scope="module")
def engine(docker_available):
    from bot.engine import Engine
    from bot.engine.images import available_pythons

    eng = Engine.from_settings(load_settings(None, environ={}))
    if not {"3.11", "3.13"} <= set(available_pythons(eng)):
        pytest.fail("python:3.11-slim / python:3.13-slim are missing: run `setupbot images bootstrap` first")
    yield eng
    eng.clean(eng.run_id)


@pytest.mark.timeout(1200)
@pytest.mark.parametrize(
    "name, members",
    [
        ("mono-uv-workspace", [("core-lib", "packages/core-lib", 1), ("app-lib", "packages/app-lib", 2)]),
        ("mono-libs", [("alpha-lib", "libs/alpha", 1), ("beta-lib", "libs/beta", 1)]),
    ],
)
def test_workspace_replays_with_results_per_member(engine, tmp_path, name, members):
    from bot.pipeline import run_pipeline

    repo = tmp_path / name
    shutil.copytree(REPOS / name, repo)
    settings = load_settings(repo, environ={}, overrides={"budgets": {"wall_clock": 900}})
    result = run_pipeline(repo, settings, engine=engine, use_knowledge=False, verify=False)
    record = result.run_record
    steps = [(s.action, s.outcome, " ".join(s.command)[:80]) for s in record.trajectory.steps]
    assert record.status == "success", (record.remaining, steps)
    assert record.replay["ok"] and record.replay["tests_ran"] == sum(n for *_, n in members)
    assert not record.repairs, "the plan alone should set the workspace up"
    assert [(m["name"], m["path"], m["tests"]["passed"]) for m in record.members] == members
    report = result.generated.files[result.generated.report_path]
    for member, path, passed in members:
        assert f"member {member} ({path}): {passed} passed" in report
    # the devcontainer opens the workspace root
    devcontainer = result.generated.files[".devcontainer/devcontainer.json"]
    assert '"workspaceFolder": "/workspace"' in devcontainer and '"context": ".."' in devcontainer
