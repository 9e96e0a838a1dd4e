"""Travis CI (.travis.yml): the services it starts and its global environment, read as a GitHub
workflow's are (bot.evidence.workflows). Older repositories test there: a PostgreSQL the tests
reach on localhost is named only in ``services:``."""

from __future__ import annotations

import re
import shlex
from typing import Any

from bot.catalogue import KINDS, canonical
from bot.evidence.files import RepoFiles, line_of
from bot.evidence.model import Evidence, ServiceRequirement, Source
from bot.evidence.yamlload import load_yaml

TRAVIS = ".travis.yml"
# Travis's service names that are not the catalogue's own words
SERVICE_NAMES = {"redis-server": "redis"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def scan(files: RepoFiles, ev: Evidence) -> None:
    text = files.read_text(TRAVIS)
    if text is not None:
        scan_text(ev, text)


def scan_text(ev: Evidence, text: str) -> None:
    data = load_yaml(ev, TRAVIS, text)
    if data is None:
        return
    if not isinstance(data, dict):
        ev.warn(TRAVIS, None, "not a mapping; ignored")
        return
    _services(ev, text, data.get("services"))
    _env(ev, text, data.get("env"))


def _services(ev: Evidence, text: str, services: Any) -> None:
    names = [services] if isinstance(services, str) else services if isinstance(services, list) else []
    for raw in names:
        if not isinstance(raw, str):
            continue
        word = raw.strip().lower()
        kind = canonical(SERVICE_NAMES.get(word, word))
        line = line_of(text, raw)
        if kind is None:
            ev.warn(TRAVIS, line, f"Travis service {raw!r} is not one setupbot can start; ignored")
            continue
        ev.services.append(
            ServiceRequirement(word, kind, KINDS[kind].image, [], {}, [Source(TRAVIS, line, f"Travis service {raw}")])
        )


def _env(ev: Evidence, text: str, env: Any) -> None:
    """``env: [...]``, ``env: {global: [...]}``: plain assignments only (secure entries and
    values that expand a variable or a command are left out)."""
    entries = env.get("global") if isinstance(env, dict) else env if isinstance(env, list) else None
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, str):
            continue  # {secure: ...}
        try:
            words = shlex.split(entry)
        except ValueError:
            continue
        for word in words:
            name, eq, value = word.partition("=")
            if eq and _NAME.fullmatch(name) and not re.search(r"[$`\\\n]", value):
                ev.env.setdefault(name, (value, Source(TRAVIS, line_of(text, name + "="), "Travis env")))
