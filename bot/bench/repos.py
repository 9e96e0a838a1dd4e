"""Benchmark inputs: the repository list (TSV) and the export of one pinned tree.

The list has one repository per line: ``owner/name<TAB>sha[<TAB>...]``. The optional columns
after the sha are a gold test count (the first one that is an integer), a difficulty (the first
one that is not) and a free-text note. Lines starting with ``#`` are comments. A bad line is a
warning and the other lines still run.

A tree is written out from a git directory (a bare mirror laid out as
``<git-root>/<owner>+<name>/repo``, a plain bare or non-bare repository, or a clone of a git URL)
without ``.git``: the context a fresh build sees is exactly the repository at the pinned commit.
Snapshots may lack large blobs; those files are skipped and counted, never fetched.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import InputError
from bot.hostenv import host_env

_SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.][A-Za-z0-9_.-]*$")
_URL = re.compile(r"^(https?://|git://|ssh://|file://|git@)")

# Blobs the snapshot does not have must not be fetched from a promisor remote: the export
# reports them as missing instead (and there is no network to GitHub anyway).
_GIT_ENV = {"GIT_NO_LAZY_FETCH": "1", "GIT_TERMINAL_PROMPT": "0"}


@dataclass(frozen=True)
class BenchRepo:
    name: str  # owner/name (or a name derived from the URL)
    sha: str
    difficulty: str = ""
    gold: int | None = None  # certified test count, when known
    note: str = ""
    source: str = ""  # a git URL or path given instead of owner/name
    line: int = 0

    @property
    def slug(self) -> str:
        return self.name.replace("/", "+")


@dataclass
class ParsedList:
    repos: list[BenchRepo] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _name_from_source(source: str) -> str:
    tail = source.rstrip("/").removesuffix(".git")
    parts = re.split(r"[/:]", tail)
    parts = [p for p in parts if p]
    if len(parts) >= 2:
        return f"{parts[-2]}/{parts[-1]}"
    return parts[-1] if parts else source


def parse_repo_list(text: str, origin: str = "<repos>") -> ParsedList:
    """Parse the TSV text. Never raises for a bad line: it becomes a warning."""
    parsed = ParsedList()
    seen: set[tuple[str, str]] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cols = [c.strip() for c in line.split("\t")]
        if len(cols) < 2:
            # A list typed with spaces instead of tabs is a common slip; say so.
            hint = " (columns must be separated by tabs)" if len(line.split()) >= 2 else ""
            parsed.warnings.append(f"{origin}:{number}: expected 'owner/name<TAB>sha'{hint}; line skipped")
            continue
        first, sha = cols[0], cols[1]
        source = ""
        if _URL.match(first) or first.startswith(("/", "./", "../")):
            source, name = first, _name_from_source(first)
        elif _NAME.match(first):
            name = first
        else:
            parsed.warnings.append(f"{origin}:{number}: '{first}' is neither owner/name nor a git URL; line skipped")
            continue
        if not _SHA.match(sha):
            parsed.warnings.append(f"{origin}:{number}: '{sha}' is not a commit sha; line skipped")
            continue
        gold: int | None = None
        difficulty = ""
        notes: list[str] = []
        for extra in cols[2:]:
            if not extra:
                continue
            if gold is None and re.fullmatch(r"\d+", extra):
                gold = int(extra)
            elif not difficulty and re.fullmatch(r"[A-Za-z][\w-]{0,19}", extra):
                difficulty = extra.lower()
            else:
                notes.append(extra)
        if (name.lower(), sha.lower()) in seen:
            parsed.warnings.append(f"{origin}:{number}: {name}@{sha[:10]} listed twice; the repeat is skipped")
            continue
        seen.add((name.lower(), sha.lower()))
        parsed.repos.append(
            BenchRepo(
                name=name,
                sha=sha.lower(),
                difficulty=difficulty,
                gold=gold,
                note="\t".join(notes),
                source=source,
                line=number,
            )
        )
    return parsed


def read_repo_list(path: Path) -> ParsedList:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(
            f"cannot read the repository list {path}: {exc.strerror or exc}",
            "Pass --repos with a TSV file of 'owner/name<TAB>sha' lines.",
        ) from exc
    return parse_repo_list(text, origin=str(path))


# --- locating a git directory -------------------------------------------------------------


def _is_git_dir(path: Path) -> bool:
    return (path / "objects").is_dir() and (path / "HEAD").exists()


def _git_dir_under(path: Path) -> Path | None:
    for candidate in (path / "repo", path, path / ".git"):
        if candidate.is_dir() and _is_git_dir(candidate):
            return candidate
    return None


def find_git_dir(repo: BenchRepo, git_root: Path | None) -> Path | None:
    """The local git directory for ``repo``: its source path, or ``<git-root>/<owner>+<name>``
    matched case-insensitively (mirrors keep GitHub's spelling, lists often lower-case it)."""
    if repo.source and not _URL.match(repo.source):
        return _git_dir_under(Path(repo.source))
    if git_root is None or not git_root.is_dir():
        return None
    wanted = repo.slug.lower()
    exact = git_root / repo.slug
    if exact.is_dir():
        found = _git_dir_under(exact)
        if found:
            return found
    for entry in sorted(git_root.iterdir()):
        if entry.name.lower() == wanted and entry.is_dir():
            found = _git_dir_under(entry)
            if found:
                return found
    return None


def _git(
    git_dir: Path, *args: str, input_bytes: bytes | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    env = host_env(_GIT_ENV)
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], input=input_bytes, capture_output=True, env=env, timeout=timeout
    )


