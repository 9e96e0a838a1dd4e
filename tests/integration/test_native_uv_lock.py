"""uv.lock installed natively (issue 16): the compiled Dockerfile runs `uv sync --frozen` and
the image holds exactly the locked versions. The fixture's lock pins six 1.16.0, older than
what its range would resolve to today, so an image that resolved instead of syncing differs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bot.compile.plan import make_plan
from bot.config import load_settings
from bot.engine import Engine
from bot.graph.mapping import Registry
from bot.loop.lock import installed_set

FIXTURE = Path(__file__).parents[1] / "fixtures" / "native" / "uv-frozen"


@pytest.fixture
def engine(docker_available):
    if subprocess.run(["docker", "image", "inspect", "python:3.11-slim"], capture_output=True).returncode:
        pytest.fail("python:3.11-slim is missing: run `setupbot images bootstrap` first (CI does)")
    e = Engine.from_settings(load_settings(None, overrides={"engine": {"memory": "1g"}}))
    yield e
    e.clean(e.run_id)


@pytest.mark.extended
def test_uv_lock_is_synced_frozen_into_the_image(tmp_path, engine):
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo)
    plan = make_plan(repo, None, available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False))
    text = plan.dockerfile.text
    assert "uv sync --frozen" in text and "six" not in text
    tag = f"setupbot-loop-{engine.run_id}:uv-frozen"
    built = engine.build(repo, text, tag, no_cache=True)
    assert built.ok, built.log[-3000:]
    found = installed_set(engine, tag)
    assert found.dists["six"] == "1.16.0" and found.dists["pytest"] == "8.2.1"
    assert {**found.dists, **found.from_url}.get("uv-frozen") == "0.1"  # the project itself
    tests = engine.run_once(tag, ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "/workspace/tests"])
    assert tests.ok and "1 passed" in tests.output, tests.output[-2000:]
