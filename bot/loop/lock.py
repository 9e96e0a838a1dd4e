"""Lock what the clean replay proved (issue 16).

After a clean replay passes, the replay image's installed distributions become
``<output>/requirements.lock`` (bot.graph.lock), with the hashes the index gives, and the system
packages the Dockerfile installs are pinned to the versions the replay image has. The locked
Dockerfile is then built and its installed set compared with the replay's: only a lock that
reproduces the proven set replaces the unlocked Dockerfile.

When the loop's working image was built from the graph's own Dockerfile, the lock is drafted
from that image before the replay instead (``draft_before_replay``): the clean replay builds the
locked Dockerfile and runs the tests on it, so one no-cache build proves both the environment
and its lock, and the run builds one image fewer. A locked replay that does not hold gives way
to the unlocked replay and the lock after it.

Hashes come from ``uv pip compile --generate-hashes --no-build --no-deps`` over the exact pins
(nothing is built or run on the host, SECURITY.md S12); distributions with no usable wheel,
which uv will not hash without building, are looked up in the index's own listing.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from bot import safefs
from bot.compile import compile_dockerfile as default_compile
from bot.compile.dockerfile import without_dev_stage
from bot.graph.apply import project_compiles
from bot.graph.build import PROJECT
from bot.graph.lock import (
    BUILD_ONLY_TOOLS,
    LOCK_NAME,
    LOCK_NODE,
    PLAN_SOURCE,
    PLATFORM,
    LockEntry,
    RequirementsLock,
    apply_lock,
    build_tools,
    inputs_hash,
    parse_lock,
    restate_lock_source,
    unstage_build_tools,
)
from bot.graph.model import BUILD_ONLY_ATTR, DepGraph, dev_stage_only
from bot.graph.native_lock import native_lock
from bot.graph.resolve import NO_PYTHON_DOWNLOADS, names_in_error, wheel_less
from bot.indexes import SIMPLE_ACCEPT, default_index_url, project_page
from bot.logtext import strip_ansi
from bot.markers import has_marker

log = logging.getLogger(__name__)

_MARK = "SETUPBOT-DISTS:"
# Every installed distribution with its version, whether it came from a URL or a path
# (direct_url.json: editable installs, VCS and local paths), which no index hash can cover, and
# whether it is pure Python, so that building it from an sdist needs no compiler: its WHEEL
# file's Root-Is-Purelib, or, for a legacy `setup.py install` (an .egg-info with no WHEEL file),
# a file list (installed-files.txt, else SOURCES.txt) that names no extension module and no
# C, C++, Cython, Fortran or Rust source.
# And the names each one requires (every Requires-Dist, whatever its marker or extra), so that
# what nothing installed requires can be told apart (``unrequired``).
# Distributions under Debian's own dist-packages came with a Debian package (python3-gi,
# python3-mako) that an apt line installs and pins: Debian's interpreter (a stand-in image) sees
# them, no index has their Debian versions (Mako 1.2.4.dev0), and the lock leaves them to apt.
NATIVE_SUFFIXES = (".so", ".pyd", ".dylib", ".c", ".cc", ".cpp", ".cxx", ".h", ".hpp", ".pyx", ".f", ".f90", ".rs")
DEBIAN_DIST_PACKAGES = "/usr/lib/python3/dist-packages"
FREEZE_SCRIPT = (
    "import json, os, re, importlib.metadata as m\n"
    f"NATIVE = {NATIVE_SUFFIXES!r}\n"
    f"DEBIAN = {DEBIAN_DIST_PACKAGES!r}\n"
    "NAME = r'[A-Za-z0-9][A-Za-z0-9._-]*'\n"
    "seen = {}\n"
    "for d in m.distributions():\n"
    "    name = d.metadata['Name']\n"
    "    if os.path.abspath(str(d.locate_file(''))) == DEBIAN:\n"
    "        continue\n"
    "    if name and name.lower() not in seen:\n"
    "        wheel = d.read_text('WHEEL')\n"
    "        if wheel is not None:\n"
    "            pure = 'root-is-purelib: true' in wheel.lower()\n"
    "        else:\n"
    "            files = d.files\n"
    "            pure = bool(files) and not any(str(f).lower().endswith(NATIVE) for f in files)\n"
    "        reqs = sorted({r.group(0) for r in (re.match(NAME, q) for q in d.requires or ()) if r})\n"
    "        seen[name.lower()] = [name, d.version, bool(d.read_text('direct_url.json')), pure, reqs]\n"
    f"print({_MARK!r} + json.dumps(sorted(seen.values())))\n"
)
DPKG_FORMAT = "${Package}=${Version}\\n"
# The shared libraries that the installed distributions' extension modules link to and the
# dynamic loader cannot find (ldd's "not found" lines), one per line. A wheel built in the
# builder stage may link a library only the compilers brought in (libgomp for OpenMP, say).
MISSING_LIBRARIES_SCRIPT = (
    "find /usr/local/lib /usr/lib/python3 -xdev -type f -name '*.so*' 2>/dev/null"
    " | xargs -r ldd 2>/dev/null | grep 'not found' | sed 's/^[[:space:]]*//' | sort -u"
)


@dataclass
class InstalledSet:
    dists: dict[str, str] = field(default_factory=dict)  # canonical name -> version
    from_url: dict[str, str] = field(default_factory=dict)  # installed from a URL or path
    debs: dict[str, str] = field(default_factory=dict)  # Debian package -> version
    pure: set[str] = field(default_factory=set)  # installed from a pure-Python wheel
    # canonical name -> the names its Requires-Dist lines name (markers and extras not weighed)
    requires: dict[str, set[str]] = field(default_factory=dict)
    ok: bool = True
    error: str = ""


def parse_freeze_output(output: str) -> InstalledSet:
    out = InstalledSet()
    line = next((ln for ln in reversed(output.splitlines()) if ln.startswith(_MARK)), None)
    if line is None:
        return InstalledSet(ok=False, error=output.strip()[-300:] or "no output")
    try:
        rows = json.loads(line[len(_MARK) :])
    except ValueError as exc:
        return InstalledSet(ok=False, error=f"unreadable listing: {exc}")
    for row in rows:
        name, version, direct = row[:3]
        key = canonicalize_name(name)
        (out.from_url if direct else out.dists)[key] = version
        if len(row) > 3 and row[3] is True:
            out.pure.add(key)
        if len(row) > 4 and isinstance(row[4], list):
            out.requires[key] = {canonicalize_name(str(r)) for r in row[4]}
    return out


def parse_dpkg_output(output: str) -> dict[str, str]:
    debs = {}
    for line in output.splitlines():
        name, sep, version = line.strip().partition("=")
        if sep and name and version and re.match(r"^[a-z0-9][a-z0-9+.\-]*(:[a-z0-9]+)?$", name):
            debs[name.split(":")[0]] = version
    return debs


def missing_libraries(engine: Any, image: str, timeout: float = 300) -> set[str] | None:
    """The shared libraries the extension modules in ``image`` need and do not find, read in a
    throwaway container with no network; None when that could not be read."""
    r = engine.run_once(image, ["sh", "-c", MISSING_LIBRARIES_SCRIPT], timeout=timeout)
    if not r.ok:
        return None
    return {ln.strip() for ln in r.output.splitlines() if ln.strip().endswith("not found")}


def installed_set(engine: Any, image: str, debs: Sequence[str] = (), timeout: float = 300) -> InstalledSet:
    """The Python distributions of ``image`` (and the versions of ``debs``), read in a throwaway
    container with no network."""
    r = engine.run_once(image, ["python", "-c", FREEZE_SCRIPT], timeout=timeout)
    found = parse_freeze_output(r.output) if r.ok else InstalledSet(ok=False, error=r.output.strip()[-300:])
    if found.ok and debs:
        d = engine.run_once(image, ["dpkg-query", "-W", "-f", DPKG_FORMAT, *debs], timeout=timeout)
        found.debs = parse_dpkg_output(d.output)
    return found


# --- hashes ---------------------------------------------------------------------------------------


def _entries(text: str) -> dict[str, LockEntry]:
    lock = parse_lock("# inputs: sha256:" + "0" * 16 + "\n" + text)
    return {e.name: e for e in (lock.entries if lock else [])}


def uv_hashes(
    pins: Mapping[str, str], python: str, *, index_url: str | None = None, timeout: float = 120.0
) -> tuple[dict[str, LockEntry], str]:
    """Hashes of the exact pins from uv (wheels and sdist of each version, as pip-compile
    gives them). Returns (entries, error)."""
    uv = shutil.which("uv")
    if uv is None:
        return {}, "uv is not installed"
    if not pins:
        return {}, ""
    with tempfile.TemporaryDirectory(prefix="setupbot-lock-") as tmp:
        req = Path(tmp) / "pins.in"
        req.write_text("".join(f"{n}=={v}\n" for n, v in sorted(pins.items())))
        argv = [
            uv,
            "pip",
            "compile",
            NO_PYTHON_DOWNLOADS,
            "--generate-hashes",
            "--no-build",
            "--no-deps",
            "--no-header",
            "--no-annotate",
            "--quiet",
            "--python-version",
            python,
            "--python-platform",
            PLATFORM,
            str(req),
        ]
        if index_url:
            argv[3:3] = ["--index-url", index_url]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SETUPBOT_")}
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp)
        except (subprocess.TimeoutExpired, OSError) as exc:
            return {}, f"uv pip compile --generate-hashes did not complete: {exc}"
    if proc.returncode != 0:
        return {}, (proc.stderr or proc.stdout).strip()
    return _entries(proc.stdout), ""


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.links.append(href)


def _version_of(filename: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None


def index_hashes(
    name: str,
    version: str,
    *,
    index_url: str | None = None,
    timeout: float = 20.0,
    opener: Callable[..., Any] = urllib.request.urlopen,
) -> list[str]:
    """sha256 of every file of ``name==version`` from the index's listing: the simple API
    (PEP 691 JSON or PEP 503 HTML), which every index and mirror serves, of ``index_url``, else
    of the index pip uses on this host (bot.indexes.default_index_url)."""
    index_url = index_url or default_index_url()
    if not index_url:
        return []
    url = project_page(index_url, canonicalize_name(name))
    return _listed_hashes(url, SIMPLE_ACCEPT, name, Version(version), timeout, opener)


def _listed_hashes(
    url: str, accept: str, name: str, want: Version, timeout: float, opener: Callable[..., Any]
) -> list[str]:
    """The sha256 of every file of version ``want`` that the listing at ``url`` gives."""
    req = urllib.request.Request(url, headers={"Accept": accept, "User-Agent": "setupbot"})
    try:
        with opener(req, timeout=timeout) as resp:
            body = resp.read(20_000_000).decode("utf-8", errors="replace")
            ctype = resp.headers.get("Content-Type", "") if getattr(resp, "headers", None) else ""
    except (urllib.error.URLError, OSError, ValueError) as exc:
        log.info("no hashes for %s==%s from %s: %s", name, want, url, exc)
        return []
    found: list[str] = []
    if "json" in ctype or body.lstrip().startswith("{"):
        try:
            data = json.loads(body)
        except ValueError:
            return []
        files = data.get("files") if "files" in data else data.get("urls", [])
        for f in files or []:
            fname = f.get("filename", "")
            digest = (f.get("hashes") or f.get("digests") or {}).get("sha256")
            if digest and _version_of(fname) == want:
                found.append(f"sha256:{digest}")
    else:
        parser = _Links()
        parser.feed(body)
        for href in parser.links:
            path, _, frag = href.partition("#")
            fname = path.rsplit("/", 1)[-1]
            if frag.startswith("sha256=") and _version_of(fname) == want:
                found.append("sha256:" + frag.split("=", 1)[1])
    return sorted(set(found))


# The hashes uv gave for an exact pin (index, Python, name, version), for this process: a run
# drafts its lock up to three times (from the plan, the tested container, the replay) over
# mostly the same pins, and uv asks the index again for each one (about 10 s for 100 pins).
# Every pin is hashed alone (--no-deps), so what uv gave for it once holds for any set.
_HASHED: dict[tuple[str | None, str, str, str], tuple[str, ...]] = {}
_HASHED_LOCK = threading.Lock()


def fetch_hashes(
    pins: Mapping[str, str], python: str, *, index_url: str | None = None, timeout: float = 120.0
) -> tuple[list[LockEntry], list[str]]:
    """Entries for every pin, with hashes where the index gives them. uv first; a pin it will
    not hash without building (no usable wheel) is looked up in the index listing instead.
    Returns (entries, notes)."""
    entries: dict[str, LockEntry] = {}
    with _HASHED_LOCK:
        for n, v in pins.items():
            known = _HASHED.get((index_url, python, n, v))
            if known is not None:
                entries[n] = LockEntry(n, v, list(known))
    remaining = {n: v for n, v in pins.items() if n not in entries}
    manual: list[str] = []
    notes: list[str] = []
    for _ in range(8):
        got, error = uv_hashes(remaining, python, index_url=index_url, timeout=timeout)
        if not error:
            entries.update(got)
            with _HASHED_LOCK:
                for n, e in got.items():
                    if e.hashes and remaining.get(n) == e.version:
                        _HASHED[(index_url, python, n, e.version)] = tuple(e.hashes)
            break
        named = [n for n in names_in_error(error, set(remaining)) if n not in manual]
        if not named:
            notes.append("uv gave no hashes: " + error.strip().splitlines()[-1][:200] if error.strip() else "uv failed")
            manual += list(remaining)
            break
        for n in named:
            manual.append(n)
            remaining.pop(n, None)
    else:
        manual += list(remaining)
    for n in sorted(set(manual)):
        hashes = index_hashes(n, pins[n], index_url=index_url)
        entries[n] = LockEntry(n, pins[n], hashes)
    for n, v in pins.items():
        if n not in entries:
            entries[n] = LockEntry(n, v, [])
    unhashed = sorted(n for n, e in entries.items() if not e.hashes)
    if unhashed:
        notes.append(
            f"no hashes from the index for {', '.join(unhashed[:5])}"
            + (f" (+{len(unhashed) - 5} more)" if len(unhashed) > 5 else "")
            + "; the lock pins versions without --require-hashes"
        )
    return [entries[n] for n in sorted(entries)], notes


# --- the lock step ----------------------------------------------------------------------------------


@dataclass
class LockOutcome:
    status: str  # locked | unchanged | skipped | failed
    reason: str = ""
    lock: RequirementsLock | None = None
    text: str = ""
    file: str = ""
    tag: str = ""
    dockerfile: str = ""
    apt_versions: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    graph: Any = None  # the locked graph (bot.graph.DepGraph) when status is "locked"

    @property
    def ok(self) -> bool:
        return self.status in ("locked", "unchanged")

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "file": self.file,
            "tag": self.tag,
            "count": len(self.lock.entries) if self.lock else 0,
            "inputs_hash": self.lock.inputs_hash if self.lock else "",
            "hashed": self.lock.hashed if self.lock else False,
            "apt_versions": self.apt_versions,
            "notes": self.notes,
            "seconds": round(self.seconds, 2),
        }


def lockable_pins(replay: InstalledSet, base: InstalledSet, project: str | None) -> tuple[dict[str, str], list[str]]:
    """What the lock holds: the replay image's distributions except the project itself and what
    the base image already has at the same version (not reinstalled). Also returns the
    distributions installed from a URL or path, which an index lock cannot hold."""
    pins = {n: v for n, v in replay.dists.items() if n != project and base.dists.get(n) != v}
    from_url = sorted(n for n in replay.from_url if n != project)
    return pins, from_url


def unrequired(installed: InstalledSet, named: set[str], base: InstalledSet) -> dict[str, str]:
    """The installed distributions that nothing asks for: not named by the plan (``named``),
    not in the base image, not installed from a URL or path (the project), and required by none
    of those nor by what they require, whatever the marker or extra. A repair that pins an older
    release leaves them behind: django-bootstrap5's era pins took virtualenv and pydantic back
    to 2024, and python-discovery and typing-inspection, which only their newer releases
    require, stayed installed, with requirements pip check found broken. Empty when the listing
    has no requirements (an older reader)."""
    if not installed.requires:
        return {}
    reached: set[str] = set()
    stack = [n for n in installed.dists if n in named or n in base.dists] + list(installed.from_url)
    while stack:
        name = stack.pop()
        if name not in reached:
            reached.add(name)
            stack.extend(installed.requires.get(name, ()))
    return {n: v for n, v in sorted(installed.dists.items()) if n not in reached}


def _named_by_plan(graph: DepGraph) -> set[str]:
    """Every distribution the graph names, installed or not: its packages, test tools, project
    and members (canonical names)."""
    return {canonicalize_name(n.name) for n in graph.nodes.values() if n.type in ("PACKAGE", "TOOL")}


def _project_name(graph: DepGraph) -> str | None:
    node = graph.nodes.get(PROJECT)
    if node is None or node.name.startswith("("):
        return None
    return canonicalize_name(node.name)


@dataclass
class _Replay:
    """What the clean replay installed, in the terms the lock needs."""

    apt: list[str]  # the Debian packages the Dockerfile installs
    base: InstalledSet  # the base image's own distributions, which are not reinstalled
    pins: dict[str, str]
    apt_versions: dict[str, str]
    pure: frozenset[str] = frozenset()  # pins installed from pure-Python wheels
    unrequired: dict[str, str] = field(default_factory=dict)  # installed, left out of the pins


@dataclass
class LockFile:
    """The lock file in the repository's output folder. It is read and written only through
    bot.safefs: an output folder or lock file that is a symlink (to a host directory, say) is
    refused, never followed, and nothing is written outside the repository."""

    repo: Path
    rel: str

    @classmethod
    def in_output(cls, repo: Path, output_dir: str) -> LockFile:
        """The lock file in the output folder ``output_dir`` (output.dir) of ``repo``."""
        return cls(Path(repo), f"{output_dir.strip('/')}/{LOCK_NAME}")

    def _allowed(self) -> list[str]:
        return [self.rel.rsplit("/", 1)[0] if "/" in self.rel else self.rel]

    def read(self) -> str | None:
        """Its text; None when there is none. UnsafePath when it or a folder on the way is a
        symlink, or it is not a regular file."""
        path = Path(self.repo)
        for part in self.rel.split("/"):
            path = path / part
            if path.is_symlink():
                raise safefs.UnsafePath(
                    f"{path.relative_to(self.repo)} is a symlink; setupbot neither follows nor writes through it"
                )
        try:
            return safefs.read_text(self.repo, self.rel)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def write(self, text: str) -> None:
        safefs.write_text(self.repo, self.rel, text, allowed=self._allowed())

    def restore(self, current: str | None) -> None:
        """Back as it was before this attempt (absent when there was none)."""
        if current is None:
            safefs.remove(self.repo, self.rel, allowed=self._allowed())
        else:
            self.write(current)


@dataclass
class _Draft:
    """A new lock, the graph that installs it and the Dockerfile compiled from that graph."""

    lock: RequirementsLock
    text: str
    locked: DepGraph
    left_out: list[Any]  # the build tools left out (build-essential first), put back if it does not build
    notes: list[str]
    dockerfile: str
    staged: bool = False  # the compilers are in a builder stage (lock.built)
    target: LockFile | None = None  # where the lock file is written


def lock_environment(
    engine: Any,
    repo: Path,
    graph: DepGraph,
    *,
    replay_tag: str,
    output_dir: str,
    index_url: str | None = None,
    timeout: float = 120.0,
    compile_dockerfile: Callable[[DepGraph], Any] | None = None,
) -> LockOutcome:
    """Freeze the replay image, write the lock into ``repo/output_dir``, build the locked
    Dockerfile and check that it installs the same set. On any failure the lock file is put back
    as it was and the outcome says why; the caller keeps the unlocked Dockerfile."""
    compile_dockerfile = compile_dockerfile or default_compile
    t0 = time.monotonic()
    target = LockFile.in_output(repo, output_dir)
    rel = target.rel
    native = native_lock(graph)
    if native is not None:
        # the repository's own lock already fixes the set; a second lock would compete with it
        return LockOutcome("native", f"installed from the repository's {native.name}", file=native.name, tag=replay_tag)
    replay = _read_replay(engine, graph, replay_tag, rel, t0)
    if isinstance(replay, LockOutcome):
        return replay
    try:
        current = target.read()
    except safefs.UnsafePath as exc:
        return LockOutcome("skipped", exc.what, file=rel, seconds=time.monotonic() - t0)
    kept = _keep_current(graph, replay, current, rel=rel, replay_tag=replay_tag, t0=t0)
    if kept is not None:
        return kept
    draft = _draft_lock(graph, replay, rel, index_url, timeout, compile_dockerfile)
    _write_draft(draft, target)
    tag = replay_tag.rsplit(":", 1)[0] + ":locked"
    reason = _try_locked(engine, repo, graph, replay, draft, tag, compile_dockerfile, replay_tag=replay_tag)
    if reason:
        target.restore(current)
        return LockOutcome(
            "failed",
            reason,
            lock=draft.lock,
            file=rel,
            notes=draft.notes,
            apt_versions=replay.apt_versions,
            seconds=time.monotonic() - t0,
        )
    return LockOutcome(
        "locked",
        "",
        lock=draft.lock,
        text=draft.text,
        file=rel,
        tag=tag,
        dockerfile=draft.dockerfile,
        apt_versions=replay.apt_versions,
        notes=draft.notes,
        seconds=time.monotonic() - t0,
        graph=draft.locked,
    )


@dataclass
class PendingLock:
    """A lock drafted from the loop's working image before the clean replay. The replay then
    builds the locked Dockerfile with no cache and runs the tests on it, so one build proves
    the environment and its lock (``proven_by_replay``); ``withdraw`` puts the lock file back
    as it was when the replay does not hold."""

    draft: _Draft
    working: _Replay  # what the working image installed
    working_tag: str
    rel: str
    current: str | None  # the lock file as it was (None: there was none)
    unlocked: DepGraph  # the graph before the lock was applied
    seconds: float  # what drafting it took
    # with a builder stage: the shared libraries the working set's extension modules did not
    # find, read where the lock was frozen (the tested container, when it was frozen there)
    libraries_before: set[str] | None = None

    def withdraw(self) -> None:
        if self.draft.target is not None:
            self.draft.target.restore(self.current)


def draft_before_replay(
    engine: Any,
    repo: Path,
    graph: DepGraph,
    *,
    working_tag: str,
    output_dir: str,
    index_url: str | None = None,
    timeout: float = 120.0,
    compile_dockerfile: Callable[[DepGraph], Any] | None = None,
    frozen_from: str = "the tested image",
) -> PendingLock | None:
    """Freeze the working image (built from ``graph``'s own Dockerfile), write the lock and
    return it with the locked graph for the clean replay to build. None when the lock is left
    to after the replay (``lock_environment``): a native lock, a graph that already installs a
    lock, a hand-written lock file, or a set an index lock cannot pin."""
    compile_dockerfile = compile_dockerfile or default_compile
    t0 = time.monotonic()
    if native_lock(graph) is not None or "config:requirements-lock" in graph.nodes:
        return None
    target = LockFile.in_output(repo, output_dir)
    rel = target.rel
    working = _read_replay(engine, graph, working_tag, rel, t0, drop_unrequired=True)
    if isinstance(working, LockOutcome) or not working.pins:
        return None
    try:
        current = target.read()
    except safefs.UnsafePath:
        return None  # lock_environment says why after the replay
    if current is not None and not has_marker(current):
        return None  # a person wrote it: lock_environment says so after the replay
    source = f"frozen from {frozen_from}, then built and tested by the clean replay"
    draft = _draft_lock(graph, working, rel, index_url, timeout, compile_dockerfile, source)
    _write_draft(draft, target)
    unlocked = DepGraph.from_json(graph.to_json())
    # a builder stage's final image is checked against the libraries the tested set found:
    # read now, where it was frozen (a container's extra distributions are not in the image)
    before = missing_libraries(engine, working_tag) if draft.staged else None
    return PendingLock(
        draft, working, working_tag, rel, current, unlocked, time.monotonic() - t0, libraries_before=before
    )


class ContainerReader:
    """The engine as the lock's readers use it (``installed_set``), except that the working
    image's tag is read in the loop's running container on it: that holds what the repairs
    tried there installed, which the image lacks, and it is the set the tests passed with."""

    def __init__(self, engine: Any, session: Any, tag: str) -> None:
        self.engine, self.session, self.tag = engine, session, tag

    def run_once(self, image: str, argv: Sequence[str], timeout: float = 300, **kw: Any) -> Any:
        if image == self.tag:
            return self.session.exec(list(argv), timeout=timeout)
        return self.engine.run_once(image, argv, timeout=timeout, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


def proven_by_replay(engine: Any, pending: PendingLock, replay_tag: str) -> LockOutcome:
    """The clean replay built ``pending``'s locked Dockerfile and its tests held: the lock is
    kept when the replay image installed the working image's set (and, with a builder stage,
    lacks no shared library the working image had). Otherwise the lock file is put back and the
    outcome says why."""
    t0 = time.monotonic()
    draft = pending.draft
    reason = _differs_from_replay(engine, replay_tag, pending.unlocked, pending.working)
    if not reason and draft.staged:
        lost = _staged_libraries_missing(engine, replay_tag, pending.working_tag, before=pending.libraries_before)
        reason = f"without the compilers the image lacks {lost}" if lost else ""
    return _pending_outcome(pending, reason, replay_tag, pending.seconds + time.monotonic() - t0)


def _pending_outcome(pending: PendingLock, reason: str, tag: str, seconds: float) -> LockOutcome:
    """The drafted lock kept (no ``reason``) as the image ``tag``, or put back with why."""
    draft = pending.draft
    if reason:
        pending.withdraw()
        return LockOutcome(
            "failed",
            reason,
            lock=draft.lock,
            file=pending.rel,
            notes=draft.notes,
            apt_versions=pending.working.apt_versions,
            seconds=seconds,
        )
    return LockOutcome(
        "locked",
        "",
        lock=draft.lock,
        text=draft.text,
        file=pending.rel,
        tag=tag,
        dockerfile=draft.dockerfile,
        apt_versions=pending.working.apt_versions,
        notes=draft.notes,
        seconds=seconds,
        graph=draft.locked,
    )


@dataclass
class PlanLock:
    """A lock drafted from the plan's own resolution before the run's first build, so that the
    first image installs it: when that image's tests pass with no repair, the image proves the
    environment and its lock at once, and the run builds no image to prove the lock. Only a
    resolution that fixes the whole set qualifies (every requirement resolved on the host, a
    wheel for every pin, no compiler in the plan); ``withdraw`` takes it out again when a repair
    or a trial is needed, and the lock is then made the usual way, after the clean replay."""

    lock: RequirementsLock
    rel: str
    target: LockFile
    current: str | None  # the lock file as it was (None: there was none)
    notes: list[str]
    seconds: float
    left_out: list[str] = field(default_factory=list)  # build tools the first image goes without

    def withdraw(self, graph: DepGraph) -> None:
        self.target.restore(self.current)
        graph.remove(LOCK_NODE)
        _put_back_build_tools(graph)


# The mark on a build tool that the lock resolved from the plan left out of the first image
# (every pin has a wheel, the project compiles nothing); withdrawing that lock puts it back.
PLAN_LEFT_OUT = "left out with the lock resolved from the plan: every pin installs from a wheel"


def _put_back_build_tools(graph: DepGraph) -> None:
    """The build tools the plan's lock left out, back in ``graph`` as the plan had them."""
    for n in graph.of_type("SYSTEMLIB"):
        if n.attrs.get("dropped") == PLAN_LEFT_OUT:
            n.action = "apt"
            n.attrs.pop("dropped", None)


