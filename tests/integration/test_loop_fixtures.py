"""The setup loop end to end on the real engine: each fixture repository needs one class of
repair; the run must end in a passing clean replay (no-cache build of the compiled Dockerfile,
fresh container). Where the static plan already solves a case, the test says so and checks that
the loop confirmed it without repairs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from engine_checks import run_leftovers

from bot.config import load_settings
from bot.loop import run_setup

REPOS = Path(__file__).resolve().parents[1] / "fixtures" / "repos"

pytestmark = [pytest.mark.slow, pytest.mark.extended]


@pytest.fixture(scope="module")
def engine(docker_available):
    from bot.engine import Engine
    from bot.engine.images import available_pythons

    settings = load_settings(None, environ={})
    eng = Engine.from_settings(settings)
    missing = {"3.11", "3.13"} - set(available_pythons(eng))
    if missing:
        pytest.skip(f"stand-in images missing for Python {sorted(missing)}: run `setupbot images bootstrap`")
    yield eng
    eng.clean(eng.run_id)


def setup(engine, tmp_path, name, extra_units=()):
    from bot.knowledge import Unit, open_store

    repo = tmp_path / name
    shutil.copytree(REPOS / name, repo)
    settings = load_settings(
        repo,
        environ={},
        overrides={"knowledge": {"path": str(tmp_path / "xp.sqlite")}, "budgets": {"wall_clock": 1500}},
    )
    store = open_store(settings.knowledge)
    for unit in extra_units:
        store.add(Unit.from_json(unit), replace=True)
    record = run_setup(repo, settings, engine, store)
    assert run_leftovers(engine) == [], "the run left containers or networks behind"
    steps = [(s.action, s.outcome, " ".join(s.command)) for s in record.trajectory.steps]
    assert record.status == "success", (record.remaining, steps)
    assert record.replay["ok"] and record.replay["collect_exit"] == 0
    replay_builds = [s for s in record.trajectory.steps if s.action == "replay"]
    if record.replay.get("first_build"):
        # the first image, built with no step from the cache and needing no repair, was the replay
        assert not replay_builds and not record.repairs
    elif record.replay.get("fresh_container"):
        # the repairs changed only the test command or the tests' variables: a fresh container
        # on the first image, built with no step from the cache, ran the tests
        kinds = {a.kind for r in record.repairs for a in r.candidate.atoms}
        assert not replay_builds and kinds and kinds <= {"test_command", "set_env", "start_service"}, kinds
    else:
        assert replay_builds and "--no-cache" in replay_builds[-1].command
    return record, steps


def kept(record):
    return [(r.candidate.source, r.candidate.describe()) for r in record.repairs]


def test_c_extension_against_a_debian_dev_library(engine, tmp_path):
    # The plan sees setup.py's Extension and installs a compiler; the header is only named by
    # the failing compile in the build log: the loop adds Debian's libyaml-dev.
    record, steps = setup(engine, tmp_path, "loop-cext-yaml")
    assert any("libyaml-dev" in d for _, d in kept(record)), kept(record)
    assert "libyaml-dev" in record.dockerfile
    assert record.tests.count("passed") == 1


def test_runtime_import_with_another_distribution_name_and_a_worse_first_candidate(engine, tmp_path):
    # The import is by name at runtime, so the static scan cannot see it. A naive unit in the
    # experience base offers the import name as the distribution (`attr`, a different package):
    # the error gets worse (module 'attr' has no attribute 'define'), the loop rolls back and
    # keeps `attrs`.
    naive = {
        "id": "naive-import-name",
        "category": "install",
        "title": "install the import name",
        "signals": {"patterns": [r"No module named '(\w+)'"], "keywords": ["modulenotfounderror"]},
        "advice": "Install the distribution with the import's name.",
        "weight": 2,
        "atoms": [{"kind": "pip_install", "packages": ["{match:1}"]}],
    }
    record, steps = setup(engine, tmp_path, "loop-import-alias", extra_units=[naive])
    assert kept(record) == [("knowledge", "pip_install attrs")]
    assert ("rollback", "worse", "pip_install attr") in steps
    # the repair is part of the proven set the Dockerfile installs from the lock (issue 16)
    assert record.replay["lock"]["status"] == "locked", record.replay["lock"]
    assert "\nattrs==" in record.lock_text and "requirements.lock" in record.dockerfile


def test_python_floor_needs_the_313_image(engine, tmp_path):
    # .python-version says 3.11, the code imports typing.TypeIs (3.13): only the collection error
    # shows the floor; the loop switches the base image and rebuilds.
    record, steps = setup(engine, tmp_path, "loop-py313")
    assert ("version=3.13" in kept(record)[0][1]) and kept(record)[0][1].startswith("switch_python")
    assert "FROM python:3.13-slim" in record.dockerfile


def test_setuptools_scm_without_git_is_handled_by_the_plan(engine, tmp_path):
    record, steps = setup(engine, tmp_path, "loop-scm")
    assert record.repairs == []
    assert "SETUPTOOLS_SCM_PRETEND_VERSION" in record.dockerfile
    assert steps[1][:2] == ("build", "ok")


def test_pytest_plugin_in_addopts_is_handled_by_the_plan(engine, tmp_path):
    record, steps = setup(engine, tmp_path, "loop-plugin-addopts")
    assert record.repairs == []
    assert "\npytest-timeout==" in record.lock_text and "requirements.lock" in record.dockerfile


def test_settings_env_var_from_the_repositorys_target_env(engine, tmp_path):
    # The value comes from target.env in the repository's .github/setupbot.yml, never from
    # .env.example (a value read from a file is not turned into an ENV: issue 15)
    record, steps = setup(engine, tmp_path, "loop-settings-env")
    assert kept(record) == []
    assert record.tests.count("passed") >= 1


def test_missing_service_started_as_a_sibling(engine, tmp_path):
    # Nothing static names Redis; the refused connection on 6379 does. The loop starts a redis
    # sibling on a private network (rebuild trial), the wiring env points REDIS_URL at it, and
    # the replay starts it again.
    record, steps = setup(engine, tmp_path, "loop-service-redis")
    assert [d for _, d in kept(record)] == ["start_service service=redis"]
    assert any(a == "services" and o == "ok" for a, o, _ in steps)
    assert record.tests.count("passed") == 1
