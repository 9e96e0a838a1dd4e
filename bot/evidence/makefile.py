"""Makefile and justfile recipes named like tests (test, tests, check, unit), and any recipe a
CI step runs (``make local-test``): the commands behind ``make test`` / ``just test`` in CI."""

from __future__ import annotations

import re

from bot.evidence import shellcmd
from bot.evidence.files import RepoFiles
from bot.evidence.model import Evidence, Source

_RECIPE = re.compile(r"^([A-Za-z0-9_.\-]+)(?:\s+[^:=]*)?:(?!=)")


def scan(files: RepoFiles, ev: Evidence) -> None:
    ci: dict[str, Source] = {}
    for target, src in ev.ci_targets:
        ci.setdefault(target, src)
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
                    if m
                    and (m.group(1) in ci or re.match(r"^(test|tests|test-.*|check|unit|unittest|pytest)$", m.group(1)))
                    else None
                )
                continue
            if current and line.strip() and not line.strip().startswith("#"):
                body = line.strip().lstrip("@-+")
                body = re.sub(r"\{\{[^}]*\}\}|\$\([^)]*\)|\$\{[^}]*\}", "", body)
                by = ci.get(current)
                detail = f"{rel} {current}" + (
                    f" (run by {by.file}{f':{by.line}' if by.line else ''})" if by is not None else ""
                )
                shellcmd.record_shell(ev, body, rel, i, detail, ci=by is not None)
