"""SECURITY.md S9: a sibling service sits on a private network shared only with the runner.
A container of the same run on another network (or on the default bridge) cannot resolve or
reach it; the runner on its network can."""

from __future__ import annotations

import pytest
from sec_helpers import assert_hardened, docker, leftovers

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]

PROBE = (
    "import socket, sys, time\n"
    "for _ in range(int(sys.argv[2])):\n"
    "    try:\n"
    "        socket.create_connection((sys.argv[1], 8080), timeout=1).close(); print('REACHED'); break\n"
    "    except socket.gaierror: print('NO-NAME'); break\n"
    "    except OSError: time.sleep(0.25)\n"
    "else: print('NO-ROUTE')\n"
)


def test_service_network_is_private_to_the_runner(docker_available):
    import json

    from bot.config import load_settings
    from bot.engine import Engine

    engine = Engine.from_settings(load_settings(None, environ={}))
    try:
        with engine.network("svc") as private, engine.network("other") as other:
            service = engine.start_container(
                "python:3.11-slim",
                "svc-db",
                network=private,
                aliases=["db"],
                command=["python", "-m", "http.server", "8080"],
            )
            with engine.session("python:3.11-slim", network=private, name_hint="runner") as runner:
                assert runner.exec(["python", "-c", PROBE, "db", "40"], timeout=60).output.strip() == "REACHED"
            address = json.loads(docker("inspect", service.name))[0]["NetworkSettings"]["Networks"][private][
                "IPAddress"
            ]
            with engine.session("python:3.11-slim", network=other, name_hint="outsider") as outsider:
                assert outsider.exec(["python", "-c", PROBE, "db", "40"], timeout=60).output.strip() == "NO-NAME"
                # not by address either: the engine isolates bridge networks from each other
                assert outsider.exec(["python", "-c", PROBE, address, "3"], timeout=60).output.strip() == "NO-ROUTE"
            with engine.session("python:3.11-slim", name_hint="bridge") as bridged:
                assert bridged.exec(["python", "-c", PROBE, "db", "40"], timeout=60).output.strip() == "NO-NAME"
                assert bridged.exec(["python", "-c", PROBE, address, "3"], timeout=60).output.strip() == "NO-ROUTE"
            info = json.loads(docker("network", "inspect", private))[0]
            assert info["Driver"] == "bridge" and info["Labels"].get("setupbot.run") == engine.run_id
            members = [c["Name"] for c in info["Containers"].values()]
            assert members == [service.name]  # the runner has left with its session
            assert_hardened(json.loads(docker("inspect", service.name))[0])
    finally:
        engine.clean(engine.run_id)
    assert leftovers(engine.run_id) == {"containers": [], "networks": [], "volumes": [], "images": []}
