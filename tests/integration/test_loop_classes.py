"""Failure classes met on repositories the rules were not written against, end to end on the
real engine. Each fixture reproduces one class (not any one repository); the run must end in a
passing clean replay, or, where no offered runtime can work, in a classified statement."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bot.config import load_settings
from bot.loop import run_setup

REPOS = Path(__file__).resolve().parents[1] / "fixtures" / "repos"

pytestmark = [pytest.mark.slow]


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


def _leftovers(engine) -> list[str]:
    out = subprocess.run(["docker", "ps", "-a", "-q", "--filter", f"label=setupbot.run={engine.run_id}"],
                         capture_output=True, text=True, check=True).stdout.split()
    nets = subprocess.run(["docker", "network", "ls", "-q", "--filter", f"label=setupbot.run={engine.run_id}"],
                          capture_output=True, text=True, check=True).stdout.split()
    return out + nets


def run(engine, tmp_path, name):
    repo = tmp_path / name
    shutil.copytree(REPOS / name, repo)
    settings = load_settings(repo, environ={}, overrides={"knowledge": {"path": str(tmp_path / "xp.sqlite")},
                                                          "budgets": {"wall_clock": 1500}})
    from bot.knowledge import open_store

    record = run_setup(repo, settings, engine, open_store(settings.knowledge))
    assert _leftovers(engine) == [], "the run left containers or networks behind"
    steps = [(s.action, s.outcome, " ".join(s.command)) for s in record.trajectory.steps]
    return record, steps


def replayed(record, steps):
    assert record.status == "success", (record.remaining, steps)
    assert record.replay["ok"] and record.replay["collect_exit"] == 0
    replay_builds = [s for s in record.trajectory.steps if s.action == "replay"]
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