def clone_bare(url: str, into: Path, timeout: int = 900) -> Path:
    """Clone a git URL (bare) so the export has a git directory to read from."""
    env = host_env(_GIT_ENV)
    argv = ["git", "clone", "--bare", "--quiet", "--", url, str(into)]
    try:
        proc = subprocess.run(argv, capture_output=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise InputError(f"git clone of {url} took more than {timeout}s") from exc
    if proc.returncode != 0:
        raise InputError(
            f"cannot clone {url}: {proc.stderr.decode(errors='replace').strip()[-500:]}",
            "Check the URL, or fetch the repository and pass --git-root.",
        )
    return into


# --- exporting a tree ------------------------------------------------------------------------


@dataclass
class ExportResult:
    root: Path
    files: int = 0
    symlinks: int = 0
    submodules: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # blobs absent from the snapshot
    unsafe: list[str] = field(default_factory=list)  # paths that would leave the root
    seconds: float = 0.0
    commit_date: str = ""  # committer date of the sha (ISO 8601)

    def to_json(self) -> dict:
        return {
            "files": self.files,
            "symlinks": self.symlinks,
            "submodules": self.submodules,
            "missing_blobs": self.missing,
            "unsafe_paths": self.unsafe,
            "commit_date": self.commit_date,
            "seconds": round(self.seconds, 2),
        }


def _within(root: Path, target: Path) -> bool:
    """True when ``target`` (symlinks resolved) is ``root`` or below it."""
    resolved, base = os.path.realpath(target), os.path.realpath(root)
    return resolved == base or resolved.startswith(base + os.sep)


def _ls_tree(git_dir: Path, sha: str) -> list[tuple[str, str, str, str]]:
    proc = _git(git_dir, "ls-tree", "-r", "-z", "--full-tree", sha)
    if proc.returncode != 0:
        raise InputError(
            f"commit {sha} is not readable in {git_dir}: {proc.stderr.decode(errors='replace').strip()[-300:]}",
            "Fetch a snapshot that contains the pinned commit, or fix the sha in the list.",
        )
    entries = []
    for record in proc.stdout.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, kind, oid = meta.decode().split()
        entries.append((mode, kind, oid, os.fsdecode(path)))
    return entries


def _commit_date(git_dir: Path, sha: str) -> str:
    """The committer date of ``sha`` (ISO 8601), or "" when git cannot show it."""
    shown = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", "-s", "--format=%cI", sha],
        capture_output=True,
        text=True,
        env=host_env(_GIT_ENV),
    )
    return shown.stdout.strip() if shown.returncode == 0 else ""


