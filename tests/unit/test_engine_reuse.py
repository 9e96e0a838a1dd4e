"""An engine used again after its run was cleaned (two repositories in one test session, one
engine) makes its networks anew; before, the second run's first build named the egress network
the first run's clean had removed, and failed with "network ...-egress not found"."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from bot.config import load_settings
from bot.engine import core


@pytest.fixture
def engine(monkeypatch):
    if shutil.which("docker") is None:
        pytest.skip("Engine() needs a docker binary on PATH to name")
    e = core.Engine(load_settings(None, environ={}), run_id="reuse", environ={})
    calls: list[list[str]] = []

    def run_cli(args, **kwargs):
        calls.append(list(args))
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(e, "run_cli", run_cli)
    monkeypatch.setattr(core.egress_guard, "remove_rules", lambda run_id: None)
    e.egress = core.EgressFacts(True, "setupbot-reuse-1-egress")
    e._egress_net = "setupbot-reuse-1-egress"
    e._internal_networks.add("setupbot-reuse-2-services")
    return e


def test_cleaning_its_own_run_forgets_the_networks_it_made(engine):
    engine.clean("reuse")
    assert engine.egress is None and engine._egress_net is None and not engine._internal_networks


def test_cleaning_another_run_keeps_them(engine):
    engine.clean("someone-else")
    assert engine._egress_net == "setupbot-reuse-1-egress" and engine._internal_networks
