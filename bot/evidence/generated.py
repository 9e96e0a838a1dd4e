"""Setupbot's own outputs are never evidence about the repository.

A second run reads the checkout the first run wrote into. Without this rule the generated
``.devcontainer/Dockerfile`` is read as the repository's own wish ("Python 3.13: pinned by
.devcontainer/Dockerfile:6") and every choice setupbot made entrenches itself. Every scanner
reads through ``RepoFiles``, and ``RepoFiles`` asks ``generated_reason`` about every path it
lists and every text it reads: one rule, not a list per scanner.

What counts as setupbot's:
  * anything under ``.setupbot/`` (run records, trajectory, verification record);
  * the stored plan (``setupbot-plan.json``): it is read only as the previous plan, by the code
    that compares runs, never by a scanner;
  * any file whose head carries the generated marker (the Dockerfile, devcontainer.json,
    compose.yaml and report in the output folder, the caller workflow, wherever they are).
A file in the output folder without the marker was written, or taken over, by a person (setupbot
never overwrites it): it stays evidence, like any hand-written Dockerfile or devcontainer.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from bot import safefs
from bot.markers import has_marker

RECORDS_DIR = ".setupbot"
PLAN_FILE = "setupbot-plan.json"
# The names setupbot writes into the output folder (bot.outputs); only these are opened to look
# for the marker while listing, so listing a large repository reads no extra files.
OWNED_NAMES = frozenset({"Dockerfile", "devcontainer.json", "compose.yaml", "setup-report.md", PLAN_FILE})
# ... and the one file it writes at the repository root: the build context's .dockerignore
ROOT_NAMES = frozenset({".dockerignore"})
HEAD_BYTES = 4096


def carries_marker(text: str) -> bool:
    return has_marker(text)


def normal_output_dir(output_dir: str | None) -> str:
    out = posixpath.normpath((output_dir or ".devcontainer").strip()).strip("/")
    return out if out not in ("", ".") and not out.startswith("..") else ".devcontainer"


def path_reason(rel: str) -> str:
    """Why ``rel`` is setupbot's by its path alone, or ""."""
    parts = rel.split("/")
    if parts[0] == RECORDS_DIR:
        return f"setupbot's run records ({RECORDS_DIR}/)"
    if parts[-1] == PLAN_FILE:
        return "setupbot's stored plan (read only as the previous plan)"
    return ""


def generated_reason(rel: str, text: str | None = None, output_dir: str | None = None, root: Path | None = None) -> str:
    """Why ``rel`` is one of setupbot's outputs, or "" when it is the repository's own. ``text``
    is its content when the caller has read it; otherwise, for the names setupbot writes in
    the output folder and for the caller workflow, the head of the file under ``root`` is read."""
    reason = path_reason(rel)
    if reason:
        return reason
    if text is None and root is not None and _worth_opening(rel, output_dir):
        try:
            text = safefs.read_bytes(root, rel, max_bytes=HEAD_BYTES, head=True).decode("utf-8", errors="replace")
        except (OSError, safefs.UnsafePath):
            text = None
    if text is not None and carries_marker(text):
        return "carries the setupbot marker"
    return ""


def _worth_opening(rel: str, output_dir: str | None) -> bool:
    name = rel.rsplit("/", 1)[-1]
    folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
    if folder == normal_output_dir(output_dir) or folder == ".devcontainer":
        return True
    if name in OWNED_NAMES or rel in ROOT_NAMES:
        return True
    return folder == ".github/workflows" and name.startswith("setupbot")