# Repairs that leave the installed distributions as they were: a system package, an environment
# variable, a service, the test command, a git repository. The lock resolved from the plan holds
# through them; any other repair changes what pip installs, and the lock goes.
LOCK_NEUTRAL_ATOMS = frozenset({"apt_install", "set_env", "start_service", "test_command", "git_init"})


def keeps_plan_lock(atoms: Sequence[Any]) -> bool:
    """Whether a repair of these atoms leaves the plan's lock standing."""
    return all(getattr(a, "kind", None) in LOCK_NEUTRAL_ATOMS for a in atoms)


def forget_plan_lock(graph: DepGraph) -> None:
    """Take out of ``graph`` a lock resolved from the plan that was not proven (a graph from a
    checkpoint taken before the lock was dropped)."""
    if not isinstance(graph, DepGraph):
        return  # a stand-in graph (tests) holds no lock
    node = graph.nodes.get(LOCK_NODE)
    if node is not None and str(node.attrs.get("source", "")) == PLAN_SOURCE:
        graph.remove(LOCK_NODE)
        _put_back_build_tools(graph)


WHEEL_LESS_REFUSAL = "part of the set is resolved or built only in the image"


def plan_lock_refusal(graph: DepGraph, *, wheel_less: bool = True) -> str:
    """Why the plan's resolution cannot be the lock before the first build; empty when it can.
    ``wheel_less=False``: as if the distributions with no wheel were resolved and pure Python
    (what a resolution in a container, ``bot.loop.inimage``, can make so)."""
    res = graph.meta.get("resolution") or {}
    if native_lock(graph) is not None or LOCK_NODE in graph.nodes:
        return "the repository's own lock or an earlier run's lock is installed"
    if res.get("ok") is not True or res.get("skipped") or not res.get("pins"):
        return "the plan's requirements did not resolve on the host"
    project = graph.nodes.get(PROJECT)
    if project is not None and project.attrs.get("unread_dependencies"):
        # the lock installs the project with --no-deps: what was not read would be left out
        return "the project's own dependencies are computed by its build, not read: the first image installs them"
    if res.get("not_on_host") or res.get("from_lock"):
        return WHEEL_LESS_REFUSAL
    if wheel_less and (res.get("unbuilt") or res.get("sdist_only")):
        return WHEEL_LESS_REFUSAL
    if _unneeded_build_tools(graph) and (
        project_compiles(graph) or any(n.action == "run" for n in graph.nodes.values())
    ):
        # the project or a command of the plan may compile: the compilers stay, and the lock
        # after the clean replay decides what the image needs of them
        return "the plan installs a compiler, and the project or a command of the plan may compile"
    return ""


