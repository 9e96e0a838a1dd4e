"""Recipes for the service stand-in images that `setupbot images bootstrap` builds.

Nothing can be pulled here, so the services CI files name (postgres, pgvector, redis, mariadb,
mysql, rabbitmq) are built from Debian's packages on the trixie stand-in and tagged with the
official names of the versions Debian ships (trixie: PostgreSQL 17 + pgvector, Redis 8,
MariaDB 11.8, RabbitMQ 4.0); no tag claims a version the image does not have. Each entrypoint (templates/images/services/<name>/entrypoint.sh) reads the
official image's environment variables, so a CI ``services:`` block works unchanged. A version
the engine has no tag for is served by the stand-in of the same kind, and the substitution is
reported (``bot.verify.catalog.resolve_image``).
"""

from __future__ import annotations

from bot.engine.recipes import ImageRecipe

SERVICE_BASE = "debian:trixie-slim"


def _service(name: str, tag: str, version: str, aliases: tuple[str, ...], ports: tuple[int, ...],
             probe: tuple[str, ...]) -> ImageRecipe:
    return ImageRecipe(
        tag=tag, template=f"images/services/{name}/Dockerfile.j2", base=SERVICE_BASE, kind="service",
        name=name, version=version, files={"entrypoint.sh": f"images/services/{name}/entrypoint.sh"},
        probe=probe, aliases=aliases, ports=ports)


SERVICE_RECIPES: list[ImageRecipe] = [
    # one image serves both names: Debian's postgresql-17 with postgresql-17-pgvector
    _service("postgres", "postgres:17", "17", ("postgres:latest", "pgvector/pgvector:pg17"), (5432,),
             ("sh", "-c", "postgres --version && test -f /usr/share/postgresql/17/extension/vector.control")),
    _service("redis", "redis:8", "8", ("redis:latest",), (6379,),
             ("sh", "-c", "redis-server --version && redis-cli --version")),
    # MariaDB also serves mysql:* requirements (same protocol); that substitution is reported
    # rather than hidden behind a mysql tag
    _service("mariadb", "mariadb:11", "11", ("mariadb:11.8", "mariadb:latest"), (3306,),
             ("sh", "-c", "mariadbd --version && mariadb-admin --version")),
    # the management plugin is enabled, so the -management tags are true too
    _service("rabbitmq", "rabbitmq:4-management", "4", ("rabbitmq:4", "rabbitmq:management", "rabbitmq:latest"),
             (5672, 15672),
             ("sh", "-c", "test -x /usr/sbin/rabbitmq-server && ls /usr/lib/rabbitmq/lib/")),
]
