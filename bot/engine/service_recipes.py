"""Recipes for the service stand-in images that `setupbot images bootstrap` builds, derived from
the service catalogue (bot/catalogue.py): one recipe per kind whose ``standin`` is set.

Nothing can be pulled here, so the services CI files name are built from Debian's packages on
the trixie stand-in and tagged with the official names of the versions Debian ships (trixie:
PostgreSQL 17 + pgvector, Redis 8, MariaDB 11.8, RabbitMQ 4.0, memcached 1.6); no tag claims a
version the image does not have. Each entrypoint (templates/images/services/<name>/entrypoint.sh)
reads the official image's environment variables, so a CI ``services:`` block works unchanged. A
version the engine has no tag for is served by the stand-in of the same kind, and the
substitution is reported (``bot.catalogue.resolve_image``). A kind Debian does not package
(MongoDB) has no recipe; the catalogue says it cannot start offline.
"""

from __future__ import annotations

from bot.catalogue import KINDS, STANDIN_SUITE, StandIn
from bot.engine.recipes import ImageRecipe

SERVICE_BASE = f"debian:{STANDIN_SUITE}-slim"


def standin_recipe(standin: StandIn, ports: tuple[int, ...]) -> ImageRecipe:
    name = standin.template
    return ImageRecipe(
        tag=standin.tag,
        template=f"images/services/{name}/Dockerfile.j2",
        base=SERVICE_BASE,
        kind="service",
        name=name,
        version=standin.version,
        files={"entrypoint.sh": f"images/services/{name}/entrypoint.sh"},
        variables={"packages": list(standin.packages)},
        probe=standin.probe,
        aliases=standin.aliases,
        ports=ports,
    )


SERVICE_RECIPES: list[ImageRecipe] = [
    standin_recipe(kind.standin, (kind.port, *kind.extra_ports)) for kind in KINDS.values() if kind.standin is not None
]