def complete_resolution(graph: DepGraph, pins: dict[str, str], built_pure: list[str], where: str) -> None:
    """The plan's resolution, completed in a container (``bot.loop.inimage``): ``pins`` is the
    whole set, and every pin with no wheel (``built_pure``) was built there as a pure-Python
    wheel. The graph's nodes take their versions from it, and nothing is left to the image."""
    res = graph.meta.setdefault("resolution", {})
    res["pins"] = dict(sorted(pins.items()))
    res["unbuilt"] = []
    res["sdist_only"] = None
    res["built_pure"] = sorted(built_pure)
    res["completed_in"] = where
    for n in graph.of_type("PACKAGE") + graph.of_type("TOOL"):
        if n.action in ("pip", "tool", "repair-pip") and n.name in pins:
            n.attrs["resolved"] = pins[n.name]
            n.state = "SATISFIED"
            n.add_evidence("uv pip compile", None, f"resolves to {pins[n.name]} in {where}")


def draft_from_plan(
    repo: Path,
    graph: DepGraph,
    *,
    output_dir: str,
    index_url: str | None = None,
    timeout: float = 120.0,
) -> PlanLock | str:
    """Hash the plan's resolution into the lock file and make ``graph`` install it (in place).
    Returns the lock, or why none was drafted."""
    t0 = time.monotonic()
    why = plan_lock_refusal(graph)
    if why:
        return why
    target = LockFile.in_output(repo, output_dir)
    rel = target.rel
    try:
        current = target.read()
    except safefs.UnsafePath as exc:
        return exc.what
    if current is not None and not has_marker(current):
        return f"{rel} was written by a person"
    # the project itself, when a dependency needs it (a plugin of the project's own tests), is
    # installed from the source, never from the index: not in the lock, as after a replay
    project = _project_name(graph)
    pins = {str(n): str(v) for n, v in (graph.meta["resolution"]["pins"] or {}).items() if n != project}
    python = graph.runtime.attrs.get("version", "")
    entries, notes = fetch_hashes(pins, python, index_url=index_url, timeout=timeout)
    lock = RequirementsLock(entries, graph.meta.get("inputs_hash") or inputs_hash(graph), python)
    try:
        target.write(lock.render())
    except safefs.UnsafePath as exc:
        return exc.what
    apply_lock(graph, lock, rel, source=PLAN_SOURCE)
    # every pin installs from a wheel (the plan's --only-binary resolution) and the project
    # compiles nothing: the first image goes without the compilers and build tools that a CI
    # workflow or a tox file named, as the lock after a replay would (freeze_draft); a first
    # build that fails without them withdraws this lock, which puts them back
    left_out = _unneeded_build_tools(graph)
    for n in left_out:
        n.action = None
        n.attrs["dropped"] = PLAN_LEFT_OUT
    pure = (graph.meta.get("resolution") or {}).get("built_pure") or []
    if left_out and pure:
        notes.append(
            f"{', '.join(n.name for n in left_out)} left out: every locked distribution installs from a wheel"
            f" or is pure Python ({', '.join(pure)}: no wheel on the index, built in a container on the base image)"
        )
    elif left_out:
        notes.append(f"{', '.join(n.name for n in left_out)} left out: every locked distribution installs from a wheel")
    return PlanLock(lock, rel, target, current, notes, time.monotonic() - t0, [n.name for n in left_out])