def _write_blob(dest: Path, mode: str, path: str, data: bytes, result: ExportResult) -> None:
    """Write one blob below ``dest``, as a file or a symlink; a path that would leave ``dest`` is
    recorded in ``result.unsafe`` and not written."""
    target = dest / path
    # A parent that is a symlink (git allows "a" -> "/etc" next to nothing under "a", but a
    # crafted tree could try) must not carry a write outside the export.
    if ".." in Path(path).parts or not _within(dest, target.parent):
        result.unsafe.append(path)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    if not _within(dest, target.parent):
        result.unsafe.append(path)
        return
    if mode == "120000":
        # A symlink is kept as a symlink; the build context never follows it out.
        os.symlink(os.fsdecode(data), target)
        result.symlinks += 1
        return
    target.write_bytes(data)
    if mode == "100755":
        target.chmod(0o755)
    result.files += 1


def _export_blobs(git_dir: Path, sha: str, dest: Path, blobs: list[tuple[str, str, str]], result: ExportResult) -> None:
    """Read ``blobs`` (mode, oid, path) through one ``git cat-file --batch`` stream into ``dest``."""
    env = host_env(_GIT_ENV)
    proc = subprocess.Popen(
        ["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin and proc.stdout
    stdin = proc.stdin

    # Feed requests from a thread so a large tree cannot deadlock on full pipes.
    def feed() -> None:
        try:
            for _mode, oid, _path in blobs:
                stdin.write(oid.encode() + b"\n")
            stdin.close()
        except BrokenPipeError:
            pass

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        for mode, _oid, path in blobs:
            header = proc.stdout.readline()
            if not header:
                raise InputError(f"git cat-file stopped early while exporting {sha} from {git_dir}")
            parts = header.split()
            if len(parts) >= 2 and parts[1] == b"missing":
                result.missing.append(path)
                continue
            size = int(parts[2])
            data = proc.stdout.read(size)
            proc.stdout.read(1)  # the newline after the content
            _write_blob(dest, mode, path, data, result)
    finally:
        feeder.join(timeout=5)
        proc.stdout.close()
        proc.wait(timeout=30)


def export_tree(git_dir: Path, sha: str, dest: Path) -> ExportResult:
    """Write the tree of ``sha`` into ``dest`` (created; must not exist or be empty).

    Reads every blob through one ``git cat-file --batch`` stream; a blob the snapshot lacks is
    answered ``<oid> missing`` and its path is recorded in ``missing``.
    """
    started = time.monotonic()
    dest.mkdir(parents=True, exist_ok=True)
    result = ExportResult(root=dest)
    entries = _ls_tree(git_dir, sha)
    # the export has no .git: the commit date travels beside it (the loop's era repairs use it)
    result.commit_date = _commit_date(git_dir, sha)
    blobs = [(mode, oid, path) for mode, kind, oid, path in entries if kind == "blob"]
    for _mode, kind, _oid, path in entries:
        if kind == "commit":  # a submodule: its content is another repository
            result.submodules.append(path)
            (dest / path).mkdir(parents=True, exist_ok=True)
    _export_blobs(git_dir, sha, dest, blobs, result)
    result.seconds = time.monotonic() - started
    return result


def prepare_git_dir(repo: BenchRepo, git_root: Path | None, scratch: Path) -> Path:
    """The git directory to export from: local when found, otherwise a bare clone of the URL."""
    found = find_git_dir(repo, git_root)
    if found is not None:
        return found
    if repo.source and _URL.match(repo.source):
        return clone_bare(repo.source, scratch / "clone.git")
    where = f" under {git_root}" if git_root else ""
    raise InputError(
        f"no git directory for {repo.name}{where}",
        f"Fetch it so that {git_root or '<git-root>'}/{repo.slug}/repo exists, or give a git URL in the first column.",
    )


def copy_tree(src: Path, dest: Path) -> Path:
    """A private copy of an exported tree (each system may write into its own)."""
    shutil.copytree(src, dest, symlinks=True)
    return dest


def new_scratch(prefix: str = "setupbot-bench-") -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))
