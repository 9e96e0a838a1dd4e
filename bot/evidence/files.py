"""Reading repository files defensively: size limit, encoding, binary junk and symlinks that
leave the repository are warnings, never crashes. Nothing here executes repository code."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Iterator

from bot.evidence.generated import generated_reason
from bot.evidence.model import Evidence

MAX_BYTES = 2 * 1024 * 1024
SKIP_DIRS = {".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "env", ".env", "build", "dist",
             "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache", ".eggs", "site-packages",
             ".ruff_cache", ".idea", ".vscode", "htmlcov", ".direnv"}
MAX_WALK_FILES = 20000


class RepoFiles:
    """Every scanner reads the repository through this class, and this class leaves setupbot's
    own outputs out (bot.evidence.generated): they are never evidence."""

    def __init__(self, root: Path, evidence: Evidence, output_dir: str | None = None) -> None:
        self.root = root.resolve()
        self.ev = evidence
        self.output_dir = output_dir
        self._all: list[str] | None = None

    def _skip_generated(self, rel: str, text: str | None = None) -> bool:
        reason = generated_reason(rel, text, self.output_dir, self.root if text is None else None)
        if reason and rel not in self.ev.generated:
            self.ev.generated[rel] = reason
        return bool(reason)

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _inside(self, path: Path) -> bool:
        try:
            path.resolve().relative_to(self.root)
            return True
        except (ValueError, OSError):
            return False

    def exists(self, rel: str) -> bool:
        p = self.root / rel
        return p.is_file() and self._inside(p) and not self._skip_generated(rel)

    def read_text(self, rel: str, *, quiet_missing: bool = True) -> str | None:
        path = self.root / rel
        if not path.exists() and not path.is_symlink():
            if not quiet_missing:
                self.ev.warn(rel, None, "file not found")
            return None
        if not self._inside(path):
            self.ev.warn(rel, None, "symlink points outside the repository; skipped")
            return None
        if not path.is_file():
            return None
        try:
            size = path.stat().st_size
        except OSError as exc:
            self.ev.warn(rel, None, f"cannot read: {exc.strerror}")
            return None
        if size > MAX_BYTES:
            self.ev.warn(rel, None, f"larger than {MAX_BYTES // (1024 * 1024)} MB ({size} bytes); skipped")
            return None
        try:
            data = path.read_bytes()
        except OSError as exc:
            self.ev.warn(rel, None, f"cannot read: {exc.strerror}")
            return None
        if b"\x00" in data[:8192]:
            self.ev.warn(rel, None, "binary content (NUL bytes); skipped")
            return None
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            self.ev.warn(rel, line, "not valid UTF-8; skipped")
            return None
        if self._skip_generated(rel, text):
            return None
        if rel not in self.ev.files_seen:
            self.ev.files_seen.append(rel)
        return text

    def all_files(self) -> list[str]:
        """Every regular file below the root (sorted, skipping tool and VCS folders); symlinks that
        leave the repository are reported and left out."""
        if self._all is not None:
            return self._all
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info"))
            for name in sorted(filenames):
                p = Path(dirpath) / name
                rel = self.rel(p)
                if p.is_symlink() and not self._inside(p):
                    self.ev.warn(rel, None, "symlink points outside the repository; skipped")
                    continue
                if self._skip_generated(rel):
                    continue
                out.append(rel)
                if len(out) >= MAX_WALK_FILES:
                    self.ev.warn(".", None, f"more than {MAX_WALK_FILES} files; the rest were not scanned")
                    self._all = out
                    return out
        self._all = out
        return out

    def matching(self, predicate) -> Iterator[str]:
        for rel in self.all_files():
            if predicate(rel):
                yield rel


def line_of(text: str, needle: str, start: int = 1) -> int | None:
    """The 1-based line of the first occurrence of ``needle`` at or after line ``start``."""
    if not needle:
        return None
    lines = text.splitlines()
    for i in range(max(start, 1) - 1, len(lines)):
        if needle in lines[i]:
            return i + 1
    for i, line in enumerate(lines):
        if needle in line:
            return i + 1
    return None


def load_toml(files: RepoFiles, rel: str, ev: Evidence, what: str) -> tuple[str, dict] | None:
    """The text and parsed TOML of ``rel``, or None when it is absent or malformed. A malformed
    file is a warning naming its line ("malformed <what> (...); <rel> ignored") and the scan
    goes on."""
    text = files.read_text(rel)
    if text is None:
        return None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        ev.warn(rel, int(m.group(1)) if m else None, f"malformed {what} ({exc}); {rel} ignored")
        return None