def proven_plan_lock(engine: Any, graph: DepGraph, plan: PlanLock, tag: str, proof: str) -> LockOutcome:
    """``tag`` was built from ``graph``'s locked Dockerfile with no step from the cache and its
    tests passed (``proof`` says which image that was): the lock is kept when the image installed
    exactly the lock's distributions. The system packages are then pinned to the versions that
    image installed. Otherwise the outcome says why (the caller withdraws the lock)."""
    t0 = time.monotonic()
    image = _read_replay(engine, graph, tag, plan.rel, t0)
    if isinstance(image, LockOutcome):
        return LockOutcome("failed", image.reason, file=plan.rel, seconds=plan.seconds + image.seconds)
    # a pin the base image already has at that version is not reinstalled, so not listed
    expected = {n: v for n, v in plan.lock.pins.items() if image.base.dists.get(n) != v}
    if image.pins != expected:
        diff = sorted(set(image.pins.items()) ^ set(expected.items()))[:5]
        return LockOutcome(
            "failed",
            f"the image did not install exactly the lock resolved from the plan: {diff}",
            file=plan.rel,
            seconds=plan.seconds + time.monotonic() - t0,
        )
    lock = plan.lock
    lock.debs = dict(image.apt_versions)
    text = lock.render()
    plan.target.write(text)
    source = f"{PLAN_SOURCE}; {proof} installed it and its tests passed" + (
        ", and the system packages are pinned to the versions it installed" if lock.debs else ""
    )
    apply_lock(graph, lock, plan.rel, source=source, apt_versions=image.apt_versions)
    return LockOutcome(
        "locked",
        "",
        lock=lock,
        text=text,
        file=plan.rel,
        tag=tag,
        apt_versions=image.apt_versions,
        notes=list(plan.notes),
        seconds=plan.seconds + time.monotonic() - t0,
        graph=graph,
    )


