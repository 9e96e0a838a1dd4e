"""The one way templates are loaded: a Jinja environment over ``templates/`` (STYLE.md 7).

Every renderer (Dockerfile, compose, devcontainer, report, baselines, engine recipes) starts
from :func:`make_environment`, so they share the loader, ``StrictUndefined`` and newline
handling; each adds only the filters its templates use.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import jinja2

from bot.paths import templates_dir


def yamlstr(value: object) -> str:
    """A YAML scalar that stays data whatever it holds (a JSON string is valid YAML)."""
    return json.dumps(str(value))


BASE_FILTERS: dict[str, Callable[..., Any]] = {"yamlstr": yamlstr}


def make_environment(
    *, filters: Mapping[str, Callable[..., Any]] | None = None, trim_blocks: bool = False, lstrip_blocks: bool = False
) -> jinja2.Environment:
    # autoescape is off: none of the outputs is HTML; each template escapes for its own format
    # through filters (yamlstr, tojson, env_quote, the report's Markdown filters).
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        trim_blocks=trim_blocks,
        lstrip_blocks=lstrip_blocks,
    )
    env.filters.update(BASE_FILTERS)
    env.filters.update(filters or {})
    return env


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The shared environment with the base filters: templates are parsed once per process."""
    return make_environment()


def render_template(name: str, **variables: Any) -> str:
    return environment().get_template(name).render(**variables)
