"""Sibling services without an engine: recognising kinds, choosing stand-ins, wiring env,
reading diagnosis, bounded health waits and cleanup (the engine is a recording double here;
tests/integration/test_services.py starts the real thing)."""

from __future__ import annotations

import threading

import pytest

from bot.atoms import Atom
from bot.catalogue import kind_of, resolve_image, split_image
from bot.errors import ConfigError, EngineError
from bot.services import (
    ServiceManager,
    ServiceSpec,
    health_argv,
    merge_specs,
    rewrite_localhost,
    service_env,
    specs_from_atoms,
    specs_from_diagnosis,
    specs_from_settings,
    wait_healthy,
    wiring_env,
)


@pytest.mark.parametrize(
    "image,kind",
    [
        ("postgres:16", "postgres"),
        ("pgvector/pgvector:pg16", "postgres"),
        ("postgis/postgis:15-3.4", "postgres"),
        ("docker.io/library/redis:7-alpine", "redis"),
        ("bitnami/redis:latest", "redis"),
        ("mysql:5.7", "mysql"),
        ("mariadb:10.6", "mysql"),
        ("rabbitmq:3-management", "rabbitmq"),
        ("ghcr.io/foo/my-postgres:1", "postgres"),
        ("mongo:6", "mongodb"),
        ("elasticsearch:8.1.0", "elasticsearch"),
        ("ghcr.io/acme/webapp:1", None),
    ],
)
def test_kind_from_image(image, kind):
    assert kind_of(image=image) == kind


def test_kind_from_name_and_port():
    assert kind_of(name="db", ports=[5432]) == "postgres"
    assert kind_of(name="redis-cache") == "redis"
    assert kind_of(name="postgresql") == "postgres"
    assert kind_of(name="queue", ports=[5672]) == "rabbitmq"
    assert kind_of(name="thing", ports=[8080]) is None
    # the port diagnosis reads as Elasticsearch (a kind with no stand-in: it cannot start offline)
    assert kind_of(name="thing", ports=[9200]) == "elasticsearch"


def test_split_image():
    assert split_image("postgres") == ("postgres", "latest")
    assert split_image("localhost:5000/pg") == ("localhost:5000/pg", "latest")
    assert split_image("postgres:16@sha256:abc") == ("postgres", "16")


def test_resolve_uses_requested_when_present():
    have = {"postgres:17", "postgres:16"}
    choice = resolve_image("postgres", "postgres:16", have.__contains__)
    assert choice.image == "postgres:16" and not choice.substituted


def test_resolve_substitutes_unknown_version_and_says_so():
    have = {"postgres:17", "mariadb:11", "redis:8"}
    choice = resolve_image("postgres", "postgres:13-alpine", have.__contains__)
    assert choice.image == "postgres:17" and choice.substituted
    assert "postgres:13-alpine" in choice.note and "postgres:17" in choice.note
    mysql = resolve_image("mysql", "mysql:8.0", have.__contains__)
    assert mysql.image == "mariadb:11" and "MariaDB" in mysql.note
    assert resolve_image("mysql", "mysql:5.7", have.__contains__).image == "mariadb:11"
    redis = resolve_image("redis", "redis:7-alpine", have.__contains__)
    assert redis.image == "redis:8" and redis.substituted


def test_resolve_pgvector_prefers_vector_image():
    have = {"postgres:17", "pgvector/pgvector:pg17"}
    assert resolve_image("postgres", "pgvector/pgvector:pg16", have.__contains__).image == "pgvector/pgvector:pg17"
    assert resolve_image("postgres", "ankane/pgvector", {"postgres:17"}.__contains__).image == "postgres:17"


def test_resolve_unknown_kind_or_missing_standin_is_clear():
    none = resolve_image(None, "mongo:6", lambda t: False)
    assert none.image is None and "no stand-in" in none.note
    missing = resolve_image("redis", "redis:7", lambda t: False)
    assert missing.image is None and "bootstrap" in missing.note


def test_spec_from_ci_services_block():
    spec = ServiceSpec.from_any(
        {"name": "postgres", "image": "postgres:15", "ports": ["5432:5432"], "env": {"POSTGRES_PASSWORD": "pw", "N": 3}}
    )
    assert spec.kind == "postgres" and spec.ports == (5432,) and spec.env["N"] == "3"
    bare = ServiceSpec.from_any({"name": "cache", "image": "redis"})
    assert bare.kind == "redis" and bare.port == 6379
    only_kind = ServiceSpec.from_any({"name": "rabbitmq"})
    assert only_kind.image == "rabbitmq:4-management"
    with pytest.raises(ConfigError, match="needs a name or an image"):
        ServiceSpec.from_any({})


def test_settings_bad_entries_are_warnings():
    specs, warnings = specs_from_settings([{"name": "db", "image": "postgres:16"}, {"env": {}}])
    assert [s.name for s in specs] == ["db"] and len(warnings) == 1 and "services[1]" in warnings[0]


def test_atoms_become_specs():
    specs = specs_from_atoms([Atom("start_service", {"service": "redis"}), Atom("apt_install", {"packages": ["x"]})])
    assert [(s.name, s.kind) for s in specs] == [("redis", "redis")]