FIRST_BUILD_SOURCE = (
    "frozen from the clean replay, the run's first image; the locked Dockerfile built and installs the same set"
)


def proven_by_build(engine: Any, repo: Path, pending: PendingLock, tag: str) -> LockOutcome:
    """The working image was itself the clean replay (built from scratch, its tests ran; see
    bot.loop.replay): the lock drafted from it is kept when the locked Dockerfile builds and
    installs the same set. The caller takes this way only when the draft leaves nothing out and
    builds no wheel in a builder stage, so the locked image differs from the proven one in its
    pins alone. Otherwise the lock file and graph go back and the outcome says why."""
    t0 = time.monotonic()
    draft = pending.draft
    restate_lock_source(draft.locked, FIRST_BUILD_SOURCE)
    build = engine.build(repo, without_dev_stage(draft.dockerfile), tag)
    reason = "" if build.ok else "the locked Dockerfile did not build: " + _log_tail(build.log, 3, 400)
    if not reason:
        reason = _differs_from_replay(engine, tag, pending.unlocked, pending.working)
    return _pending_outcome(pending, reason, tag, pending.seconds + time.monotonic() - t0)


def _read_replay(
    engine: Any, graph: DepGraph, replay_tag: str, rel: str, t0: float, *, drop_unrequired: bool = False
) -> _Replay | LockOutcome:
    """Freeze the replay image and the base image; an outcome instead when the replay cannot be
    listed or holds something an index lock cannot pin. ``drop_unrequired``: what nothing
    requires (``unrequired``) stays out of the pins, for a lock that the clean replay's tests
    then prove without it."""
    # the development stage's packages (git for the editor) are not in the tested image
    apt = sorted(n.name for n in graph.of_type("SYSTEMLIB") if n.action == "apt" and not dev_stage_only(n))
    replay = installed_set(engine, replay_tag, apt)
    if not replay.ok:
        return LockOutcome(
            "failed",
            f"could not list the replay image's distributions: {replay.error}",
            file=rel,
            seconds=time.monotonic() - t0,
        )
    base_image = graph.runtime.attrs.get("base_image", "")
    base = installed_set(engine, base_image) if base_image else InstalledSet()
    pins, from_url = lockable_pins(replay, base, _project_name(graph))
    if from_url:
        return LockOutcome(
            "skipped",
            f"{', '.join(from_url[:3])} came from a URL or a path, which an index lock cannot pin",
            file=rel,
            seconds=time.monotonic() - t0,
        )
    apt_versions = {n: replay.debs[n] for n in apt if n in replay.debs}
    dropped = unrequired(replay, _named_by_plan(graph), base) if drop_unrequired else {}
    pins = {n: v for n, v in pins.items() if n not in dropped}
    return _Replay(apt, base, pins, apt_versions, frozenset(replay.pure & set(pins)), dropped)


