"""Recipes for the service stand-in images that `setupbot images bootstrap` builds.

Nothing can be pulled here, so the services CI files name (postgres, pgvector, redis, mariadb,
mysql, rabbitmq) are built from Debian's packages on the trixie stand-in and tagged with the
official names. Each entrypoint reads the official image's environment variables, so a CI
``services:`` block works unchanged. Versions the engine has no tag for are served by the
stand-in of the same kind, and that substitution is reported (bot.verify.catalog.resolve_image).

Each recipe: ``context`` (a directory under templates/ with a Dockerfile and entrypoint.sh),
``base`` (the image passed as the BASE build argument), ``tags`` (every tag the built image
gets; the first is the build tag) and ``kind``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.paths import templates_dir

SERVICE_BASE = "debian:trixie-slim"

SERVICE_RECIPES: dict[str, dict[str, Any]] = {
    "postgres": {
        "kind": "postgres",
        "context": "images/services/postgres",
        "base": SERVICE_BASE,
        # one image serves both: Debian's postgresql-17 with postgresql-17-pgvector
        "tags": ["postgres:17", "postgres:latest", "pgvector/pgvector:pg17"],
    },
    "redis": {
        "kind": "redis",
        "context": "images/services/redis",
        "base": SERVICE_BASE,
        "tags": ["redis:7", "redis:latest"],
    },
    "mariadb": {
        "kind": "mysql",
        "context": "images/services/mariadb",
        "base": SERVICE_BASE,
        # MariaDB speaks the MySQL protocol; mysql:8 is the tag CI files name most
        "tags": ["mariadb:11", "mariadb:latest", "mysql:8"],
    },
    "rabbitmq": {
        "kind": "rabbitmq",
        "context": "images/services/rabbitmq",
        "base": SERVICE_BASE,
        "tags": ["rabbitmq:3-management", "rabbitmq:3", "rabbitmq:latest"],
    },
}


def recipe_context(name: str) -> Path:
    """The build context directory of one recipe."""
    return templates_dir() / SERVICE_RECIPES[name]["context"]


def recipe_dockerfile(name: str) -> str:
    return (recipe_context(name) / "Dockerfile").read_text()


def build_service_image(engine: Any, name: str, *, base: str | None = None,
                        log_path: Path | None = None) -> Any:
    """Build one stand-in and give it all its tags. Returns the engine's BuildResult.

    The BASE build argument is written into the Dockerfile text (the engine's build takes
    text, not build arguments), so the same recipe can sit on any Debian stand-in.
    """
    recipe = SERVICE_RECIPES[name]
    text = recipe_dockerfile(name).replace("ARG BASE=" + SERVICE_BASE,
                                           "ARG BASE=" + (base or recipe["base"]))
    first, *rest = recipe["tags"]
    result = engine.build(recipe_context(name), text, first, log_path=log_path)
    if getattr(result, "ok", False):
        for tag in rest:
            engine.tag(first, tag)
    return result
