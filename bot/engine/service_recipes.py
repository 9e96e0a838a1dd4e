"""Recipes for the service stand-in images that `setupbot images bootstrap` builds.

Nothing can be pulled here, so the services CI files name (postgres, pgvector, redis, mariadb,
mysql, rabbitmq) are built from Debian's packages on the trixie stand-in and tagged with the
official names. Each entrypoint (templates/images/services/<name>/entrypoint.sh) reads the
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
    _service("redis", "redis:7", "7", ("redis:latest",), (6379,),
             ("sh", "-c", "redis-server --version && redis-cli --version")),
    # MariaDB speaks the MySQL protocol; mysql:8 is the MySQL tag CI files name most
    _service("mariadb", "mariadb:11", "11", ("mariadb:latest", "mysql:8", "mysql:latest"), (3306,),
             ("sh", "-c", "mariadbd --version && mariadb-admin --version")),
    # rabbitmq:3-management is the tag CI files name most; the management plugin is enabled
    _service("rabbitmq", "rabbitmq:3-management", "3", ("rabbitmq:3", "rabbitmq:latest"), (5672, 15672),
             ("sh", "-c", "test -x /usr/sbin/rabbitmq-server && ls /usr/lib/rabbitmq/lib/")),
]
