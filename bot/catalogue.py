"""The service catalogue: everything setupbot knows about each kind of sibling service, in one
place at the bottom layer (issue #17, item 1).

Each ``ServiceKind`` says
- which image names mean it (the official image, its variants, the words in names and host names);
- its ports and the official image's default environment;
- how the tests are wired to it (the variables they usually read) and how its health is probed,
  as argv for the engine and as a Compose ``healthcheck``;
- the words diagnosis looks for in failure output (client messages and client import names);
- the stand-in recipe: which Debian packages the offline ``setupbot images bootstrap`` installs
  and which template starts them, or, plainly, why no stand-in can exist.

Every other table (evidence's kinds, the graph's start_service defaults, diagnosis's ports and
host names, verification's wiring and probes, Compose health checks, stand-in recipes) is derived
from ``KINDS``. Adding a service is one entry here plus, when it can run offline, its stand-in
template under ``templates/images/services/<name>/``.

This module imports only the standard library: every layer may read it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

# The Debian suite the service stand-ins are built on (its versions name the stand-in tags).
STANDIN_SUITE = "trixie"


def split_image(image: str) -> tuple[str, str]:
    """'postgres:16-alpine' -> ('postgres', '16-alpine'); registry prefixes and digests dropped."""
    image = image.strip().split("@", 1)[0]
    for prefix in ("docker.io/library/", "docker.io/", "library/", "index.docker.io/"):
        if image.startswith(prefix):
            image = image[len(prefix) :]
    if image.count("/") >= 2 and "." in image.split("/", 1)[0]:
        image = image.split("/", 1)[1]  # ghcr.io/org/name -> org/name
    repo, sep, tag = image.rpartition(":")
    if not sep or "/" in tag:
        return image, "latest"
    return repo, tag or "latest"


@dataclass(frozen=True)
class StandIn:
    """How ``setupbot images bootstrap`` builds this kind offline from Debian's packages. The
    template directory (templates/images/services/<template>/) holds a Dockerfile.j2, which
    installs ``packages``, and an entrypoint.sh that reads the official image's variables."""

    template: str  # directory name under templates/images/services/
    packages: tuple[str, ...]  # Debian packages installed on debian:<suite>-slim
    tag: str  # the official tag of the version Debian ships
    aliases: tuple[str, ...] = ()  # further official tags that are true of the same image
    probe: tuple[str, ...] = ()  # argv that must exit 0 in the built image

    @property
    def version(self) -> str:
        return self.tag.split(":", 1)[1].split("-")[0] if ":" in self.tag else ""

    @property
    def tags(self) -> tuple[str, ...]:
        return (self.tag, *self.aliases)


Wiring = Callable[[str, str, Mapping[str, str]], dict[str, str]]