@pytest.mark.parametrize(
    "output,kinds",
    [
        (
            'psycopg2.OperationalError: connection to server at "localhost" (127.0.0.1), port 5432 failed: Connection refused',
            ["postgres"],
        ),
        ("redis.exceptions.ConnectionError: Error 111 connecting to localhost:6379. Connection refused.", ["redis"]),
        (
            "pymysql.err.OperationalError: (2003, \"Can't connect to MySQL server on 'localhost' ([Errno 111] Connection refused)\")\n"
            "while connecting to port 3306",
            ["mysql"],
        ),
        (
            "pika.exceptions.AMQPConnectionError: ... ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 5672)",
            ["rabbitmq"],
        ),
        ("AssertionError: 1 != 2", []),
    ],
)
def test_diagnosis(output, kinds):
    assert [s.kind for s in specs_from_diagnosis(output)] == kinds


def test_merge_keeps_plan_first_and_skips_inferred_duplicates():
    plan = [ServiceSpec.from_any({"name": "db", "image": "postgres:16"})]
    diag = specs_from_diagnosis("connection to server at localhost, port 5432 failed: Connection refused")
    merged = merge_specs(plan, diag, [ServiceSpec.from_any({"name": "redis"})])
    assert [s.name for s in merged] == ["db", "redis"]


def test_service_env_points_at_alias():
    pg = ServiceSpec.from_any(
        {"name": "db", "image": "postgres:16", "env": {"POSTGRES_PASSWORD": "p@ss", "POSTGRES_DB": "app"}}
    )
    env = service_env(pg)
    assert env["PGHOST"] == "db" and env["PGPASSWORD"] == "p@ss"
    assert env["DATABASE_URL"] == "postgresql://postgres:p%40ss@db:5432/app"
    assert service_env(ServiceSpec.from_any({"name": "redis"}))["REDIS_URL"] == "redis://redis:6379/0"
    my = service_env(
        ServiceSpec.from_any({"name": "mysql", "env": {"MYSQL_ROOT_PASSWORD": "r", "MYSQL_DATABASE": "t"}})
    )
    assert (my["MYSQL_HOST"], my["MYSQL_USER"], my["MYSQL_PASSWORD"]) == ("mysql", "root", "r")
    rb = service_env(ServiceSpec.from_any({"name": "rabbitmq"}))
    assert rb["AMQP_URL"] == "amqp://guest:guest@rabbitmq:5672/"


def test_rewrite_localhost_by_port_name_and_single_service():
    specs = [ServiceSpec.from_any({"name": "postgres"}), ServiceSpec.from_any({"name": "redis"})]
    out = rewrite_localhost(
        {
            "DATABASE_URL": "postgres://u:p@localhost:5432/db",
            "REDIS_URL": "redis://127.0.0.1:6379/1",
            "PGHOST": "localhost",
            "REDIS_HOST": "localhost",
            "OTHER": "http://localhost:8080",
            "HOSTNAME_LIKE": "mylocalhost.example",
        },
        specs,
    )
    assert out["DATABASE_URL"] == "postgres://u:p@postgres:5432/db"
    assert out["REDIS_URL"] == "redis://redis:6379/1"
    assert out["PGHOST"] == "postgres" and out["REDIS_HOST"] == "redis"
    assert out["OTHER"] == "http://localhost:8080"  # no service on 8080: left alone
    assert out["HOSTNAME_LIKE"] == "mylocalhost.example"
    single = rewrite_localhost({"DB_HOST": "127.0.0.1"}, specs[:1])
    assert single["DB_HOST"] == "postgres"


def test_wiring_env_repository_values_win():
    specs = [ServiceSpec.from_any({"name": "postgres", "env": {"POSTGRES_PASSWORD": "x"}})]
    env = wiring_env(specs, {"DATABASE_URL": "postgresql://postgres:x@localhost:5432/ci"})
    assert env["DATABASE_URL"] == "postgresql://postgres:x@postgres:5432/ci"
    assert env["PGHOST"] == "postgres"


def test_health_argv_per_kind():
    assert health_argv(ServiceSpec.from_any({"name": "postgres"}))[0][0] == "pg_isready"
    assert health_argv(ServiceSpec.from_any({"name": "redis"}))[0][:1] == ["redis-cli"]
    assert "ping" in health_argv(ServiceSpec.from_any({"name": "mysql"}))[0]
    generic = health_argv(ServiceSpec.from_any({"name": "es", "image": "elasticsearch:8", "ports": [9200]}))
    assert generic[0][-1] == "9200"


class _Result:
    def __init__(self, code, output=""):
        self.exit_code, self.output = code, output


