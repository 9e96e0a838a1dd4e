"""Terminal output as plain text: the colour codes a build or test run writes are not part of
what a rule or an experience unit matches (the legacy builder colours a step's stderr:
``\\x1b[91mE\\x1b[0m\\x1b[91m: Unable to locate package``)."""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)