@dataclass(frozen=True)
class ServiceKind:
    kind: str
    port: int
    # the official image written into outputs when the requirement names none
    image: str
    # image repositories (without tag) that mean this kind
    repositories: tuple[str, ...] = ()
    # other names for the kind (image name parts, host names, atom words): "postgresql", "pg"
    aliases: tuple[str, ...] = ()
    # further host names tests use for it ("db"), too generic to name the kind elsewhere
    host_names: tuple[str, ...] = ()
    extra_ports: tuple[int, ...] = ()
    # a refused connection on ``port`` means this kind (False where another kind owns the port)
    claims_port: bool = True
    # the official image's credentials, added when the requirement sets none of ``credential_keys``
    default_env: Mapping[str, str] = field(default_factory=dict)
    credential_keys: tuple[str, ...] = ()
    # a bare ``start_service`` (from diagnosis or the experience base) gets these
    start_env: Mapping[str, str] = field(default_factory=dict)
    # (host, port, container env) -> the variables tests read to find the service
    wiring: Wiring | None = None
    # argv probes run inside the service container, first to pass means healthy; "{port}" and
    # "{NAME}" (the container env, with ``health_defaults``) are filled in
    health: tuple[tuple[str, ...], ...] = ()
    health_defaults: Mapping[str, str] = field(default_factory=dict)
    # the Compose form when the argv form cannot run in the official image
    compose_health: tuple[str, ...] = ()
    health_timeout: int = 60
    # regexes that, in failure output, mean a client of this kind could not connect
    refusal_patterns: tuple[str, ...] = ()
    # client libraries' import names (a refusal from inside them names the kind)
    client_imports: tuple[str, ...] = ()
    # test variables whose name says which service they point at (PGHOST, REDIS_URL, ...)
    env_prefixes: tuple[str, ...] = ()
    standin: StandIn | None = None
    # why no stand-in exists (set exactly when ``standin`` is None for a kind that should have one)
    offline_note: str = ""

    @property
    def standin_tags(self) -> tuple[str, ...]:
        """Tags that can serve this kind when the requested one is absent, best first."""
        if self.standin is not None:
            return self.standin.tags
        repo = split_image(self.image)[0]
        return (self.image, f"{repo}:latest")

    @property
    def starts_offline(self) -> bool:
        return self.standin is not None

    def health_argv(self, port: int | str | None, env: Mapping[str, str]) -> list[list[str]]:
        values = {**self.health_defaults, **{k: v for k, v in env.items() if v}, "port": str(port or self.port)}
        return [[part.format_map(values) for part in argv] for argv in self.health]

    def compose_healthcheck(self, port: int | str | None, env: Mapping[str, str]) -> list[str] | None:
        """The Compose ``healthcheck.test``: the first argv probe the official image can run
        (not the bash TCP fallback: alpine variants have no bash), else ``compose_health``."""
        probes = [p for p in self.health_argv(port, env) if p and p[0] != "bash"]
        if probes:
            return ["CMD", *probes[0]]
        return list(self.compose_health) or None

    def words(self) -> tuple[str, ...]:
        return (self.kind, *self.aliases)


# --- wiring: the variables tests read, per kind -------------------------------------------------


def _q(s: str) -> str:
    return quote(s, safe="")


def _postgres_wiring(host: str, port: str, env: Mapping[str, str]) -> dict[str, str]:
    user = env.get("POSTGRES_USER") or "postgres"
    pw = env.get("POSTGRES_PASSWORD", "")
    db = env.get("POSTGRES_DB") or user
    cred = _q(user) + (":" + _q(pw) if pw else "")
    return {
        "PGHOST": host,
        "PGPORT": port,
        "PGUSER": user,
        "PGPASSWORD": pw,
        "PGDATABASE": db,
        "POSTGRES_HOST": host,
        "POSTGRES_PORT": port,
        "POSTGRES_USER": user,
        "POSTGRES_PASSWORD": pw,
        "POSTGRES_DB": db,
        "DATABASE_URL": f"postgresql://{cred}@{host}:{port}/{_q(db)}",
    }


def _redis_wiring(host: str, port: str, env: Mapping[str, str]) -> dict[str, str]:
    return {"REDIS_HOST": host, "REDIS_PORT": port, "REDIS_URL": f"redis://{host}:{port}/0"}


def _mysql_wiring(host: str, port: str, env: Mapping[str, str]) -> dict[str, str]:
    user = env.get("MYSQL_USER") or env.get("MARIADB_USER") or "root"
    if user == "root":
        pw = env.get("MYSQL_ROOT_PASSWORD") or env.get("MARIADB_ROOT_PASSWORD") or ""
    else:
        pw = env.get("MYSQL_PASSWORD") or env.get("MARIADB_PASSWORD") or ""
    db = env.get("MYSQL_DATABASE") or env.get("MARIADB_DATABASE") or ""
    cred = _q(user) + (":" + _q(pw) if pw else "")
    return {
        "MYSQL_HOST": host,
        "MYSQL_PORT": port,
        "MYSQL_USER": user,
        "MYSQL_PASSWORD": pw,
        "MYSQL_DATABASE": db,
        "MYSQL_URL": f"mysql://{cred}@{host}:{port}/{_q(db)}",
    }


