"""YAML as people write it in CI files: versions like 3.10 stay strings, errors become
warnings with the line."""

from __future__ import annotations

from typing import Any

import yaml

from bot.evidence.model import Evidence
from bot.yamlsafe import BoundedLoader


class _StringVersionLoader(BoundedLoader):
    """SafeLoader that keeps floats as their source text, so ``3.10`` is not read as 3.1, and
    does not turn ``on:`` into True. Bounded: alias bombs and deep nesting stop with an error
    (bot.yamlsafe, SECURITY.md S16)."""


def _float_as_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str:
    return loader.construct_scalar(node)


def _bool_or_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> bool | str:
    text = loader.construct_scalar(node)
    return {"true": True, "false": False}.get(text.lower(), text)


_StringVersionLoader.add_constructor("tag:yaml.org,2002:float", _float_as_text)
_StringVersionLoader.add_constructor("tag:yaml.org,2002:bool", _bool_or_text)


def load_yaml(ev: Evidence, rel: str, text: str) -> Any:
    try:
        return yaml.load(text, Loader=_StringVersionLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        ev.warn(rel, None, "malformed YAML: nested too deeply; file ignored")
        return None
    except yaml.YAMLError as exc:
        if "\t" in text and "'\\t'" in str(exc):
            # PyYAML refuses tabs that GitHub's parser accepts inside block scalars
            try:
                data = yaml.load(text.expandtabs(8), Loader=_StringVersionLoader)  # noqa: S506
            except yaml.YAMLError:
                pass
            else:
                mark = getattr(exc, "problem_mark", None)
                ev.warn(rel, mark.line + 1 if mark else None, "tab characters read as spaces")
                return data
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        ev.warn(rel, mark.line + 1 if mark else None, f"malformed YAML: {problem}; file ignored")
        return None
