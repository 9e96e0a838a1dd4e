"""Reading repository files defensively: size limit, encoding, binary junk and symlinks that
leave the repository are warnings, never crashes. Nothing here executes repository code."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bot import safefs
from bot.evidence.generated import generated_reason
from bot.evidence.model import Evidence

MAX_BYTES = 2 * 1024 * 1024
SKIP_DIRS = {
    ".git",
    ".hg",
    ".svn",
    ".tox",
    ".nox",
    ".venv",
    "venv",
    "env",
    ".env",
    "build",
    "dist",
    "node_modules",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".eggs",
    "site-packages",
    ".ruff_cache",
    ".idea",
    ".vscode",
    "htmlcov",
    ".direnv",
}
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
        """The text of a repository file through the one safe reader (bot.safefs): links out of
        the repository, devices and FIFOs are refused, sizes capped; problems are warnings."""
        try:
            data = safefs.read_bytes(self.root, rel, max_bytes=MAX_BYTES)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            if not quiet_missing:
                self.ev.warn(rel, None, "file not found")
            return None
        except safefs.UnsafePath as exc:
            what = exc.what
            if "outside the repository" in what:
                self.ev.warn(rel, None, "symlink points outside the repository; skipped")
            elif "larger than" in what:
                self.ev.warn(rel, None, f"larger than {MAX_BYTES // (1024 * 1024)} MB; skipped")
            elif "not a regular file" in what:
                return None
            else:
                self.ev.warn(rel, None, what)
            return None
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
        leave the repository are reported and left out. The walk is iterative and depth-capped
        (safefs.walk), so a 1,100-level tree is a warning, not a RecursionError."""
        if self._all is not None:
            return self._all
        out: list[str] = []
        deep: list[str] = []
        for dirpath, dirnames, filenames in safefs.walk(self.root, warnings=deep):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info")]
            for name in filenames:
                rel = f"{dirpath}/{name}" if dirpath else name
                p = self.root / rel
                if p.is_symlink() and not self._inside(p):
                    self.ev.warn(rel, None, "symlink points outside the repository; skipped")
                    continue
                if p.is_symlink() and p.is_dir():
                    continue  # a linked folder is not walked into (os.walk's followlinks=False)
                if self._skip_generated(rel):
                    continue
                out.append(rel)
                if len(out) >= MAX_WALK_FILES:
                    self.ev.warn(".", None, f"more than {MAX_WALK_FILES} files; the rest were not scanned")
                    self._all = out
                    return out
        for w in deep:
            self.ev.warn(".", None, w)
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


def as_table(value: Any) -> dict[str, Any]:
    """Repository input has any shape: a table where a table belongs, else nothing."""
    return value if isinstance(value, dict) else {}