def _keep_current(
    graph: DepGraph, replay: _Replay, current: str | None, *, rel: str, replay_tag: str, t0: float
) -> LockOutcome | None:
    """The outcome when the lock file already there stays as it is: a person wrote it, or the
    replay reproduced it exactly. None when a new lock is to be written."""
    if current is not None and not has_marker(current):
        return LockOutcome(
            "skipped",
            f"{rel} was written by a person (no setupbot marker); it is kept",
            file=rel,
            seconds=time.monotonic() - t0,
        )
    existing = parse_lock(current) if current else None
    node = graph.nodes.get("config:requirements-lock")
    if (
        existing is not None
        and node is not None
        and existing.pins == replay.pins
        and existing.debs == replay.apt_versions
    ):
        # the replay was built from this very lock and reproduced it
        return LockOutcome(
            "unchanged",
            "the replay installed exactly the lock",
            lock=existing,
            text=current or "",
            file=rel,
            tag=replay_tag,
            apt_versions=replay.apt_versions,
            seconds=time.monotonic() - t0,
        )
    return None


def _draft_lock(
    graph: DepGraph,
    replay: _Replay,
    rel: str,
    index_url: str | None,
    timeout: float,
    compile_dockerfile: Callable[[DepGraph], Any],
    source: str = "frozen from the clean replay",
) -> _Draft:
    """Hash the replay's pins into a lock, apply it to a copy of the graph (without the compiler
    when nothing needs one) and compile that graph's Dockerfile."""
    python = graph.runtime.attrs.get("version", "")
    # both ask the index and wait on the network: at once (the wheel check's resolution takes
    # about as long as the hashes)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="setupbot-wheels") as pool:
        wheels = pool.submit(_compiled_pins, graph, replay.pins, python, index_url, timeout, pure=replay.pure)
        entries, notes = fetch_hashes(replay.pins, python, index_url=index_url, timeout=timeout)
        compiled = wheels.result()
    if replay.unrequired:
        listed = ", ".join(f"{n} {v}" for n, v in list(replay.unrequired.items())[:6])
        more = f" (+{len(replay.unrequired) - 6} more)" if len(replay.unrequired) > 6 else ""
        notes.append(
            f"left out of the lock: {listed}{more}: installed, but the plan names none of them and nothing "
            "installed requires them (a repair's older pin left them behind); the clean replay's tests ran without them"
        )
    lock = RequirementsLock(
        entries, graph.meta.get("inputs_hash") or inputs_hash(graph), python, debs=replay.apt_versions
    )
    if compiled and build_tools(graph):
        # the compilers build only these wheels: they go in a builder stage (issue 16 item 5)
        lock.built = compiled
    locked = DepGraph.from_json(graph.to_json())
    apply_lock(locked, lock, rel, source=source, apt_versions=replay.apt_versions)
    staged = bool(lock.built)
    left_out = _unneeded_build_tools(locked) if compiled == [] else []
    if left_out:
        # every locked distribution installs from a wheel or is pure Python, and the project
        # compiles nothing: the image is tried without the compilers and build tools (issue 16:
        # build-essential only when needed; a CI workflow's cmake or gfortran that built a
        # dependency from source there builds nothing here); a build that fails without them
        # gets them back (_build_locked), and the clean replay's tests prove the rest
        for n in left_out:
            n.action = None
            n.attrs["dropped"] = "every locked distribution has a wheel or is pure Python"
        # the lock's header lists the Debian packages the Dockerfile installs: not these
        names = {n.name for n in left_out}
        lock.debs = {name: v for name, v in lock.debs.items() if name not in names}
        notes.append(
            f"{', '.join(n.name for n in left_out)} left out: "
            "every locked distribution installs from a wheel or is pure Python"
        )
    if staged:
        tools = ", ".join(sorted(n.name for n in build_tools(locked)))
        notes.append(
            f"{tools} only in a builder stage: the index has no wheel for {', '.join(lock.built)}, "
            "built there; the final image installs the wheels"
        )
    dockerfile = compile_dockerfile(locked).text
    return _Draft(lock, lock.render(), locked, left_out, notes, dockerfile, staged=staged)


