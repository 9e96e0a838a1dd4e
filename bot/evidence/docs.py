"""README and CONTRIBUTING code blocks: install and test commands people are told to run."""

from __future__ import annotations

import re

from bot.evidence import shellcmd
from bot.evidence.files import RepoFiles
from bot.evidence.model import Evidence

_NAMES = re.compile(r"^(readme|contributing|development|hacking)(\.(md|rst|txt|markdown))?$", re.I)


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, text) for lines inside fenced blocks, rst literal blocks and ``$ `` prompts."""
    out: list[tuple[int, str]] = []
    fence = None
    rst_indent: int | None = None
    lines = text.splitlines()
    for i, line in enumerate(lines, 1):
        stripped = line.strip()
        if fence:
            if stripped.startswith(fence):
                fence = None
            else:
                out.append((i, stripped))
            continue
        m = re.match(r"^\s*(```+|~~~+)", line)
        if m:
            fence = m.group(1)
            continue
        if rst_indent is not None:
            if not stripped:
                continue
            indent = len(line) - len(line.lstrip())
            if indent > rst_indent:
                out.append((i, stripped))
                continue
            rst_indent = None
        if stripped.endswith("::") or stripped.startswith(".. code"):
            rst_indent = len(line) - len(line.lstrip())
            continue
        if stripped.startswith("$ "):
            out.append((i, stripped[2:]))
    return out


def scan(files: RepoFiles, ev: Evidence) -> None:
    for rel in files.all_files():
        parts = rel.split("/")
        if not _NAMES.match(parts[-1]) or (len(parts) > 1 and parts[0] not in (".github", "docs", "doc")):
            continue
        text = files.read_text(rel)
        if text is None:
            continue
        for lineno, line in code_lines(text):
            if len(line) > 300:
                continue
            shellcmd.record_shell(ev, line.lstrip("$> "), rel, lineno, "docs", docs=True)