def _rabbitmq_wiring(host: str, port: str, env: Mapping[str, str]) -> dict[str, str]:
    user = env.get("RABBITMQ_DEFAULT_USER") or "guest"
    pw = env.get("RABBITMQ_DEFAULT_PASS") or "guest"
    url = f"amqp://{_q(user)}:{_q(pw)}@{host}:{port}/"
    return {
        "RABBITMQ_HOST": host,
        "RABBITMQ_PORT": port,
        "RABBITMQ_URL": url,
        "AMQP_URL": url,
        "CELERY_BROKER_URL": url,
        "BROKER_URL": url,
    }


def _mongodb_wiring(host: str, port: str, env: Mapping[str, str]) -> dict[str, str]:
    url = f"mongodb://{host}:{port}/"
    return {
        "MONGO_HOST": host,
        "MONGO_PORT": port,
        "MONGO_URL": url,
        "MONGODB_URL": url,
        "MONGO_URI": url,
        "MONGODB_URI": url,
    }


def _memcached_wiring(host: str, port: str, env: Mapping[str, str]) -> dict[str, str]:
    return {
        "MEMCACHED_HOST": host,
        "MEMCACHED_PORT": port,
        "MEMCACHED_URL": f"{host}:{port}",
        "MEMCACHE_SERVERS": f"{host}:{port}",
    }


# the bash TCP probe: accepting on the port means up (images without a client tool)
TCP_PROBE = ("bash", "-c", 'exec 3<>"/dev/tcp/127.0.0.1/$1"', "probe", "{port}")

_NO_DEBIAN = "setupbot has no stand-in recipe for {what}; only an engine that already has the official image starts it"


def _known(
    kind: str,
    port: int,
    image: str,
    *aliases: str,
    claims_port: bool = True,
    repositories: tuple[str, ...] = (),
    compose_health: tuple[str, ...] = (),
) -> ServiceKind:
    """A kind setupbot recognises (so a CI or compose file's service is not mistaken for the
    application) but has no wiring or stand-in for."""
    return ServiceKind(
        kind,
        port,
        image,
        repositories=repositories or (split_image(image)[0],),
        aliases=aliases,
        claims_port=claims_port,
        compose_health=compose_health,
        health=(TCP_PROBE,),
        offline_note=_NO_DEBIAN.format(what=kind),
    )


