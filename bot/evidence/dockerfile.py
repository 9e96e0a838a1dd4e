"""An existing Dockerfile: the Python base image (a preference) and apt-get packages."""

from __future__ import annotations

import re

from bot.evidence import shellcmd
from bot.evidence.files import RepoFiles
from bot.evidence.model import Evidence, PythonConstraint, Source


def scan(files: RepoFiles, ev: Evidence) -> None:
    for rel in files.all_files():
        parts = rel.split("/")
        if len(parts) > 2 or not re.match(r"^(Dockerfile|.*\.Dockerfile|Dockerfile\..*)$", parts[-1]):
            continue
        if len(parts) == 2 and parts[0] not in ("docker", ".devcontainer", "ci", ".ci"):
            continue
        text = files.read_text(rel)
        if text is None:
            continue
        joined = re.sub(r"\\\n", " ", text)
        for _i, line in enumerate(joined.splitlines(), 1):
            m = re.match(r"^\s*FROM\s+(?:--platform=\S+\s+)?(?:docker\.io/)?(?:library/)?python:(3\.\d+)", line, re.I)
            if m:
                ev.python.append(
                    PythonConstraint("pin", m.group(1), Source(rel, _orig_line(text, line), "existing Dockerfile FROM"))
                )
            m = re.match(r"^\s*RUN\s+(.*)$", line, re.I)
            if m:
                for cmd in shellcmd.commands(m.group(1)):
                    for pkg in shellcmd.apt_packages(cmd):
                        ev.apt_packages.append((pkg, Source(rel, _orig_line(text, line), "existing Dockerfile")))


def _orig_line(text: str, joined_line: str) -> int | None:
    head = joined_line.strip()[:40]
    for i, line in enumerate(text.splitlines(), 1):
        if head and line.strip().startswith(head[:20]):
            return i
    return None
