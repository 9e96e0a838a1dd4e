"""Sibling repositories on the real engine: the client fixture's integration tests call the
server fixture, which setupbot builds from its own Dockerfile and starts on the private network.
They pass with it and fail without it, and the record says they needed it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bot.config import load_settings
from bot.verify.run import verify_environment
from bot.verify.siblings import SiblingManager, SiblingSpec, specs_from_settings

REPOS = Path(__file__).resolve().parents[1] / "fixtures" / "repos"
CLIENT = REPOS / "sibling-client"
OPERATOR_CONFIG = Path(__file__).resolve().parents[1] / "fixtures" / "operator" / "sibling-client.yml"


@pytest.mark.slow
def test_client_passes_with_the_server_from_its_own_dockerfile(verify_engine, plain_pytest_image, tmp_path):
    settings = load_settings(CLIENT, config_file=OPERATOR_CONFIG)
    siblings, warnings = specs_from_settings(settings.siblings)
    assert warnings == [] and [s.name for s in siblings] == ["server"]
    record = verify_environment(
        verify_engine,
        CLIENT,
        plain_pytest_image,
        siblings=siblings,
        copy_repo=True,
        checks=("imports", "tests"),
        test_timeout=300,
    )
    data = json.loads(record.write(tmp_path / "verification.json").read_text())

    assert data["siblings"][0]["healthy"] and data["siblings"][0]["built"], data["siblings"]
    with_ = data["tests_with_siblings"]["tests"]
    without = data["tests_without_siblings"]["tests"]
    integration = ["tests.test_integration::test_add_calls_the_server", "tests.test_integration::test_negative_numbers"]
    assert [with_[t] for t in integration] == ["passed", "passed"]
    assert [without[t] for t in integration] == ["failed", "failed"]
    assert without["tests.test_unit::test_module_has_add"] == "passed"
    assert data["attribution"]["needed"] == {"server": integration}
    assert data["wired_env"] == ["SERVER_URL"]
    assert data["verdict"]["tier"] == "Full"


def test_sibling_that_does_not_build_or_start_is_reported(verify_engine, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "Dockerfile").write_text("FROM python:3.11-slim\nRUN exit 3\n")
    silent = tmp_path / "silent"
    silent.mkdir()
    (silent / "Dockerfile").write_text('FROM python:3.11-slim\nCMD ["sleep", "600"]\n')
    specs = [
        SiblingSpec.from_setting({"name": "broken", "path": str(broken), "port": 80}),
        SiblingSpec.from_setting(
            {"name": "silent", "path": str(silent), "port": 9000, "probe": "http:/", "health_timeout": 5}
        ),
    ]
    with verify_engine.network() as net, SiblingManager(verify_engine, net, tmp_path) as manager:
        outcomes, env = manager.start(specs)
        assert env == {}
        assert not outcomes[0].built and "did not build" in outcomes[0].note
        assert outcomes[1].built and not outcomes[1].healthy and "not healthy after 5s" in outcomes[1].note
        left = subprocess.run(
            ["docker", "ps", "-q", "--filter", f"label=setupbot.run={verify_engine.run_id}"],
            capture_output=True,
            text=True,
        ).stdout.split()
        assert left == []
