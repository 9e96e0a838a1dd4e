"""``.python-version`` and ``runtime.txt``: a developer's pin, a preference."""

from __future__ import annotations

import re

from bot.evidence.files import RepoFiles
from bot.evidence.model import Evidence, PythonConstraint, Source


def scan(files: RepoFiles, ev: Evidence) -> None:
    text = files.read_text(".python-version")
    if text is not None:
        for i, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            m = re.match(r"^(?:cpython-|python-?)?(3\.\d+)", line)
            if m:
                ev.python.append(PythonConstraint("pin", m.group(1), Source(".python-version", i, line)))
            else:
                ev.warn(".python-version", i, f"not a CPython 3 version: {line!r}; ignored")
            break
    text = files.read_text("runtime.txt")
    if text is not None:
        m = re.search(r"python-(3\.\d+)", text)
        if m:
            ev.python.append(PythonConstraint("pin", m.group(1), Source("runtime.txt", 1, text.strip())))
