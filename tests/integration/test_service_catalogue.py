"""The catalogue's newest kind on the real engine: memcached, added as one catalogue entry plus its
stand-in template, starts from a CI-style requirement naming another tag, answers its health
probe and serves the wired test client; MongoDB, which Debian does not package, is reported as
unable to start offline in bounded time and leaves nothing behind (bot/catalogue.py, issue #17)."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid

import pytest
import yaml

from bot.catalogue import KINDS
from bot.compile.devcontainer import parse_devcontainer
from bot.compile.plan import make_plan
from bot.config import load_settings
from bot.engine import Engine
from bot.evidence.model import ServiceRequirement
from bot.graph.mapping import Registry
from bot.outputs import outputs_from_pipeline, write_outputs
from bot.services import ServiceManager

MEMCACHED = KINDS["memcached"].standin.tag if KINDS["memcached"].standin else ""
# the memcached text protocol over a plain socket: the client needs nothing from PyPI
CLIENT = (
    "import os, socket\n"
    "s = socket.create_connection((os.environ['MEMCACHED_HOST'], int(os.environ['MEMCACHED_PORT'])), 10)\n"
    "s.sendall(b'set greeting 0 60 5\\r\\nhello\\r\\nget greeting\\r\\n')\n"
    "data = b''\n"
    "while not data.endswith(b'END\\r\\n'):\n"
    "    data += s.recv(4096)\n"
    "print(data.decode().replace('\\r\\n', '|'))\n"
)


def _have(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0


def _leftovers(run_id: str) -> list[str]:
    return subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=setupbot.run={run_id}"], capture_output=True, text=True
    ).stdout.split()


@pytest.fixture(scope="module")
def engine(docker_available):
    missing = [t for t in ("python:3.11-slim", MEMCACHED) if not _have(t)]
    if missing:
        pytest.fail(f"images missing: {', '.join(missing)}; run `setupbot images bootstrap` first (CI does)")
    e = Engine.from_settings(load_settings(None, overrides={"engine": {"memory": "1g"}}))
    yield e
    e.clean(e.run_id)
    assert _leftovers(e.run_id) == []


def test_memcached_stand_in_starts_and_serves_the_wired_client(engine):
    with engine.network() as net, ServiceManager(engine, net) as sm:
        # a CI block names the alpine tag; the Debian stand-in serves it and the record says so
        started = sm.start([{"name": "cache", "image": "memcached:1.6-alpine", "ports": ["11211:11211"]}])
        outcome = started.outcomes[0]
        assert started.all_healthy, outcome.to_json()
        assert outcome.image == MEMCACHED and "stand-in" in outcome.note
        assert started.env["MEMCACHED_HOST"] == "cache" and started.env["MEMCACHED_PORT"] == "11211"
        with engine.session("python:3.11-slim", env=started.env, network=net, name_hint="probe") as s:
            res = s.exec(["python", "-c", CLIENT], timeout=60)
    assert res.exit_code == 0, res.output
    assert "VALUE greeting 0 5|hello|END|" in res.output


def test_mongodb_is_reported_as_unable_to_start_offline(engine):
    if _have("mongo:8") or _have("mongo:7") or _have("mongo:latest"):
        pytest.skip("this engine has an official mongo image, so MongoDB can start here")
    with engine.network() as net, ServiceManager(engine, net, health_timeout=8, interval=1) as sm:
        began = time.monotonic()
        out = sm.start([{"name": "db", "image": "mongo:7"}])
        outcome = out.outcomes[0]
        assert not outcome.healthy and "cannot start offline" in outcome.note and "Debian" in outcome.note
        assert time.monotonic() - began < 10
        assert out.env == {} or "MONGO_URL" not in out.env
        assert _leftovers(engine.run_id) == []


def _compose_cli() -> list[str]:
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.fail("neither `docker compose` nor `docker-compose` is installed")


def test_generated_compose_brings_memcached_up_healthy_with_the_catalogues_check(tmp_path, engine):
    """The devcontainer's compose file for a memcached requirement: Compose runs the catalogue's
    health check in the image and the app container reaches the service by its wired address."""
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_cache.py").write_text(
        "import os\n\ndef test_env():\n    assert os.environ['MEMCACHED_HOST']\n"
    )
    plan = make_plan(repo, None, available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False))
    source = plan.to_json()
    source["services"] = [ServiceRequirement("cache", "memcached", MEMCACHED).to_json()]
    write_outputs(repo, outputs_from_pipeline(repo, plan=source))
    compose = yaml.safe_load((repo / ".devcontainer" / "compose.yaml").read_text())
    assert compose["services"]["cache"]["healthcheck"]["test"] == list(KINDS["memcached"].compose_health)

    project = f"setupbot-test-{uuid.uuid4().hex[:8]}"
    cli = [*_compose_cli(), "-p", project, "-f", ".devcontainer/compose.yaml"]
    app_service = parse_devcontainer((repo / ".devcontainer" / "devcontainer.json").read_text())["service"]
    app_image = f"{project}_{app_service}"  # the app's build is not what is tested here
    subprocess.run(["docker", "tag", "python:3.11-slim", app_image], check=True)

    def run(argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=timeout)

    try:
        up = run([*cli, "up", "-d", "--no-build"], timeout=600)
        assert up.returncode == 0, up.stdout + up.stderr
        deadline, status = time.monotonic() + 120, ""
        while time.monotonic() < deadline:
            ids = run([*cli, "ps", "-q", "cache"]).stdout.split()
            status = run(["docker", "inspect", "-f", "{{.State.Health.Status}}", *ids]).stdout.strip() if ids else ""
            if status == "healthy":
                break
            time.sleep(2)
        assert status == "healthy", run([*cli, "logs"]).stdout[-2000:]
        probe = run([*cli, "exec", "-T", app_service, "python", "-c", CLIENT])
        assert "VALUE greeting 0 5|hello|END|" in probe.stdout, probe.stdout + probe.stderr
    finally:
        run([*cli, "down", "-v", "--remove-orphans"])
        subprocess.run(["docker", "rmi", "-f", app_image], capture_output=True)
