"""What setupbot knows about each kind of sibling service: how to recognise it from an image
name or a port, which stand-in image the offline engine has for it, how to probe its health and
which environment variables the tests usually read to find it.

The stand-ins are built from Debian's packages (templates/images/services/) and tagged with the
official names; a version the engine does not have is served by the stand-in of the same kind,
and the substitution is reported (see ``resolve_image``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ServiceKind:
    kind: str
    port: int
    # Stand-in tags, best first. The first one the engine has is used for unknown versions.
    standins: tuple[str, ...]
    # Image repositories (without tag) that mean this kind.
    repositories: tuple[str, ...]
    # Default credentials of the official image, used when the requirement sets none.
    default_env: Mapping[str, str] = field(default_factory=dict)
    health_timeout: int = 60
    extra_ports: tuple[int, ...] = ()
    bootstrapped: bool = True   # `setupbot images bootstrap --services` builds a stand-in


KINDS: dict[str, ServiceKind] = {
    "postgres": ServiceKind(
        "postgres", 5432,
        standins=("postgres:17", "pgvector/pgvector:pg17", "postgres:latest"),
        repositories=("postgres", "pgvector/pgvector", "postgis/postgis", "timescale/timescaledb",
                      "ankane/pgvector", "bitnami/postgresql", "circleci/postgres", "cimg/postgres",
                      "supabase/postgres", "sibedge/postgres-plv8", "postgis/postgis-ci", "kartoza/postgis",
                      "pgvector/pgvector-ci", "paradedb/paradedb", "citusdata/citus"),
        default_env={"POSTGRES_PASSWORD": "postgres"},
        health_timeout=60),
    "redis": ServiceKind(
        "redis", 6379,
        standins=("redis:8", "redis:latest"),
        repositories=("redis", "bitnami/redis", "redis/redis-stack", "redis/redis-stack-server",
                      "circleci/redis", "cimg/redis", "valkey/valkey", "bitnami/valkey", "eqalpha/keydb",
                      "docker.dragonflydb.io/dragonflydb/dragonfly", "dragonflydb/dragonfly"),
        health_timeout=30),
    "mysql": ServiceKind(
        "mysql", 3306,
        standins=("mariadb:11", "mariadb:latest"),
        repositories=("mysql", "mariadb", "bitnami/mysql", "bitnami/mariadb", "percona",
                      "percona/percona-server", "circleci/mysql", "cimg/mysql", "mysql/mysql-server",
                      "container-registry.oracle.com/mysql/community-server", "mariadb/server"),
        default_env={"MYSQL_ROOT_PASSWORD": "root"},
        health_timeout=90),
    "rabbitmq": ServiceKind(
        "rabbitmq", 5672,
        standins=("rabbitmq:4-management", "rabbitmq:4", "rabbitmq:latest"),
        repositories=("rabbitmq", "bitnami/rabbitmq", "circleci/rabbitmq"),
        health_timeout=120, extra_ports=(15672,)),
    # no stand-in is built for these yet (MongoDB is not in Debian; memcached is, but not
    # bootstrapped): an engine that has the official image starts it, otherwise the report
    # says which service could not be started (``resolve_image``)
    "mongodb": ServiceKind(
        "mongodb", 27017,
        standins=("mongo:latest",), bootstrapped=False,
        repositories=("mongo", "mongodb/mongodb-community-server", "bitnami/mongodb", "circleci/mongo",
                      "cimg/mongo", "mongodb/mongodb-enterprise-server"),
        health_timeout=60),
    "memcached": ServiceKind(
        "memcached", 11211,
        standins=("memcached:latest",), bootstrapped=False,
        repositories=("memcached", "bitnami/memcached", "circleci/memcached"),
        health_timeout=30),
}

PORT_TO_KIND = {k.port: k.kind for k in KINDS.values()}
ALIASES = {"postgresql": "postgres", "pg": "postgres", "pgvector": "postgres", "postgis": "postgres",
           "timescaledb": "postgres", "mariadb": "mysql", "percona": "mysql",
           "rabbit": "rabbitmq", "amqp": "rabbitmq", "valkey": "redis", "keydb": "redis", "dragonfly": "redis",
           "mongo": "mongodb", "memcache": "memcached"}


def split_image(image: str) -> tuple[str, str]:
    """'postgres:16-alpine' -> ('postgres', '16-alpine'); registry prefixes and digests dropped."""
    image = image.strip().split("@", 1)[0]
    for prefix in ("docker.io/library/", "docker.io/", "library/", "index.docker.io/"):
        if image.startswith(prefix):
            image = image[len(prefix):]
    if image.count("/") >= 2 and "." in image.split("/", 1)[0]:
        image = image.split("/", 1)[1]   # ghcr.io/org/name -> org/name
    repo, sep, tag = image.rpartition(":")
    if not sep or "/" in tag:
        return image, "latest"
    return repo, tag or "latest"


def kind_of(name: str = "", image: str = "", ports: Iterable[int] = ()) -> str | None:
    """The service kind for a requirement, from its image first, then its name, then its ports."""
    if image:
        repo, _ = split_image(image)
        for k in KINDS.values():
            if repo in k.repositories:
                return k.kind
        base = repo.rsplit("/", 1)[-1]
        for word in re.split(r"[-_]", base):
            word = ALIASES.get(word, word)
            if word in KINDS:
                return word
    if name:
        low = ALIASES.get(name.lower(), name.lower())
        if low in KINDS:
            return low
        for word in re.split(r"[-_\d]+", low):
            word = ALIASES.get(word, word)
            if word in KINDS:
                return word
    for port in ports:
        if port in PORT_TO_KIND:
            return PORT_TO_KIND[port]
    return None


@dataclass(frozen=True)
class ImageChoice:
    requested: str
    image: str | None           # the tag to start, None when nothing can serve it
    substituted: bool
    note: str


def _major(tag: str) -> str:
    m = re.match(r"(?:pg)?(\d+)", tag)
    return m.group(1) if m else ""


def resolve_image(kind: str | None, requested: str, exists: Callable[[str], bool]) -> ImageChoice:
    """Pick the image to start for ``requested``. The requested tag when the engine has it; else
    the stand-in of the same kind, preferring the same major version, with a note that says so."""
    if requested and exists(requested):
        return ImageChoice(requested, requested, False, "")
    if requested and ":" not in requested.rsplit("/", 1)[-1] and exists(requested + ":latest"):
        return ImageChoice(requested, requested + ":latest", False, "")
    if kind is None or kind not in KINDS:
        return ImageChoice(requested, None, False,
                           f"{requested or 'this service'}: no stand-in image for this kind of service "
                           "and nothing can be pulled; add it to `setupbot images bootstrap`")
    spec = KINDS[kind]
    repo, tag = split_image(requested) if requested else (spec.standins[0].split(":")[0], "latest")
    candidates: list[str] = []
    major = _major(tag)
    needs_vector = "vector" in repo
    for standin in spec.standins:
        s_repo, s_tag = split_image(standin)
        if needs_vector and "vector" not in s_repo:
            continue
        if major and _major(s_tag) == major:
            candidates.insert(0, standin)
        else:
            candidates.append(standin)
    if needs_vector:
        # every postgres stand-in ships the pgvector extension
        candidates += [s for s in spec.standins if s not in candidates]
    for cand in candidates:
        if exists(cand):
            why = f"{requested or kind} is not available offline; using the stand-in {cand}"
            if kind == "mysql" and "mysql" in repo:
                why += " (MariaDB, which speaks the MySQL protocol)"
            return ImageChoice(requested, cand, True, why)
    if not spec.bootstrapped:
        return ImageChoice(requested, None, False,
                           f"{requested or kind}: no stand-in for {kind} is built offline and the engine has no "
                           f"{kind} image; load the official image into the engine to start it")
    return ImageChoice(requested, None, False,
                       f"{requested or kind}: no {kind} stand-in image is present; "
                       "run `setupbot images bootstrap --services`")
