"""A compiled Dockerfile builds from the fixture with nothing but the repository as context,
and the image collects and passes the tests (setuptools-scm without .git, pytest plugins named
in addopts, asyncio_mode=auto)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.compile.plan import make_plan
from bot.config import load_settings
from bot.engine import Engine
from bot.graph.mapping import Registry

pytestmark = pytest.mark.slow
REPOS = Path(__file__).parents[1] / "fixtures" / "repos"


def planned(engine, tmp_path, name):
    """The fixture ``name`` copied to a fresh folder, its plan for the newest stand-in Python, and
    the plan's Dockerfile."""
    repo = tmp_path / "repo"
    shutil.copytree(REPOS / name, repo)
    python = "3.13" if engine.image_exists("python:3.13-slim") else "3.11"
    plan = make_plan(repo, None, available_pythons=[python], resolve=False, registry=Registry(enabled=False))
    return repo, plan, plan.dockerfile.text


@pytest.fixture
def engine(docker_available):
    e = Engine.from_settings(load_settings(None))
    yield e
    e.clean(e.run_id)


def test_compiled_dockerfile_builds_and_collects(engine, tmp_path):
    repo, plan, text = planned(engine, tmp_path, "plan-scm-plugins")
    r = engine.build(repo, text, f"setupbot-test/plan-scm:{engine.run_id}")
    assert r.ok, r.log[-4000:]
    with engine.session(r.tag, workdir="/workspace") as s:
        collected = s.exec(plan.collect_command, timeout=300)
        assert collected.exit_code == 0, collected.output[-3000:]
        assert "2 tests collected" in collected.output or "test_async_mode_auto" in collected.output
        ran = s.exec(plan.test_command, timeout=300)
        assert ran.exit_code == 0, ran.output[-3000:]


def test_setup_py_that_imports_an_installed_distribution_builds_without_isolation(engine, tmp_path):
    """setup.py imports six at build time and [build-system] does not require it: pip's isolated
    build fails on the import, and the plan installs the project without isolation after six."""
    repo, plan, text = planned(engine, tmp_path, "plan-setup-py-build-import")
    assert "--no-build-isolation -e ." in text
    # the same Dockerfile with pip's isolated build: the failure the rule is for
    isolated = engine.build(repo, text.replace(" --no-build-isolation", ""), f"setupbot-test/isolated:{engine.run_id}")
    assert not isolated.ok and "No module named 'six'" in isolated.log, isolated.log[-3000:]
    r = engine.build(repo, text, f"setupbot-test/build-import:{engine.run_id}")
    assert r.ok, r.log[-4000:]
    with engine.session(r.tag, workdir="/workspace") as s:
        ran = s.exec(plan.test_command, timeout=300)
        assert ran.exit_code == 0 and "1 passed" in ran.output, ran.output[-3000:]


def test_tests_that_import_a_helper_beside_them_collect_with_their_folder_on_the_path(engine, tmp_path):
    """tests/ is a package and its test imports tests/utils.py as ``utils``: pytest puts the
    root, not tests/, on sys.path. The plan guesses no distribution for ``utils`` and puts
    tests/ on PYTHONPATH; without that line the same image cannot collect."""
    repo, plan, text = planned(engine, tmp_path, "plan-tests-sibling-import")
    assert "ENV PYTHONPATH=/workspace/tests" in text
    assert not any(line.strip() in ("utils", "utils \\") for line in text.splitlines())  # no distribution guessed
    bare = engine.build(
        repo, text.replace("ENV PYTHONPATH=/workspace/tests", ""), f"setupbot-test/bare:{engine.run_id}"
    )
    assert bare.ok, bare.log[-3000:]
    with engine.session(bare.tag, workdir="/workspace") as s:
        collected = s.exec(plan.collect_command, timeout=300)
        assert collected.exit_code != 0 and "No module named 'utils'" in collected.output, collected.output[-3000:]
    r = engine.build(repo, text, f"setupbot-test/sibling:{engine.run_id}")
    assert r.ok, r.log[-4000:]
    with engine.session(r.tag, workdir="/workspace") as s:
        ran = s.exec(plan.test_command, timeout=300)
        assert ran.exit_code == 0 and "1 passed" in ran.output, ran.output[-3000:]