_ENTRIES: tuple[ServiceKind, ...] = (
    ServiceKind(
        "postgres",
        5432,
        "postgres:17",
        repositories=(
            "postgres",
            "pgvector/pgvector",
            "postgis/postgis",
            "timescale/timescaledb",
            "ankane/pgvector",
            "bitnami/postgresql",
            "circleci/postgres",
            "cimg/postgres",
            "supabase/postgres",
            "sibedge/postgres-plv8",
            "postgis/postgis-ci",
            "kartoza/postgis",
            "pgvector/pgvector-ci",
            "paradedb/paradedb",
            "citusdata/citus",
        ),
        aliases=("postgresql", "pg", "pgvector", "postgis", "timescaledb", "timescale", "plv8", "citus", "paradedb"),
        host_names=("db",),
        default_env={"POSTGRES_PASSWORD": "postgres"},
        credential_keys=("POSTGRES_PASSWORD",),
        start_env={"POSTGRES_PASSWORD": "postgres", "POSTGRES_USER": "postgres", "POSTGRES_DB": "postgres"},
        wiring=_postgres_wiring,
        # -h 127.0.0.1: the TCP listener is what the tests use, not the socket
        health=(("pg_isready", "-q", "-h", "127.0.0.1", "-p", "{port}", "-U", "{POSTGRES_USER}"),),
        health_defaults={"POSTGRES_USER": "postgres"},
        refusal_patterns=(r"Is the server running on", r"could not connect to server"),
        client_imports=("psycopg", "psycopg2", "pg8000", "asyncpg"),
        env_prefixes=("PG", "POSTGRES", "DATABASE"),
        standin=StandIn(
            "postgres",
            ("postgresql-17", "postgresql-17-pgvector"),
            "postgres:17",
            ("postgres:latest", "pgvector/pgvector:pg17"),
            ("sh", "-c", "postgres --version && test -f /usr/share/postgresql/17/extension/vector.control"),
        ),
    ),
    ServiceKind(
        "redis",
        6379,
        "redis:8",
        repositories=(
            "redis",
            "bitnami/redis",
            "redis/redis-stack",
            "redis/redis-stack-server",
            "circleci/redis",
            "cimg/redis",
            "valkey/valkey",
            "bitnami/valkey",
            "eqalpha/keydb",
            "docker.dragonflydb.io/dragonflydb/dragonfly",
            "dragonflydb/dragonfly",
        ),
        aliases=("valkey", "keydb", "dragonfly"),
        wiring=_redis_wiring,
        health=(("redis-cli", "-h", "127.0.0.1", "-p", "{port}", "ping"),),
        health_timeout=30,
        refusal_patterns=(r"redis\.exceptions\.ConnectionError", r"Could not connect to Redis"),
        client_imports=("redis", "aioredis", "valkey"),
        env_prefixes=("REDIS", "CACHE", "CELERY_RESULT"),
        standin=StandIn(
            "redis",
            ("redis-server", "redis-tools"),
            "redis:8",
            ("redis:latest",),
            ("sh", "-c", "redis-server --version && redis-cli --version"),
        ),
    ),
    # One kind for the MySQL protocol. Debian ships MariaDB, not MySQL, so the image setupbot
    # proves and writes is mariadb:11; a repository's mysql:* image is kept where it names one
    # and served offline by MariaDB, a substitution the report states.
    ServiceKind(
        "mysql",
        3306,
        "mariadb:11",
        repositories=(
            "mysql",
            "mariadb",
            "bitnami/mysql",
            "bitnami/mariadb",
            "percona",
            "percona/percona-server",
            "circleci/mysql",
            "cimg/mysql",
            "mysql/mysql-server",
            "container-registry.oracle.com/mysql/community-server",
            "mariadb/server",
        ),
        aliases=("mariadb", "percona"),
        default_env={"MYSQL_ROOT_PASSWORD": "root"},
        credential_keys=(
            "MYSQL_ROOT_PASSWORD",
            "MARIADB_ROOT_PASSWORD",
            "MYSQL_ALLOW_EMPTY_PASSWORD",
            "MARIADB_ALLOW_EMPTY_ROOT_PASSWORD",
            "MYSQL_RANDOM_ROOT_PASSWORD",
            "MARIADB_RANDOM_ROOT_PASSWORD",
        ),
        start_env={"MYSQL_ROOT_PASSWORD": "root", "MYSQL_DATABASE": "test"},
        wiring=_mysql_wiring,
        # `mysqladmin ping` exits 0 whenever the server answers, even with access denied
        health=(
            ("mariadb-admin", "ping", "-h", "127.0.0.1", "-P", "{port}", "--connect-timeout=2"),
            ("mysqladmin", "ping", "-h", "127.0.0.1", "-P", "{port}", "--connect-timeout=2"),
        ),
        health_timeout=90,
        refusal_patterns=(r"Can't connect to (?:local )?(?:MySQL|MariaDB) server",),
        client_imports=("MySQLdb", "pymysql", "mysql.connector", "aiomysql", "mariadb"),
        env_prefixes=("MYSQL", "MARIADB"),
        standin=StandIn(
            "mariadb",
            ("mariadb-server", "mariadb-client"),
            "mariadb:11",
            ("mariadb:11.8", "mariadb:latest"),
            ("sh", "-c", "mariadbd --version && mariadb-admin --version"),
        ),
    ),
    ServiceKind(
        "rabbitmq",
        5672,
        "rabbitmq:4-management",
        repositories=("rabbitmq", "bitnami/rabbitmq", "circleci/rabbitmq"),
        aliases=("rabbit", "amqp"),
        extra_ports=(15672,),
        wiring=_rabbitmq_wiring,
        # the AMQP listener opens last in RabbitMQ's boot, so accepting on it means ready; a
        # TCP probe also avoids starting an Erlang VM (and matching its cookie) every second
        health=(TCP_PROBE,),
        compose_health=("CMD", "rabbitmq-diagnostics", "-q", "ping"),
        health_timeout=120,
        refusal_patterns=(r"AMQPConnectionError", r"pika\.exceptions\.AMQP"),
        client_imports=("pika", "aio_pika", "amqp", "aiormq"),
        env_prefixes=("RABBIT", "AMQP", "BROKER", "CELERY_BROKER"),
        # the management plugin is enabled, so the -management tags are true too
        standin=StandIn(
            "rabbitmq",
            ("rabbitmq-server",),
            "rabbitmq:4-management",
            ("rabbitmq:4", "rabbitmq:management", "rabbitmq:latest"),
            ("sh", "-c", "test -x /usr/sbin/rabbitmq-server && ls /usr/lib/rabbitmq/lib/"),
        ),
    ),
    ServiceKind(
        "mongodb",
        27017,
        "mongo:8",
        repositories=(
            "mongo",
            "mongodb/mongodb-community-server",
            "bitnami/mongodb",
            "circleci/mongo",
            "cimg/mongo",
            "mongodb/mongodb-enterprise-server",
        ),
        aliases=("mongo",),
        wiring=_mongodb_wiring,
        health=(TCP_PROBE,),
        compose_health=("CMD", "mongosh", "--quiet", "--eval", "db.adminCommand('ping')"),
        refusal_patterns=(r"ServerSelectionTimeoutError",),
        client_imports=("pymongo", "motor", "mongoengine"),
        env_prefixes=("MONGO",),
        # MongoDB left Debian after its licence change (SSPL); bookworm and trixie have no package
        offline_note="MongoDB is not packaged by Debian (bookworm, trixie), so `setupbot images bootstrap` "
        "has no stand-in for it; only an engine that already has the official mongo image starts it",
    ),
    ServiceKind(
        "memcached",
        11211,
        "memcached:1.6",
        repositories=("memcached", "bitnami/memcached", "circleci/memcached"),
        aliases=("memcache",),
        wiring=_memcached_wiring,
        health=(TCP_PROBE,),
        # the official image (Debian) has bash but no nc; its alpine variant has busybox nc
        compose_health=(
            "CMD-SHELL",
            "bash -c 'exec 3<>/dev/tcp/127.0.0.1/11211' 2>/dev/null || echo stats | nc 127.0.0.1 11211",
        ),
        health_timeout=30,
        refusal_patterns=(r"pymemcache\.exceptions\.MemcacheUnexpectedCloseError", r"pylibmc\.ConnectionError"),
        client_imports=("pymemcache", "pylibmc", "memcache", "aiomcache"),
        env_prefixes=("MEMCACHE",),
        standin=StandIn(
            "memcached",
            ("memcached",),
            "memcached:1.6",
            ("memcached:1", "memcached:latest"),
            ("sh", "-c", "memcached --version"),
        ),
    ),
    _known(
        "elasticsearch",
        9200,
        "elasticsearch:8.13.0",
        compose_health=("CMD-SHELL", "curl -fs http://127.0.0.1:9200/_cluster/health"),
    ),
    _known("opensearch", 9200, "opensearchproject/opensearch:2", claims_port=False),
    _known("zookeeper", 2181, "zookeeper:3.9"),
    _known("kafka", 9092, "apache/kafka:3.7.0"),
    _known("solr", 8983, "solr:9"),
    _known("nats", 4222, "nats:2"),
    _known("mssql", 1433, "mcr.microsoft.com/mssql/server:2022-latest", "sqlserver", "mcr.microsoft.com/mssql/server"),
    _known("minio", 9000, "minio/minio", claims_port=False),
    _known("localstack", 4566, "localstack/localstack", claims_port=False),
    _known("cassandra", 9042, "cassandra:5", claims_port=False),
    _known("clickhouse", 8123, "clickhouse/clickhouse-server", claims_port=False),
    _known("etcd", 2379, "quay.io/coreos/etcd", claims_port=False),
    _known("selenium", 4444, "selenium/standalone-chrome", claims_port=False),
    _known("azurite", 10000, "mcr.microsoft.com/azure-storage/azurite", claims_port=False),
    _known("vault", 8200, "hashicorp/vault", claims_port=False),
    _known("consul", 8500, "hashicorp/consul", claims_port=False),
    _known("neo4j", 7687, "neo4j:5", claims_port=False),
    _known("influxdb", 8086, "influxdb:2", claims_port=False),
)

