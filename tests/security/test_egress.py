"""S15: service networks are internal; runners cannot reach link-local addresses (cloud metadata)
or the host where the guard can be set up, and the report says when it cannot.

On this machine the proxy in front of the network answers every TCP connection, 169.254.169.254
included, so "reachable" is observable: an unguarded container on the default bridge reaches
both the metadata address and a port the test opens on the host, which shows the probe can fail.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading

import pytest
from sec_helpers import docker, leftovers

from bot.engine import egress as egress_guard

PROBE = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=4).close(); print('OPEN')\n"
    "except OSError as e: print('BLOCKED', type(e).__name__)\n"
)


def _probe(session, host: str, port: int) -> str:
    return session.exec(["python", "-c", PROBE, host, str(port)], timeout=60).output.strip().split()[0]


@pytest.fixture
def host_listener():
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", 0))
    srv.listen(16)
    stop = threading.Event()

    def accept():
        srv.settimeout(0.5)
        while not stop.is_set():
            try:
                srv.accept()[0].close()
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    srv.close()


@pytest.mark.docker
@pytest.mark.serial  # host firewall rules
def test_service_network_is_internal_and_the_runner_still_has_a_way_out(docker_available):
    from bot.config import load_settings
    from bot.engine import Engine

    engine = Engine.from_settings(load_settings(None, environ={}))
    try:
        with engine.network("svc") as net:
            assert json.loads(docker("network", "inspect", net))[0]["Internal"] is True
            service = engine.start_container(
                "python:3.11-slim", "svc", network=net, aliases=["db"], command=["sleep", "600"]
            )
            # nothing on the service network gets out (the proxy would answer any address)
            for host, port in (("1.1.1.1", 443), ("169.254.169.254", 80)):
                out = engine.exec_in(service.name, ["python", "-c", PROBE, host, str(port)]).output
                assert out.startswith("BLOCKED"), (host, out)
            with engine.session("python:3.11-slim", network=net, name_hint="runner") as runner:
                nets = json.loads(docker("inspect", runner.name))[0]["NetworkSettings"]["Networks"]
                assert net in nets and len(nets) == 2, nets
                assert _probe(runner, "pypi.org", 443) == "OPEN"  # the runner still installs packages
    finally:
        engine.clean(engine.run_id)
    assert leftovers(engine.run_id) == {"containers": [], "networks": [], "volumes": [], "images": []}


@pytest.mark.docker
@pytest.mark.serial  # host firewall rules
def test_runners_cannot_reach_link_local_or_the_host_and_the_rules_go_with_the_run(docker_available, host_listener):
    from bot.config import load_settings
    from bot.engine import Engine

    why = egress_guard.why_not("docker")
    engine = Engine.from_settings(load_settings(None, environ={}))
    port = host_listener
    try:
        with engine.session("python:3.11-slim", name_hint="runner") as runner:
            facts = engine.egress
            print(f"\negress guard: {facts.report_line()}")
            if why:
                # cannot hold here: the report must say so
                assert not facts.guarded and any("egress is open" in n for n in engine.sandbox_notes())
                pytest.skip(f"the egress guard cannot be set up here: {why}")
            assert facts.guarded and not engine.sandbox_notes()
            gateway = json.loads(docker("network", "inspect", facts.network))[0]["IPAM"]["Config"][0]["Gateway"]
            assert _probe(runner, "169.254.169.254", 80) == "BLOCKED"
            assert _probe(runner, gateway, port) == "BLOCKED"
            assert _probe(runner, "172.17.0.1", port) == "BLOCKED"  # another address of the host
            assert _probe(runner, "pypi.org", 443) == "OPEN"  # the registries stay reachable
        # RUN steps of the classic builder run on the same network, under the same rules
        if not engine.buildkit_available():
            import tempfile

            build = engine.build(
                tempfile.mkdtemp(),
                'FROM python:3.11-slim\nRUN python -c "import socket; '
                "socket.create_connection(('169.254.169.254', 80), timeout=3)\" "
                "&& echo LINK-LOCAL-OPEN || echo LINK-LOCAL-BLOCKED\n",
                f"setupbot-egress-probe:{engine.run_id}",
                no_cache=True,
            )
            assert build.ok and "\nLINK-LOCAL-BLOCKED" in build.log.replace("\x1b[0m", "\n"), build.log[-2000:]
        # the control: the same probes from an unguarded container on the default bridge succeed
        control = engine.start_container("python:3.11-slim", "control", command=["sleep", "600"])
        assert engine.exec_in(control.name, ["python", "-c", PROBE, "169.254.169.254", "80"]).output.startswith("OPEN")
        assert engine.exec_in(control.name, ["python", "-c", PROBE, "172.17.0.1", str(port)]).output.startswith("OPEN")
    finally:
        engine.clean(engine.run_id)
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
    assert egress_guard.comment(engine.run_id) not in rules
    assert leftovers(engine.run_id) == {"containers": [], "networks": [], "volumes": [], "images": []}


def test_without_the_guard_the_report_says_egress_is_open(monkeypatch):
    from bot.config import load_settings
    from bot.engine import Engine

    if not __import__("shutil").which("docker"):
        pytest.skip("no docker CLI")
    monkeypatch.setattr(egress_guard, "why_not", lambda kind: "setupbot does not run as root")
    engine = Engine.from_settings(load_settings(None, environ={}))
    assert engine.egress_network() == "bridge"
    notes = engine.sandbox_notes()
    assert len(notes) == 1 and "egress is open" in notes[0] and "not run as root" in notes[0]


def test_builds_under_buildkit_are_reported_as_unbounded(monkeypatch):
    from bot.config import load_settings
    from bot.engine import Engine

    if not __import__("shutil").which("docker"):
        pytest.skip("no docker CLI")
    monkeypatch.setattr(egress_guard, "why_not", lambda kind: "")
    engine = Engine.from_settings(load_settings(None, environ={}))
    assert engine.sandbox_notes() == []  # nothing built, no runner yet: nothing to say
    engine._buildkit = True  # what buildkit_available() found
    notes = engine.sandbox_notes()
    assert len(notes) == 1 and "BuildKit" in notes[0] and "build timeout" in notes[0]
