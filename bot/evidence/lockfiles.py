"""Lock files: poetry.lock, pdm.lock, uv.lock, Pipfile.lock. Their pins are preferred over
ranges when the compiled Dockerfile installs the direct dependencies."""

from __future__ import annotations

import json

from packaging.utils import canonicalize_name

from bot.evidence.files import RepoFiles, line_of, load_toml
from bot.evidence.model import Evidence, LockFile, PythonConstraint, Source
from bot.evidence.reqparse import poetry_constraint


def scan(files: RepoFiles, ev: Evidence) -> None:
    for rel, kind in (("poetry.lock", "poetry"), ("pdm.lock", "pdm"), ("uv.lock", "uv")):
        loaded = load_toml(files, rel, ev, "lock file")
        if loaded is None:
            continue
        text, data = loaded
        lock = LockFile(kind, rel)
        versions: dict[str, set[str]] = {}
        for pkg in data.get("package") or []:
            if isinstance(pkg, dict) and isinstance(pkg.get("name"), str) and isinstance(pkg.get("version"), str):
                versions.setdefault(canonicalize_name(pkg["name"]), set()).add(pkg["version"])
        lock.versions = {name: sorted(v) for name, v in sorted(versions.items())}
        for pkg in data.get("package") or []:
            if isinstance(pkg, dict) and isinstance(pkg.get("name"), str) and isinstance(pkg.get("version"), str):
                source = pkg.get("source")
                if kind == "uv" and isinstance(source, dict) and ("editable" in source or "virtual" in source):
                    continue  # the project itself
                # several versions locked for different Pythons: let pip pick within the range
                if len(versions[canonicalize_name(pkg["name"])]) == 1:
                    lock.pins.setdefault(canonicalize_name(pkg["name"]), pkg["version"])
        meta = data.get("metadata") or {}
        py = None
        if kind == "poetry" and isinstance(meta.get("python-versions"), str):
            py = poetry_constraint(meta["python-versions"])
        elif kind == "uv" and isinstance(data.get("requires-python"), str):
            py = data["requires-python"]
        elif kind == "pdm":
            py = meta.get("requires_python")
            targets = meta.get("targets")
            if not py and isinstance(targets, list) and targets and isinstance(targets[0], dict):
                py = targets[0].get("requires_python")
        if isinstance(py, str) and py.strip():
            lock.python = py
            ev.python.append(
                PythonConstraint("requires", py, Source(rel, line_of(text, "python"), f"{kind} lock python"))
            )
        ev.locks.append(lock)
    pipfile_lock = files.read_text("Pipfile.lock")
    if pipfile_lock is not None:
        try:
            data = json.loads(pipfile_lock)
        except json.JSONDecodeError as exc:
            ev.warn("Pipfile.lock", exc.lineno, f"malformed JSON: {exc.msg}; ignored")
            return
        lock = LockFile("pipenv", "Pipfile.lock")
        for section in ("default", "develop"):
            for name, info in (data.get(section) or {}).items():
                v = info.get("version") if isinstance(info, dict) else None
                if isinstance(v, str) and v.startswith("=="):
                    lock.pins.setdefault(canonicalize_name(name), v[2:])
                    lock.versions.setdefault(canonicalize_name(name), [])
                    if v[2:] not in lock.versions[canonicalize_name(name)]:
                        lock.versions[canonicalize_name(name)].append(v[2:])
        ev.locks.append(lock)