KINDS: dict[str, ServiceKind] = {k.kind: k for k in _ENTRIES}
# every other name of a kind -> the kind
ALIASES: dict[str, str] = {a: k.kind for k in _ENTRIES for a in k.aliases if "/" not in a}
# a refused connection on one of these ports means a missing service of that kind
PORT_TO_KIND: dict[int, str] = {}
for _k in _ENTRIES:
    if _k.claims_port:
        PORT_TO_KIND.setdefault(_k.port, _k.kind)


def canonical(name: str) -> str | None:
    """The kind a word names ("mariadb" -> "mysql", "postgresql" -> "postgres"), or None."""
    low = name.strip().lower()
    low = ALIASES.get(low, low)
    return low if low in KINDS else None


def kind_of(name: str = "", image: str = "", ports: Iterable[int] = ()) -> str | None:
    """The service kind for a requirement, from its image first, then its name, then its ports."""
    if image:
        repo, _ = split_image(image)
        repo = repo.lower()
        for k in _ENTRIES:
            if repo in k.repositories:
                return k.kind
        base = repo.rsplit("/", 1)[-1]
        for word in re.split(r"[-_]", base):
            if canonical(word):
                return canonical(word)
        # a word inside a longer name: "myorg/postgres16-ci", "timescaledb-ha"
        for k in _ENTRIES:
            for word in k.words():
                if len(word) >= 4 and word in repo:
                    return k.kind
    if name:
        if canonical(name):
            return canonical(name)
        low = name.lower()
        for word in re.split(r"[-_\d]+", low):
            if word and canonical(word):
                return canonical(word)
        for k in _ENTRIES:
            for word in k.words():
                if len(word) >= 4 and word in low:
                    return k.kind
    for port in ports:
        if port in PORT_TO_KIND:
            return PORT_TO_KIND[port]
    return None


