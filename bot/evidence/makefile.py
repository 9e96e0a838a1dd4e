"""Makefile and justfile recipes named like tests (test, tests, check, unit): the commands
behind ``make test`` / ``just test`` in CI."""

from __future__ import annotations

import re

from bot.evidence import shellcmd
from bot.evidence.files import RepoFiles
from bot.evidence.model import Evidence

_RECIPE = re.compile(r"^([A-Za-z0-9_.\-]+)(?:\s+[^:=]*)?:(?!=)")


def scan(files: RepoFiles, ev: Evidence) -> None:
    for rel in ("Makefile", "makefile", "GNUmakefile", "justfile", "Justfile", ".justfile"):
        text = files.read_text(rel)
        if text is None:
            continue
        current = None
        for i, line in enumerate(text.splitlines(), 1):
            if line and not line[0].isspace():
                m = _RECIPE.match(line)
                current = (
                    m.group(1)
                    if m and re.match(r"^(test|tests|test-.*|check|unit|unittest|pytest)$", m.group(1))
                    else None
                )
                continue
            if current and line.strip() and not line.strip().startswith("#"):
                body = line.strip().lstrip("@-+")
                body = re.sub(r"\{\{[^}]*\}\}|\$\([^)]*\)|\$\{[^}]*\}", "", body)
                shellcmd.record_shell(ev, body, rel, i, f"{rel} {current}")