def _unneeded_build_tools(locked: DepGraph) -> list[Any]:
    """The build tools the locked graph installs in the tested image, build-essential first,
    then the others by name. A repair's build-essential or cmake is among them: it built a
    distribution the lock now installs from a wheel. So are the Debian packages the system
    table says only a source build of a distribution needs (cartopy's GEOS and PROJ headers,
    ``BUILD_ONLY_ATTR``); a library the distribution loads at run time is not (the eccodes
    binding's libeccodes0). A tool the test command names (``make test``, ``sh -c "make
    check"``) is not among them: the tests need it."""
    target = locked.nodes.get("target:tests")
    command = [str(w) for w in (target.attrs.get("command") or [])] if target is not None else []
    runs = {Path(word).name for part in command for word in part.split()}
    nodes = [
        n
        for n in locked.of_type("SYSTEMLIB")
        if n.action == "apt"
        and (n.name in BUILD_ONLY_TOOLS or n.attrs.get(BUILD_ONLY_ATTR))
        and n.name not in runs
        and not n.attrs.get("stage")
        and not dev_stage_only(n)
    ]
    return sorted(nodes, key=lambda n: (n.name != "build-essential", n.name))


def _write_draft(draft: _Draft, target: LockFile) -> None:
    """Write the drafted lock where the Dockerfile's COPY finds it, and remember where."""
    target.write(draft.text)
    draft.target = target


def _try_locked(
    engine: Any,
    repo: Path,
    graph: DepGraph,
    replay: _Replay,
    draft: _Draft,
    tag: str,
    compile_dockerfile: Callable[[DepGraph], Any],
    *,
    replay_tag: str = "",
) -> str:
    """Build the locked image as ``tag`` and compare it with the replay: why the lock cannot be
    kept, or empty when it reproduces the proven set."""
    build = _build_locked(engine, repo, draft, tag, compile_dockerfile, replay_tag=replay_tag)
    if not build.ok:
        return "the locked Dockerfile did not build: " + _log_tail(build.log, 3, 400)
    return _differs_from_replay(engine, tag, graph, replay)