def kinds_for_imports(modules: Iterable[str]) -> dict[str, list[str]]:
    """Client libraries among ``modules`` (dotted import names) -> the kinds they talk to."""
    out: dict[str, list[str]] = {}
    names = set(modules)
    for k in _ENTRIES:
        for client in k.client_imports:
            if any(n == client or n.startswith(client + ".") for n in names):
                out.setdefault(k.kind, []).append(client)
    return out


def container_env(kind: str | None, env: Mapping[str, str]) -> dict[str, str]:
    """The service container's env: the official image's default credentials where the
    requirement sets none, so a CI block with only an image still starts."""
    out = dict(env)
    spec = KINDS.get(kind or "")
    if spec is None or not spec.default_env:
        return out
    if kind == "postgres" and out.get("POSTGRES_HOST_AUTH_METHOD") == "trust":
        return out
    if not any(out.get(k) for k in spec.credential_keys):
        out.update({k: v for k, v in spec.default_env.items() if not out.get(k)})
    return out


def wiring_env(kind: str | None, host: str, port: str, env: Mapping[str, str]) -> dict[str, str]:
    """The variables tests commonly read to find a service of ``kind`` at ``host:port``."""
    spec = KINDS.get(kind or "")
    if spec is not None and spec.wiring is not None:
        return spec.wiring(host, port, container_env(kind, env))
    name = re.sub(r"[^A-Z0-9]", "_", host.upper())
    return {f"{name}_HOST": host, f"{name}_PORT": port} if port else {}


