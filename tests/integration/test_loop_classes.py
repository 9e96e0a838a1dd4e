"""Failure classes met on repositories the rules were not written against, end to end on the
real engine. Each fixture reproduces one class (not any one repository); the run must end in a
passing clean replay, or, where no offered runtime can work, in a classified statement."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from engine_checks import run_leftovers

from bot.config import load_settings
from bot.loop import run_setup

REPOS = Path(__file__).resolve().parents[1] / "fixtures" / "repos"

pytestmark = [pytest.mark.slow, pytest.mark.extended]


@pytest.fixture(scope="module")
def engine(docker_available):
    import uuid

    from bot.engine import Engine
    from bot.engine.images import available_pythons

    # the runner's own network, so these tests do not depend on the engine's default bridge
    net = f"setupbot-test-classes-{uuid.uuid4().hex[:8]}"
    subprocess.run(["docker", "network", "create", "--driver", "bridge", net], check=True, capture_output=True)
    try:
        settings = load_settings(None, environ={}, overrides={"engine": {"network_mode": net}})
        eng = Engine.from_settings(settings)
        missing = {"3.11", "3.13"} - set(available_pythons(eng))
        if missing:
            pytest.skip(f"stand-in images missing for Python {sorted(missing)}: run `setupbot images bootstrap`")
        yield eng
        eng.clean(eng.run_id)
    finally:
        subprocess.run(["docker", "network", "rm", net], capture_output=True)


def run(engine, tmp_path, name, pythons=None):
    repo = tmp_path / name
    shutil.copytree(REPOS / name, repo)
    settings = load_settings(
        repo,
        environ={},
        overrides={"knowledge": {"path": str(tmp_path / "xp.sqlite")}, "budgets": {"wall_clock": 1500}},
    )
    from bot.knowledge import open_store

    extra = {"available_pythons": pythons} if pythons else {}
    record = run_setup(repo, settings, engine, open_store(settings.knowledge), **extra)
    assert run_leftovers(engine) == [], "the run left containers or networks behind"
    steps = [(s.action, s.outcome, " ".join(s.command)) for s in record.trajectory.steps]
    return record, steps


def replayed(record, steps):
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


def kept(record):
    return [(r.candidate.source, r.candidate.describe()) for r in record.repairs]


def test_class1_an_application_is_not_an_installable_package(engine, tmp_path):
    # setuptools refuses the flat layout with two top-level packages; the loop installs the
    # dependencies only and runs the tests from the checkout
    record, steps = run(engine, tmp_path, "loop-app-flat")
    replayed(record, steps)
    assert [d for _, d in kept(record)] == ["install_deps_only"]
    assert "-e ." not in record.dockerfile and "PYTHONPATH=/workspace" in record.dockerfile
    assert record.tests.count("passed") == 1


def test_class5_service_on_localhost_over_ipv4_and_ipv6(engine, tmp_path):
    # the CI service is started as a sibling; the tests dial 127.0.0.1 and ::1, which the
    # relay in the runner forwards to it
    record, steps = run(engine, tmp_path, "loop-localhost-v6")
    replayed(record, steps)
    assert any(a == "services" and o == "ok" for a, o, _ in steps)
    assert record.tests.count("passed") == 2


def test_class6_ci_mysql_service_is_started_and_wired(engine, tmp_path):
    # the workflow's mysql service (served by the MariaDB stand-in, reported) with its DB_* env
    record, steps = run(engine, tmp_path, "loop-ci-mysql")
    replayed(record, steps)
    assert any(a == "services" and o == "ok" for a, o, _ in steps)
    assert record.tests.count("passed") == 1


def test_class7_conflicting_system_packages_the_plan_keeps_one(engine, tmp_path):
    # two CI jobs install the two libcurl flavours; apt cannot have both
    record, steps = run(engine, tmp_path, "loop-apt-conflict")
    replayed(record, steps)
    assert record.repairs == []
    assert "libcurl4-openssl-dev" in record.dockerfile and "libcurl4-gnutls-dev" not in record.dockerfile


def test_class7_conflicting_system_packages_the_loop_keeps_one(engine, tmp_path, monkeypatch):
    # without the plan's table of alternatives, apt's own conflict line decides
    import bot.graph.alternatives as alternatives

    monkeypatch.setattr(alternatives, "APT_ALTERNATIVES", ())
    record, steps = run(engine, tmp_path, "loop-apt-conflict")
    replayed(record, steps)
    assert [d for _, d in kept(record)][0].startswith("drop_package apt libcurl4-"), kept(record)
    assert ("libcurl4-openssl-dev" in record.dockerfile) != ("libcurl4-gnutls-dev" in record.dockerfile)


def test_class4_a_fork_keeps_its_import_name(engine, tmp_path):
    # the declared fork provides `slugify`; the plan's import guess installs the original over
    # it. The loop reads what the installed distributions provide and leaves the guess out.
    record, steps = run(engine, tmp_path, "loop-import-fork")
    replayed(record, steps)
    assert [d for _, d in kept(record)] == ["drop_package pip python-slugify"]
    assert not any("pip_install python-slugify" in c for _, _, c in steps)


def test_class2_a_dependency_built_without_its_optional_extension(engine, tmp_path):
    # PyYAML 5.4.1 has no wheel for 3.11 (its build needs Cython<3, which the repository's
    # constraints say): pip builds it without libyaml and without its C loader; the loop adds
    # the -dev package and a compiler and rebuilds it from source
    # (the Pythons the fixture is about: where the 3.9 stand-in is built, PyYAML 5.4.1 has a wheel)
    record, steps = run(engine, tmp_path, "loop-native-optional", pythons=["3.11", "3.13"])
    replayed(record, steps)
    described = [d for _, d in kept(record)]
    assert any("libyaml-dev" in d and "--no-binary PyYAML PyYAML==5.4.1" in d for d in described), described
    assert "libyaml-dev" in record.dockerfile and "--force-reinstall" in record.dockerfile


def test_class3_a_pin_no_offered_python_installs_is_stated(engine, tmp_path):
    # (offered: 3.11 and 3.13; where the 3.9 stand-in is built, scipy 1.7.3 installs on it)
    record, steps = run(engine, tmp_path, "loop-old-pin", pythons=["3.11", "3.13"])
    assert record.status != "success"
    assert "scipy==1.7.3 needs Python >=3.7,<3.11" in record.remaining, record.remaining
    assert "none of the offered Pythons" in record.remaining
    assert all(u.get("kind") != "unclassified" for u in record.unresolved)


def test_generic_strategy_follows_the_ci_install_commands(engine, tmp_path):
    # nothing classifies "this suite needs the tool its CI installs"; the CI's own install
    # command does
    record, steps = run(engine, tmp_path, "loop-generic-ci")
    replayed(record, steps)
    assert record.strategies and record.strategies[0]["strategy"] == "follow the CI's install commands"
    # (the Dockerfile installs the lock the replay proved, which holds what the strategy added)
    assert record.strategies[0]["kept"] and "cowsay" in (record.dockerfile + record.lock_text)


def test_class1_a_poetry_application_with_django_runs_its_own_test_runner(engine, tmp_path):
    # package-mode = false: the plan installs the dependencies only; pytest finds no tests in
    # Django's tests.py modules, and the loop runs the runner the project declares
    record, steps = run(engine, tmp_path, "loop-django-app")
    replayed(record, steps)
    assert [d for _, d in kept(record)] == ["test_command python manage.py test"]
    assert "-e ." not in record.dockerfile
    assert 'CMD ["python", "manage.py", "test"]' in record.dockerfile
    first = next(s for s in record.trajectory.steps if s.action == "build")
    if first.detail["cached_steps"] == 0:
        # the repair changed only the CMD: the first image, built from scratch, is every layer
        # of the replay, and a fresh container on it ran the new command with no rebuild
        assert record.replay["fresh_container"] and record.replay["lock"]["status"] == "locked"
        assert not [s for s in record.trajectory.steps if s.action == "replay"]


def test_a_service_variable_read_with_getenv_starts_the_service_that_sets_it(engine, tmp_path):
    # create_engine(os.getenv("DATABASE_URL")) gets None; the plan installs psycopg2, and the
    # postgres service's wiring sets DATABASE_URL: the tests then reach a real server
    record, steps = run(engine, tmp_path, "loop-getenv-service")
    replayed(record, steps)
    assert ("rule", "start_service service=postgres") in kept(record)
    assert record.tests.count("passed") == 1


def test_a_pin_with_no_wheel_for_the_newest_python_plans_an_older_one(engine, tmp_path):
    # onnxruntime 1.16.3 ships wheels up to cp311 and no sdist: the plan takes 3.11, says why,
    # and the first build installs it
    record, steps = run(engine, tmp_path, "loop-pin-no-wheel-newest")
    replayed(record, steps)
    assert "FROM python:3.11-slim" in record.dockerfile and not record.repairs
    assert "not 3.13" in record.dockerfile  # the FROM line's reason says why not the newest
    assert record.tests.count("passed") == 1


def test_setup_py_importing_what_the_isolated_build_lacks_installs_without_isolation(engine, tmp_path):
    # setup.py imports, inside functions the plan's reading does not follow, a distribution the
    # package depends on (six) and the package itself; pip's isolated build has neither. The
    # unit for a module missing under run_setup keeps six installed and builds without
    # isolation, then puts the checkout on the build's path for the package's own import
    record, steps = run(engine, tmp_path, "loop-isolated-build-import")
    replayed(record, steps)
    assert [d for _, d in kept(record)] == ["build_without_isolation six", "build_without_isolation isobuild"]
    install = [line for line in record.dockerfile.splitlines() if line.rstrip().endswith("-e .")]
    assert install and "--no-build-isolation" in install[-1] and "PYTHONPATH=/workspace" in install[-1], install
    assert record.tests.count("passed") == 1


def test_a_cython_module_nothing_compiles_is_compiled_in_place(engine, tmp_path):
    # the package's build leaves its C++ Cython kernel uncompiled (only a side script builds it),
    # so the tests cannot import sampling.fast.pick: the rule installs g++, Cython and setuptools
    # (distutils, which Python 3.12 dropped, for cythonize) and
    # compiles the .pyx next to its source, in the image and again in the devcontainer
    record, steps = run(engine, tmp_path, "loop-cython-in-place")
    replayed(record, steps)
    assert [(s, d) for s, d in kept(record)] == [
        ("rule", "apt_install g++; pip_install Cython setuptools; compile_in_place sampling/fast/pick.pyx")
    ]
    lines = record.dockerfile.splitlines()
    assert "RUN python -m Cython.Build.Cythonize -i sampling/fast/pick.pyx" in lines
    assert lines.index("RUN python -m Cython.Build.Cythonize -i sampling/fast/pick.pyx") > lines.index(
        'COPY [".", "/workspace"]'
    )
    assert record.tests.count("passed") == 3


def test_code_testing_an_array_string_comparison_gets_numpy_before_its_change(engine, tmp_path):
    # the package compares an array with a string in an `if` at import: NumPy 1.25 made that an
    # array, so collection raises; the rule moves to Python 3.11 (NumPy 1.24's newest) with
    # numpy<1.25, and the clean replay proves it
    record, steps = run(engine, tmp_path, "loop-numpy-string-compare")
    replayed(record, steps)
    assert kept(record) == [("rule", "switch_python version=3.11; pip_constraint numpy<1.25")]
    # the lock the replay proved holds the release the constraint chose
    assert "FROM python:3.11-slim" in record.dockerfile and "numpy==1.24." in record.lock_text
    assert record.tests.count("passed") == 2