# what the engine writes around the step that failed: its header, its container, and the command
# again (which may span lines of its own), none of which says why the step failed
_ENGINE_LINE = re.compile(r"^(?:Step \d+/\d+ :|---> |Removing intermediate container |#\d+ (?:DONE|CACHED)\b)")
_FAILED_COMMAND = re.compile(r"^(?:The command '|(?:#\d+ )?ERROR: (?:failed to solve|process \"))", re.M)


def failed_in_lock_install(log: str) -> bool:
    """Whether the build step that failed is the one installing the lock file (the engine's
    line that quotes the failed command names it)."""
    text = strip_ansi(log or "")
    return any(LOCK_NAME in text[m.start() :].split("\n", 1)[0] for m in _FAILED_COMMAND.finditer(text))


def _log_tail(log: str, lines: int, limit: int) -> str:
    """The last ``lines`` lines of a build log that say why it failed, on one line, at most
    ``limit`` characters. Colour codes go, and so do the engine's own lines around the failed
    step: the command repeated at the end, the step's container removed. The last lines of the
    log as it is when nothing else is left."""
    text = strip_ansi(log or "").strip()
    ends = [m.start() for m in _FAILED_COMMAND.finditer(text)]
    said = [
        line.strip()
        for line in (text[: ends[-1]] if ends else text).splitlines()
        if line.strip() and not _ENGINE_LINE.match(line.strip())
    ]
    return " ".join(said[-lines:] or text.splitlines()[-lines:])[:limit]


def _unstage(draft: _Draft, why: str, compile_dockerfile: Callable[[DepGraph], Any]) -> None:
    """The compilers back in the final image and no builder stage; the lock file says so too."""
    draft.staged = False
    draft.lock.built = []
    unstage_build_tools(draft.locked)
    draft.text = draft.lock.render()
    if draft.target is not None:
        draft.target.write(draft.text)
    draft.notes = [n for n in draft.notes if "builder stage" not in n] + [f"no builder stage: {why}"]
    draft.dockerfile = compile_dockerfile(draft.locked).text


def _staged_libraries_missing(engine: Any, tag: str, replay_tag: str, *, before: set[str] | None = None) -> str:
    """The shared libraries the builder stage's image lacks that the replay had; empty when
    none (or when either image cannot be read: the installed-set check still runs). ``before``:
    what the tested set lacked, read already (in the container the lock was frozen in)."""
    now = missing_libraries(engine, tag)
    if before is None:
        before = missing_libraries(engine, replay_tag) if replay_tag else set()
    if now is None or before is None:
        return ""
    had = {_library_name(line) for line in before}
    lost = sorted(line for line in now if _library_name(line) not in had)
    return ", ".join(lost[:3])


# auditwheel names the libraries it vendors into a wheel's .libs folder with a hash of their
# contents (libcrypto-1736dd4b.so.3): another release of the same wheel vendors the same library
# under another hash
_VENDORED_HASH = re.compile(r"-[0-9a-f]{8}(?=\.so)")


def _library_name(line: str) -> str:
    """The library an ldd "not found" line names, without a vendoring hash."""
    return _VENDORED_HASH.sub("", line.split("=>", 1)[0].strip())


def _build_locked(
    engine: Any,
    repo: Path,
    draft: _Draft,
    tag: str,
    compile_dockerfile: Callable[[DepGraph], Any],
    *,
    replay_tag: str = "",
) -> Any:
    """Build the locked Dockerfile; when it was left without the compiler and does not build,
    the compiler goes back in and it is built once more (``draft`` records what was built).
    A builder stage that does not build, or whose final image misses a shared library the
    replay had, gives way to the one-stage form with the compilers."""

    def build_tested_stage() -> Any:
        # the draft's Dockerfile as it stands now, without the development stage (git, the user)
        return engine.build(repo, without_dev_stage(draft.dockerfile), tag)

    build = build_tested_stage()
    if draft.staged:
        if not build.ok:
            tail = _log_tail(build.log, 2, 300)
            why = "the image with a builder stage did not build" + (f" ({tail})" if tail else "")
        else:
            lost = _staged_libraries_missing(engine, tag, replay_tag)
            why = f"without the compilers the image lacks {lost}" if lost else ""
        if why:
            _unstage(draft, why, compile_dockerfile)
            build = build_tested_stage()
    if not build.ok and draft.left_out:
        # it needed them after all: put them back
        for n in draft.left_out:
            n.action = "apt"
            n.attrs.pop("dropped", None)
            seen = n.attrs.get("version")
            if seen:
                draft.lock.debs = {**draft.lock.debs, n.name: seen}
        names = ", ".join(n.name for n in draft.left_out)
        draft.notes = [n for n in draft.notes if "left out" not in n] + [
            f"{names} kept: the locked image did not build without {'it' if len(draft.left_out) == 1 else 'them'}"
        ]
        draft.text = draft.lock.render()
        if draft.target is not None:
            draft.target.write(draft.text)
        draft.dockerfile = compile_dockerfile(draft.locked).text
        build = build_tested_stage()
    return build


def _differs_from_replay(engine: Any, tag: str, graph: DepGraph, replay: _Replay) -> str:
    """Why the locked image's distributions are not the replay's; empty when they are."""
    again = installed_set(engine, tag, replay.apt)
    again_pins, _ = lockable_pins(again, replay.base, _project_name(graph))
    if not again.ok or again_pins != replay.pins:
        diff = sorted(set(again_pins.items()) ^ set(replay.pins.items()))[:5]
        return f"the locked image differs from the replay: {diff or again.error}"
    return ""


def _compiled_pins(
    graph: DepGraph,
    pins: Mapping[str, str],
    python: str,
    index_url: str | None,
    timeout: float,
    *,
    pure: frozenset[str] = frozenset(),
) -> list[str] | None:
    """The locked distributions that compile in the image: those with no wheel for this Python
    (``--only-binary`` resolutions over the exact pins), except those the replay installed from a
    pure-Python wheel, whose sdist needs no compiler. [] when none compiles; None when that
    cannot be told, or when something else compiles: the project itself (a C or Rust extension)
    or a repair's command."""
    if project_compiles(graph):
        return None
    if any(n.action == "run" for n in graph.nodes.values()):
        return None  # a repair's command may compile: keep what the replay had
    if not pins:
        return None
    binary = {n: v for n, v in pins.items() if n not in pure}
    if not binary:
        return []
    return wheel_less(dict(binary), python, timeout=timeout, index_url=index_url)