def prefix_kinds() -> tuple[tuple[str, str], ...]:
    """(variable-name prefix, kind), longest prefix first, for pointing test variables at services."""
    pairs = [(p, k.kind) for k in _ENTRIES for p in k.env_prefixes]
    return tuple(sorted(pairs, key=lambda pk: -len(pk[0])))


def refusal_words() -> list[tuple[str, re.Pattern[str]]]:
    """(kind, pattern) for what a failing client of each kind writes: its own refusal messages
    and its import names as whole words (a traceback through ``psycopg`` names postgres)."""
    out = []
    for k in _ENTRIES:
        alts = list(k.refusal_patterns) + [rf"\b{re.escape(c)}\b" for c in k.client_imports]
        if alts:
            out.append((k.kind, re.compile("|".join(alts), re.IGNORECASE)))
    return out


def host_words() -> dict[str, str]:
    """Host names (a kind's name and aliases) -> kind, for "could not translate host name"."""
    return {w: k.kind for k in _ENTRIES for w in (*k.words(), *k.host_names) if re.fullmatch(r"[a-z][a-z0-9_-]*", w)}


@dataclass(frozen=True)
class ImageChoice:
    requested: str
    image: str | None  # the tag to start, None when nothing can serve it
    substituted: bool
    note: str


def _major(tag: str) -> str:
    m = re.match(r"(?:pg)?(\d+)", tag)
    return m.group(1) if m else ""


def resolve_image(kind: str | None, requested: str, exists: Callable[[str], bool]) -> ImageChoice:
    """Pick the image to start for ``requested``. The requested tag when the engine has it; else
    the stand-in of the same kind, preferring the same major version, with a note that says so.
    A kind without a stand-in is reported as one that cannot start offline."""
    if requested and exists(requested):
        return ImageChoice(requested, requested, False, "")
    if requested and ":" not in requested.rsplit("/", 1)[-1] and exists(requested + ":latest"):
        return ImageChoice(requested, requested + ":latest", False, "")
    if kind is None or kind not in KINDS:
        return ImageChoice(
            requested,
            None,
            False,
            f"{requested or 'this service'}: no stand-in image for this kind of service "
            "and nothing can be pulled; add it to the service catalogue (bot/catalogue.py)",
        )
    spec = KINDS[kind]
    repo, tag = split_image(requested) if requested else (split_image(spec.image)[0], "latest")
    same_major: list[str] = []
    others: list[str] = []
    major = _major(tag)
    needs_vector = "vector" in repo
    for standin in spec.standin_tags:
        s_repo, s_tag = split_image(standin)
        if needs_vector and "vector" not in s_repo:
            continue
        # the catalogue's order (its primary tag first) holds among tags of the same major
        (same_major if major and _major(s_tag) == major else others).append(standin)
    candidates = same_major + others
    if needs_vector:
        # every postgres stand-in ships the pgvector extension
        candidates += [s for s in spec.standin_tags if s not in candidates]
    for cand in candidates:
        if exists(cand):
            why = f"{requested or kind} is not available offline; using the stand-in {cand}"
            if kind == "mysql" and "mysql" in repo:
                why += " (MariaDB, which speaks the MySQL protocol)"
            return ImageChoice(requested, cand, True, why)
    if not spec.starts_offline:
        return ImageChoice(requested, None, False, f"{requested or kind}: cannot start offline: {spec.offline_note}")
    return ImageChoice(
        requested,
        None,
        False,
        f"{requested or kind}: no {kind} stand-in image is present; "
        f"run `setupbot images bootstrap --services {spec.standin.template}`"
        if spec.standin
        else "",
    )


__all__ = [
    "KINDS",
    "ALIASES",
    "PORT_TO_KIND",
    "STANDIN_SUITE",
    "ServiceKind",
    "StandIn",
    "ImageChoice",
    "canonical",
    "split_image",
    "kind_of",
    "kinds_for_imports",
    "container_env",
    "wiring_env",
    "prefix_kinds",
    "refusal_words",
    "host_words",
    "resolve_image",
]
