"""What every command shares: the ``--json [FILE]`` flag and its versioned documents, the verdict
gate, and the stream human-readable lines go to.

Machine-readable output: ``--json`` (or ``--json -``) writes the document to stdout, ``--json
FILE`` to a file. Every document is ``{"schema": "setupbot.<command>/<version>", ...}``; the JSON
Schema of each is in schemas/ (tests validate every command's output against it). When the
document goes to stdout, the human-readable lines go to stderr, so stdout parses.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import IO, Any

from bot import progress
from bot.errors import ConfigError

# Strongest first; "Failed" is below every gate.
VERDICT_ORDER = ("Full", "Mostly", "Partial", "Shallow", "Failed")
SCHEMA_VERSION = 1


def add_json_flag(p: argparse.ArgumentParser, what: str = "the result") -> None:
    p.add_argument(
        "--json",
        dest="json",
        nargs="?",
        const="-",
        default=None,
        metavar="FILE",
        help=f"write {what} as JSON to FILE; '-' or no FILE: stdout",
    )


def human(args: argparse.Namespace) -> IO[str]:
    """Where the human-readable lines go: stderr when the JSON document takes stdout."""
    return sys.stderr if getattr(args, "json", None) == "-" else sys.stdout


def document(command: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"schema": f"setupbot.{command}/{SCHEMA_VERSION}", **payload}


def write_json(args: argparse.Namespace, command: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    """Write the versioned document where ``--json`` says (nothing without the flag)."""
    dest = getattr(args, "json", None)
    if dest is None:
        return None
    doc = document(command, payload)
    text = json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n"
    if dest == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        path = Path(dest)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return doc


def meets_gate(tier: str | None, min_verdict: str) -> bool:
    """True when ``tier`` is at or above ``min_verdict`` (publish.min_verdict)."""
    if min_verdict not in VERDICT_ORDER[:4]:
        raise ConfigError(
            f"publish.min_verdict must be one of Full, Mostly, Partial, Shallow, not {min_verdict!r}",
            "Fix publish.min_verdict (`setupbot config show` says which layer set it).",
        )
    if tier not in VERDICT_ORDER:
        return False
    return VERDICT_ORDER.index(tier) <= VERDICT_ORDER.index(min_verdict)


def reporter_for(args: argparse.Namespace, title: str):
    """The progress reporter of a long command, honouring --quiet/--verbose."""
    return progress.make_reporter(title, quiet=getattr(args, "quiet", False), verbose=getattr(args, "verbose", False))