class _Handle:
    """A container double whose probe passes after ``ready_after`` calls (or never)."""

    def __init__(self, name, ready_after=None):
        self.name, self.ready_after, self.calls, self.removed = name, ready_after, 0, False

    def exec(self, argv):
        self.calls += 1
        ok = self.ready_after is not None and self.calls >= self.ready_after
        return _Result(0 if ok else 1, "accepting" if ok else "no response")

    def logs(self):
        return "FATAL: something"

    def remove(self):
        self.removed = True


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def test_wait_healthy_is_bounded():
    clock = _Clock()
    ok, waited, last = wait_healthy(_Handle("x"), [["probe"]], timeout=10, interval=1, clock=clock, sleep=clock.sleep)
    assert not ok and 10 <= waited <= 11 and last == "no response"
    clock = _Clock()
    ok, waited, _ = wait_healthy(_Handle("y", ready_after=3), [["probe"]], timeout=10, clock=clock, sleep=clock.sleep)
    assert ok and waited == 2


def test_wait_healthy_stops_when_container_exits():
    ok, _, last = wait_healthy(_Handle("x"), [["probe"]], timeout=1000, interval=0, running=lambda: False)
    assert not ok and last == "the container exited"


class _Engine:
    def __init__(self, images, ready_after=None, fail_start=False):
        self.images, self.ready_after, self.fail_start = set(images), ready_after, fail_start
        self.started = []

    def image_exists(self, tag):
        return tag in self.images

    def start_container(self, image, name_hint, network, env, aliases, command=None):
        if self.fail_start:
            raise EngineError("cannot create container")
        h = _Handle(name_hint, self.ready_after)
        self.started.append((image, name_hint, network, dict(env), list(aliases), h))
        return h


def test_manager_starts_wires_and_tears_down():
    engine = _Engine({"postgres:17", "redis:7"}, ready_after=1)
    with ServiceManager(engine, "net1", interval=0) as sm:
        started = sm.start(
            [{"name": "postgres", "image": "postgres:15"}, {"name": "redis", "image": "redis:7"}],
            ci_env={"DATABASE_URL": "postgresql://postgres:postgres@localhost:5432/test"},
        )
        assert started.all_healthy
        assert started.env["DATABASE_URL"] == "postgresql://postgres:postgres@postgres:5432/test"
        assert started.env["REDIS_URL"] == "redis://redis:6379/0"
        image, _, net, env, aliases, _ = next(s for s in engine.started if s[1] == "svc-postgres")
        assert (image, net, aliases) == ("postgres:17", "net1", ["postgres"])
        assert env["POSTGRES_PASSWORD"] == "postgres"  # the official image would refuse without one
        assert "stand-in postgres:17" in started.outcomes[0].note
    assert all(h.removed for *_, h in engine.started)


def test_services_start_side_by_side_and_keep_their_order():
    """Each service waits for its own health probe; django-tasks' MariaDB took 7 s and its
    PostgreSQL 4 s, one after the other, before every test run. Two starts that each wait for
    the other to begin pass only when they run at the same time."""
    both = threading.Barrier(2, timeout=10)

    class _Together(_Engine):
        def start_container(self, image, name_hint, network, env, aliases, command=None):
            both.wait()  # a start that waited for the other's end would break the barrier
            return super().start_container(image, name_hint, network, env, aliases, command)

    engine = _Together({"postgres:17", "mariadb:11"}, ready_after=1)
    with ServiceManager(engine, "n", interval=0) as sm:
        started = sm.start([{"name": "postgres", "image": "postgres:17"}, {"name": "mysql", "image": "mariadb:11"}])
        assert [o.name for o in started.outcomes] == ["postgres", "mysql"] and started.all_healthy
        assert set(sm.handles_by_name) == {"postgres", "mysql"}
    assert len(engine.started) == 2 and all(h.removed for *_, h in engine.started)


def test_manager_unhealthy_service_is_removed_with_a_clear_outcome():
    engine = _Engine({"mariadb:11"}, ready_after=None)
    sm = ServiceManager(engine, "n", health_timeout=0.2, interval=0.05)
    started = sm.start([{"name": "mysql", "image": "mysql:8"}])
    outcome = started.outcomes[0]
    assert not outcome.healthy and "not healthy after" in outcome.note and outcome.logs_tail == "FATAL: something"
    assert engine.started[0][-1].removed and started.env == {}
    sm.stop()


def test_manager_missing_image_and_failed_start_are_outcomes():
    sm = ServiceManager(_Engine(set()), "n")
    out = sm.start([{"name": "mongo", "image": "mongo:6"}]).outcomes[0]
    assert not out.healthy and out.image is None and "no stand-in" in out.note
    sm2 = ServiceManager(_Engine({"redis:8"}, fail_start=True), "n")
    out2 = sm2.start([{"name": "redis"}]).outcomes[0]
    assert not out2.healthy and "did not start" in out2.note


def test_forward_targets_cover_kind_and_mapped_ports():
    from bot.services import ServiceOutcome, forward_targets

    specs = [
        ServiceSpec.from_any({"name": "db", "image": "postgres:16", "ports": ["5433:5432"]}),
        ServiceSpec.from_any({"name": "cache", "image": "redis"}),
    ]
    outcomes = [
        ServiceOutcome("db", "postgres", "postgres:16", "postgres:17", "db", True),
        ServiceOutcome("cache", "redis", "redis", "redis:8", "cache", False),
    ]
    assert forward_targets(outcomes, specs) == ["5432:db:5432"]
