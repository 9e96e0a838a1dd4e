"""Incremental runs: what the plan read, hashed, so a push that changes none of it skips the
container work.

The committed plan JSON (``<output.dir>/setupbot-plan.json``) records, next to the plan:

- ``inputs``: a hash of every file the repository scan read (manifests, lock files, CI files,
  tox/nox, README and docs commands, pytest configuration, compose files) and of every file the
  repository's ecosystems name as their plan's inputs (``input_files``: Cargo.toml, Cargo.lock,
  rust-toolchain*, through ``bot.ecosystems.base.NamesInputs``), of the imports found in the
  source (not the source itself: a change to a function body changes no requirement), of the
  settings that shape the environment, and of the setupbot version;
- ``verified``: the verdict, whether the clean replay passed and the test counts;
- ``outputs``: a hash of each environment file (Dockerfile, devcontainer.json, compose.yaml).

``unchanged(repo, settings)`` answers whether a new run would start from the same inputs as the
recorded one and the recorded files are still in place. Nothing here runs repository code; the
scan is the same static one the plan makes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import posixpath
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot import __version__, safefs
from bot.evidence import scan_repository
from bot.hostenv import host_env
from bot.markers import DOCKERIGNORE, PLAN, REPORT, check_output_dir, has_marker

log = logging.getLogger(__name__)

# Settings sections that change the environment setupbot produces. The token, the LLM endpoint and
# budgets are left out: they change how the run goes, not what a passing environment is.
SHAPING_SETTINGS = ("target", "services", "siblings", "output", "images")
CONFIG_FILES = (".github/setupbot.yml", ".github/setupbot.yaml")
# Python files read for what they declare (not only for their imports).
MANIFEST_PY = ("setup.py", "noxfile.py", "conftest.py")
# The files an ecosystem names as its plan's inputs (``bot.ecosystems.input_files``): the layers
# below the ecosystems take it as a function, they do not import the registry.
InputFiles = Callable[[Path], Iterable[str]]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _jsonable(v) for k, v in dict(value).items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_jsonable(v) for v in value]
        return sorted(items, key=json.dumps) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def settings_digest(settings: Any) -> str:
    if settings is None:
        return ""
    shaping = {name: _jsonable(getattr(settings, name, None)) for name in SHAPING_SETTINGS}
    # the gate decides the report's wording; fail_on and draft_below_gate change no file
    shaping["min_verdict"] = getattr(getattr(settings, "publish", None), "min_verdict", None)
    return _digest(json.dumps(shaping, sort_keys=True, default=str).encode())


def _generated(data: bytes) -> bool:
    return has_marker(data[:2048].decode("utf-8", errors="replace"))


def _read(root: Path, rel: str) -> bytes | None:
    """A repository file through the one safe reader (no link out of the repository on the
    way, size capped), or None."""
    try:
        return safefs.read_bytes(root, rel, max_bytes=8 * 1024 * 1024)
    except (OSError, safefs.UnsafePath):
        return None


def environment_inputs(repo: Path, settings: Any = None, input_files: InputFiles | None = None) -> dict[str, Any]:
    """What the plan reads from ``repo``, hashed: ``{"digest": ..., "files": {path: hash}, ...}``.
    ``input_files``: the files the repository's ecosystems name beside the shared scan's."""
    root = Path(repo).resolve()
    ev = scan_repository(root)
    named = set(input_files(root)) if input_files is not None else set()
    files: dict[str, str] = {}
    for rel in sorted(set(ev.files_seen) | named | {c for c in CONFIG_FILES if (root / c).is_file()}):
        path = root / rel
        if rel.startswith(".setupbot/") or path.is_symlink() or not path.is_file():
            continue
        if rel.endswith(".py") and rel.rsplit("/", 1)[-1] not in MANIFEST_PY:
            continue  # source code counts through its imports, below
        data = _read(root, rel)
        if data is None:
            continue
        if _generated(data):
            continue  # setupbot's own outputs are results, not inputs
        files[rel] = _digest(data)
    imports = sorted(
        {f"{i.module}{'?' if i.optional else ''}{' (tests)' if i.in_tests else ''}" for i in ev.imports}
        | {f"local {m}" for m in ev.local_modules}
    )
    parts = {
        "files": files,
        "imports": _digest(json.dumps(imports).encode()),
        "settings": settings_digest(settings),
        "setupbot": __version__,
    }
    digest = _digest(json.dumps(parts, sort_keys=True).encode())
    return {"digest": digest, **parts}


def changed_inputs(old: dict[str, Any] | None, new: dict[str, Any]) -> list[str]:
    """Which inputs differ, in words, for the PR body and the job summary."""
    if not old:
        return ["no earlier record of the inputs"]
    out = []
    of, nf = old.get("files", {}) or {}, new.get("files", {}) or {}
    out += [f"{p} added" for p in sorted(set(nf) - set(of))]
    out += [f"{p} removed" for p in sorted(set(of) - set(nf))]
    out += [f"{p} changed" for p in sorted(set(of) & set(nf)) if of[p] != nf[p]]
    for key, what in (
        ("imports", "the imports in the source"),
        ("settings", "setupbot settings"),
        ("setupbot", "the setupbot version"),
    ):
        if old.get(key) != new.get(key):
            out.append(f"{what} changed")
    return out


@dataclass
class Recorded:
    """The plan JSON as committed."""

    path: str
    data: dict[str, Any]

    @property
    def inputs(self) -> dict[str, Any]:
        return self.data.get("inputs") or {}

    @property
    def verified(self) -> dict[str, Any]:
        return self.data.get("verified") or {}

    @property
    def outputs(self) -> dict[str, str]:
        return self.data.get("outputs") or {}


def parse_recorded(text: str | None, path: str = "") -> Recorded | None:
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or "plan" not in data:
        return None
    return Recorded(path, data)


def read_recorded(repo: Path, output_dir: str) -> Recorded | None:
    rel = f"{check_output_dir(output_dir)}/{PLAN}"
    path = Path(repo) / rel
    if path.is_symlink() or not path.is_file():
        return None
    data = _read(Path(repo), rel)
    return None if data is None else parse_recorded(data.decode("utf-8", errors="replace"), rel)


@dataclass
class Check:
    unchanged: bool
    reason: str
    recorded: Recorded | None = None
    inputs: dict[str, Any] | None = None
    since: str = ""


def check(repo: Path, settings: Any, input_files: InputFiles | None = None) -> Check:
    """Whether ``repo`` holds a recorded environment whose inputs match the checkout's
    (``input_files`` as for ``environment_inputs``: the same as when the record was written)."""
    repo = Path(repo).resolve()
    out = check_output_dir(settings.output.dir)
    inputs = environment_inputs(repo, settings, input_files)
    if not (repo / out).resolve().is_relative_to(repo):
        return Check(False, f"{out} leads outside the repository", None, inputs)
    recorded = read_recorded(repo, out)
    if recorded is None:
        return Check(False, "no recorded plan", None, inputs)
    if recorded.inputs.get("digest") != inputs["digest"]:
        return Check(False, "inputs changed: " + ", ".join(changed_inputs(recorded.inputs, inputs)), recorded, inputs)
    for rel, digest in recorded.outputs.items():
        # the record is repository text: its paths must name files in the output folder
        # (or the one file setupbot writes at the root: the build context's .dockerignore)
        in_out = posixpath.dirname(rel) == out and rel.count("/") == out.count("/") + 1
        if posixpath.normpath(rel) != rel or not (in_out or rel == DOCKERIGNORE):
            return Check(False, f"the recorded plan names an unexpected file {rel!r}", recorded, inputs)
        path = repo / rel
        data = None if path.is_symlink() or not path.is_file() else _read(repo, rel)
        if data is None or _digest(data) != digest:
            return Check(False, f"{rel} differs from the recorded environment", recorded, inputs)
    report = repo / out / REPORT
    if report.is_symlink() or not report.is_file():
        return Check(False, "the setup report is missing", recorded, inputs)
    return Check(True, "environment inputs unchanged", recorded, inputs, since=last_commit(repo, recorded.path))


def last_commit(repo: Path, rel: str) -> str:
    """The commit that last changed ``rel`` (short), or "" outside git. Run with the repository's
    hooks and fsmonitor switched off: only git's own reading of its object store is used."""
    argv = [
        "git",
        "-c",
        "core.fsmonitor=false",
        "-c",
        "core.hooksPath=/dev/null",
        "-C",
        str(repo),
        "log",
        "-1",
        "--format=%h",
        "--",
        rel,
    ]
    env = {k: v for k, v in host_env().items() if not k.startswith("GIT_")}
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, env=env, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def unchanged_note(result: Check) -> str:
    since = result.since or "the recorded plan"
    return f"environment inputs unchanged since {since}"
