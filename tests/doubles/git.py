"""One ``git`` for the tests that make repositories: a fixed identity, ``main`` as the first
branch, and no user or system configuration (a developer's ``commit.gpgsign`` or hooks path must
not change what a test builds)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path | str, *args: str) -> str:
    """Run ``git -C repo args`` and return its standard output, stripped; raise on failure."""
    return subprocess.run(
        ["git", "-c", "init.defaultBranch=main", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **_ENV},
    ).stdout.strip()
