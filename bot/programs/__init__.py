"""Python programs setupbot runs *inside* containers (``python -c <source> ARGS``).

They are files rather than strings so they can be read, linted and compiled like any code; they
are never imported on the host (importing one would run it). Each runs on the analysed
repository's interpreter, so they use the standard library only and stay compatible with old
Pythons (ruff's pyupgrade rules are off for this folder).
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

PROGRAMS = ("forwarder", "import_probe", "mutate")


@lru_cache(maxsize=None)
def source(name: str) -> str:
    """The text of ``bot/programs/<name>.py``, as package data (works from a wheel too)."""
    if name not in PROGRAMS:
        raise KeyError(f"no program named {name!r}")
    return resources.files(__name__).joinpath(f"{name}.py").read_text(encoding="utf-8")
