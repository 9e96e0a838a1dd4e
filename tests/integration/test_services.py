"""Sibling services on the real engine: the Debian-built stand-ins start from a CI services
block, answer their health probes, and the fixture repository's tests (PostgreSQL with pgvector,
Redis, MariaDB over the MySQL protocol, RabbitMQ) fail without them and pass with them; the
record says which test needed which service. A service that never becomes healthy ends in
bounded time and leaves nothing behind."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from bot.config import load_settings
from bot.engine import Engine
from bot.services import ServiceManager
from bot.verify.run import verify_environment

REPOS = Path(__file__).resolve().parents[1] / "fixtures" / "repos"
SERVICE_IMAGES = ("postgres:17", "pgvector/pgvector:pg17", "redis:8", "mariadb:11", "rabbitmq:4-management")
CLIENTS_DOCKERFILE = """\
FROM python:3.11-slim
RUN pip install --no-cache-dir pytest pg8000 redis PyMySQL pika
WORKDIR /workspace
"""


def _have(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0


# one worker builds the module's clients image once
pytestmark = pytest.mark.xdist_group("services")


@pytest.fixture(scope="module")
def engine(docker_available):
    missing = [t for t in ("python:3.11-slim", *SERVICE_IMAGES) if not _have(t)]
    if missing:
        pytest.fail(f"images missing: {', '.join(missing)}; run `setupbot images bootstrap` first (CI does)")
    e = Engine.from_settings(load_settings(None, overrides={"engine": {"memory": "1g"}}))
    yield e
    e.clean(e.run_id)
    leftovers = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=setupbot.run={e.run_id}"], capture_output=True, text=True
    ).stdout.split()
    assert leftovers == []


@pytest.fixture(scope="module")
def clients_image(engine, tmp_path_factory):
    """python:3.11-slim with pytest and small pure-Python clients, built once for the module."""
    tag = f"setupbot-test/verify-clients:{engine.run_id}"
    result = engine.build(tmp_path_factory.mktemp("clients"), CLIENTS_DOCKERFILE, tag)
    assert result.ok, result.log[-3000:]
    return tag


CI_SERVICES = [
    {
        "name": "postgres",
        "image": "pgvector/pgvector:pg16",
        "ports": ["5432:5432"],
        "env": {"POSTGRES_PASSWORD": "postgres", "POSTGRES_DB": "test"},
    },
    {"name": "redis", "image": "redis:7", "ports": ["6379:6379"]},
    {
        "name": "mysql",
        "image": "mysql:8.0",
        "ports": ["3306:3306"],
        "env": {"MYSQL_ROOT_PASSWORD": "root", "MYSQL_DATABASE": "test"},
    },
    {"name": "rabbitmq", "image": "rabbitmq:3-management", "ports": ["5672:5672"]},
]
CI_ENV = {"DATABASE_URL": "postgresql://postgres:postgres@localhost:5432/test", "REDIS_URL": "redis://localhost:6379/0"}


@pytest.mark.slow
def test_services_fixture_passes_with_siblings_and_fails_without(engine, clients_image, tmp_path):
    started = time.monotonic()
    record = verify_environment(
        engine,
        REPOS / "verify-services",
        clients_image,
        services=CI_SERVICES,
        ci_env=CI_ENV,
        copy_repo=True,
        checks=("imports", "tests"),
        test_timeout=300,
    )
    path = record.write(tmp_path / "verification.json")
    data = json.loads(path.read_text())
    print(f"services verification took {time.monotonic() - started:.0f}s")

    assert all(s["healthy"] for s in data["services"]), data["services"]
    images = {s["name"]: s["image"] for s in data["services"]}
    assert images["postgres"] == "pgvector/pgvector:pg17" and images["mysql"] == "mariadb:11"
    assert "stand-in" in next(s for s in data["services"] if s["name"] == "postgres")["note"]

    with_ = data["tests_with_siblings"]["tests"]
    without = data["tests_without_siblings"]["tests"]
    service_tests = [t for t in with_ if "test_plain" not in t]
    assert len(service_tests) == 6
    assert all(with_[t] == "passed" for t in with_), data["tests_with_siblings"]
    assert all(without[t] != "passed" for t in service_tests)
    assert without["tests.test_plain::test_params_parse"] == "passed"

    needed = data["attribution"]["needed"]
    assert needed["postgres"] == [
        "tests.test_postgres::test_pgvector_extension",
        "tests.test_postgres::test_postgres_roundtrip",
    ]
    assert needed["redis"] == [
        "tests.test_localhost::test_hardcoded_localhost_redis",
        "tests.test_redis::test_redis_set_get",
    ]
    assert needed["mysql"] == ["tests.test_mysql::test_mysql_protocol"]
    assert needed["rabbitmq"] == ["tests.test_rabbitmq::test_rabbitmq_publish_consume"]
    assert "DATABASE_URL" in data["wired_env"]
    assert "6379:redis:6379" in data["checks"]["localhost_forwards"]
    assert data["verdict"]["tier"] == "Full", data["verdict"]


@pytest.mark.serial  # times the health bound
def test_service_that_never_becomes_healthy_is_bounded_and_removed(engine):
    # the container runs, but the server never comes up (its command is replaced by a sleep)
    with engine.network() as net:
        with ServiceManager(engine, net, health_timeout=8, interval=1) as sm:
            started_at = time.monotonic()
            out = sm.start([{"name": "redis", "image": "redis:8", "command": ["sleep", "600"]}])
            elapsed = time.monotonic() - started_at
            outcome = out.outcomes[0]
            assert not outcome.healthy and "not healthy after 8s" in outcome.note
            assert elapsed < 30
            assert out.env == {}
            names = subprocess.run(
                ["docker", "ps", "-aq", "--filter", f"label=setupbot.run={engine.run_id}"],
                capture_output=True,
                text=True,
            ).stdout.split()
            assert names == []  # removed at once, not only at teardown


def test_official_env_vars_are_honoured(engine, clients_image):
    """A custom user, password and database for PostgreSQL and MariaDB, and a RabbitMQ user."""
    services = [
        {
            "name": "db",
            "image": "postgres:17",
            "env": {"POSTGRES_USER": "app", "POSTGRES_PASSWORD": "s3cret'x", "POSTGRES_DB": "appdb"},
        },
        {
            "name": "maria",
            "image": "mariadb:11",
            "env": {
                "MARIADB_ROOT_PASSWORD": "rootpw",
                "MARIADB_DATABASE": "shop",
                "MARIADB_USER": "shopper",
                "MARIADB_PASSWORD": "pw",
            },
        },
    ]
    probe = (
        "import os, pg8000.native, pymysql\n"
        "c = pg8000.native.Connection(user=os.environ['PGUSER'], password=os.environ['PGPASSWORD'],"
        " host=os.environ['PGHOST'], database=os.environ['PGDATABASE'], timeout=10)\n"
        "print('pg', c.run('select current_user, current_database()'))\n"
        "m = pymysql.connect(host=os.environ['MYSQL_HOST'], user=os.environ['MYSQL_USER'],"
        " password=os.environ['MYSQL_PASSWORD'], database=os.environ['MYSQL_DATABASE'], connect_timeout=10)\n"
        "cur = m.cursor(); cur.execute('select current_user(), database()'); print('my', cur.fetchone())\n"
    )
    with engine.network() as net, ServiceManager(engine, net) as sm:
        started = sm.start(services)
        assert started.all_healthy, [o.to_json() for o in started.outcomes]
        assert started.env["PGHOST"] == "db" and started.env["MYSQL_USER"] == "shopper"
        with engine.session(clients_image, env=started.env, network=net, name_hint="probe") as s:
            res = s.exec(["python", "-c", probe], timeout=60)
    assert res.exit_code == 0, res.output
    assert "pg [['app', 'appdb']]" in res.output
    assert "my ('shopper@%', 'shop')" in res.output
