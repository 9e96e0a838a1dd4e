"""Workspaces and monorepos: several Python packages in one repository.

Detected from the root ``pyproject.toml``: a uv workspace (``[tool.uv.workspace] members``),
path dependencies on folders of the repository (Poetry ``{path = ...}``, uv
``[tool.uv.sources] x = {workspace = true}`` or ``{path = ...}``, PDM/Hatch ``name @ file:...``
lines), or ``libs/*`` / ``packages/*`` folders that each hold a ``pyproject.toml`` beside a root
that is not itself a buildable package. The CI workflows say which members are tested, and how
(``working-directory``, ``--package``, a matrix over members).

Each member's own dependencies become requirements (evidence: the member's pyproject.toml);
a dependency on another member is local (installed from its folder, never looked up on an
index). A root that only holds tooling or workspace configuration is not installed.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

from packaging.utils import canonicalize_name

from bot.evidence.files import RepoFiles, as_table, line_of
from bot.evidence.model import MAIN, TEST, Evidence, Source
from bot.evidence.reqparse import poetry_constraint

MEMBER_DIRS = ("libs", "packages", "lib", "projects", "src/packages")


@dataclass
class Member:
    path: str  # folder, relative to the root
    name: str  # canonical distribution name
    source: Source
    requires: list[str] = field(default_factory=list)  # other members it depends on
    extras: list[str] = field(default_factory=list)  # its test extras
    tests: str | None = None  # its test folder, relative to the root
    ci: Source | None = None  # where CI tests it, if a workflow names it

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "name": self.name,
            "requires": self.requires,
            "extras": self.extras,
            "tests": self.tests,
            "ci": self.ci.to_json() if self.ci else None,
        }


def scan(files: RepoFiles, ev: Evidence) -> None:
    root = _toml(files, "pyproject.toml")
    data = root[1] if root else {}
    text = root[0] if root else ""
    tool = as_table(data.get("tool"))
    uv = as_table(tool.get("uv"))
    candidates: dict[str, Source] = {}
    how = ""
    workspace = uv.get("workspace")
    if isinstance(workspace, dict):
        how = "uv workspace"
        excluded = [str(x) for x in _list(workspace.get("exclude")) if isinstance(x, str)]
        for pattern in _list(workspace.get("members")):
            if not isinstance(pattern, str):
                continue
            for folder in _glob_dirs(files, pattern):
                if not any(fnmatch.fnmatch(folder, x) for x in excluded):
                    candidates[folder] = Source("pyproject.toml", line_of(text, pattern), "tool.uv.workspace members")
    for folder, src in _path_dependencies(data, text).items():
        candidates.setdefault(folder, src)
        how = how or "path dependencies"
    buildable = isinstance(data.get("build-system"), dict) or (
        isinstance(data.get("project"), dict) and not isinstance(workspace, dict) and uv.get("package") is not False
    )
    if not candidates and not buildable:
        for top in MEMBER_DIRS:
            for folder in _glob_dirs(files, f"{top}/*"):
                candidates[folder] = Source(f"{folder}/pyproject.toml", None, f"{top}/* folder with a pyproject.toml")
        how = "member folders" if candidates else ""
    members = []
    for folder in sorted(candidates):
        member = _member(files, ev, folder, candidates[folder])
        if member is not None:
            members.append(member)
    if not members:
        return
    ev.workspace = how
    names = {m.name for m in members}
    for m in members:
        m.requires = sorted(n for n in m.requires if n in names)
    ev.members = _dependency_order(members)
    # a dependency on a member is installed from its folder: local, never resolved on an index
    for r in ev.requirements:
        if r.name in names:
            r.local = True
    if not buildable or isinstance(workspace, dict) and not isinstance(data.get("build-system"), dict):
        # the root only holds workspace or tooling configuration: not a package to install
        ev.project.installable = False
    else:
        ev.root_tests = _root_tests(files)
    _ci_members(files, ev)


def _root_tests(files: RepoFiles) -> Source | None:
    """The root package's own test folder (a workspace whose root is a package too, like an SDK
    with its examples as members): its tests are the project's, and run beside the members'."""
    for sub in ("tests", "test"):
        if any(f.startswith(f"{sub}/") for f in files.all_files()):
            return Source(f"{sub}/", None, "the root package's tests")
    return None


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _toml(files: RepoFiles, rel: str) -> tuple[str, dict] | None:
    text = files.read_text(rel)
    if text is None:
        return None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None


def _glob_dirs(files: RepoFiles, pattern: str) -> list[str]:
    pattern = pattern.strip().strip("/")
    if not pattern or pattern.startswith("..") or pattern.startswith("/"):
        return []
    found = set()
    for rel in files.all_files():
        if rel.endswith("/pyproject.toml"):
            folder = rel[: -len("/pyproject.toml")]
            if fnmatch.fnmatchcase(folder, pattern) and folder.count("/") == pattern.count("/"):
                found.add(folder)
    return sorted(found)


_FILE_DEP = re.compile(r"^\s*([A-Za-z0-9][\w.\-]*)\s*@\s*(?:file:(?://)?)?(?:\$\{PROJECT_ROOT\}/|\{root:uri\}/)?(\S+)")


_BARE_FILE = re.compile(r"^file:(?://)?/?\$\{PROJECT_ROOT\}/([^#\s]+)")


def _path_dependencies(data: dict, text: str) -> dict[str, Source]:
    """Folders of the repository that the root names as path dependencies."""
    out: dict[str, Source] = {}

    def add(path: Any, detail: str) -> None:
        if isinstance(path, str):
            folder = path.strip().strip("/").removeprefix("./")
            if folder and folder not in (".",) and not folder.startswith("..") and not folder.startswith("/"):
                out[folder] = Source("pyproject.toml", line_of(text, path), detail)

    tool = as_table(data.get("tool"))
    poetry = as_table(tool.get("poetry"))
    tables = [poetry.get("dependencies"), poetry.get("dev-dependencies")]
    for group in as_table(poetry.get("group")).values():
        if isinstance(group, dict):
            tables.append(group.get("dependencies"))
    for table in tables:
        if isinstance(table, dict):
            for name, spec in table.items():
                if isinstance(spec, dict) and "path" in spec:
                    add(spec["path"], f"poetry path dependency {name}")
    uv = as_table(tool.get("uv"))
    sources = as_table(uv.get("sources"))
    for name, spec in sources.items():
        if isinstance(spec, dict) and "path" in spec:
            add(spec["path"], f"tool.uv.sources {name}")
    lines: list[str] = []
    project = as_table(data.get("project"))
    for value in [
        project.get("dependencies"),
        *as_table(project.get("optional-dependencies")).values(),
        *as_table(data.get("dependency-groups")).values(),
        *as_table(as_table(tool.get("pdm")).get("dev-dependencies")).values(),
    ]:
        if isinstance(value, list):
            lines += [v for v in value if isinstance(v, str)]
    for line in lines:
        line = line.strip().removeprefix("-e ").strip()
        m = _FILE_DEP.match(line)
        if m and not re.match(r"^[a-z+]+://", m.group(2)):
            add(m.group(2), f"path dependency {m.group(1)}")
            continue
        m = _BARE_FILE.match(line)  # PDM's "-e file:///${PROJECT_ROOT}/packages/x#egg=x"
        if m:
            add(m.group(1), "editable path dependency")
    return out


def _member(files: RepoFiles, ev: Evidence, folder: str, found: Source) -> Member | None:
    rel = f"{folder}/pyproject.toml"
    loaded = _toml(files, rel)
    if loaded is None:
        return None
    text, data = loaded
    project = as_table(data.get("project"))
    poetry = as_table(as_table(data.get("tool")).get("poetry"))
    name = project.get("name") or poetry.get("name")
    if not isinstance(name, str) or not name.strip():
        ev.warn(rel, None, "workspace member without a project name; not installed")
        return None
    member = Member(folder, canonicalize_name(name), Source(rel, line_of(text, "name"), found.detail))
    if not isinstance(data.get("build-system"), dict) and not poetry:
        ev.warn(rel, None, f"workspace member {name} has no [build-system]; installed with setuptools' defaults")

    def add(spec: Any, group: str, detail: str) -> None:
        if isinstance(spec, str):
            req = ev.add_requirement(spec, group, Source(rel, line_of(text, spec), f"{folder}: {detail}"))
            if req is not None:
                member.requires.append(req.name)

    for dep in _list(project.get("dependencies")):
        add(dep, MAIN, "project.dependencies")
    for extra, deps in sorted(as_table(project.get("optional-dependencies")).items()):
        if str(extra).lower() in ("test", "tests", "testing"):
            member.extras.append(extra)
            for dep in _list(deps):
                add(dep, TEST, f"optional-dependencies.{extra}")
    for group, deps in sorted(as_table(data.get("dependency-groups")).items()):
        if str(group).lower() in ("test", "tests", "testing", "dev"):
            for dep in _list(deps):
                add(dep, TEST, f"dependency-groups.{group}")
    for name_, spec in as_table(poetry.get("dependencies")).items():
        if name_.lower() == "python":
            continue
        if isinstance(spec, dict) and "path" in spec:
            member.requires.append(canonicalize_name(name_))
        elif isinstance(spec, str):
            add(f"{name_}{poetry_constraint(spec)}", MAIN, "tool.poetry.dependencies")
    for sub in ("tests", "test"):
        if any(f.startswith(f"{folder}/{sub}/") for f in files.all_files()):
            member.tests = f"{folder}/{sub}"
            break
    return member


def _dependency_order(members: list[Member]) -> list[Member]:
    """Members after the members they depend on (a cycle keeps the remaining order)."""
    by_name = {m.name: m for m in members}
    done: list[Member] = []
    seen: set[str] = set()

    def visit(m: Member, stack: set[str]) -> None:
        if m.name in seen or m.name in stack:
            return
        for dep in m.requires:
            if dep in by_name:
                visit(by_name[dep], stack | {m.name})
        seen.add(m.name)
        done.append(m)

    for m in members:
        visit(m, set())
    return done


def _ci_members(files: RepoFiles, ev: Evidence) -> None:
    """Which members the CI workflows test: a ``working-directory`` or a path naming the
    member's folder, ``--package <name>`` or a matrix value naming it."""
    for rel in files.all_files():
        if not (rel.startswith(".github/workflows/") and rel.endswith((".yml", ".yaml"))):
            continue
        text = files.read_text(rel)
        if text is None:
            continue
        per_member = "matrix." in text and ("--package" in text or "working-directory" in text)
        for m in ev.members:
            if per_member and m.ci is None:
                # a matrix over members: the member's name is one of the matrix values
                for i, line in enumerate(text.splitlines(), 1):
                    if re.search(rf"(?<![\w-]){re.escape(m.name)}(?![\w-])", line):
                        m.ci = Source(rel, i, f"CI matrix tests {m.name}")
                        break
            for needle in (
                f"working-directory: {m.path}",
                f"working-directory: ./{m.path}",
                f"--package {m.name}",
                f"--package={m.name}",
                f"{m.path}/",
                m.path,
            ):
                at = line_of(text, needle) if m.ci is None else None
                if at:
                    m.ci = Source(rel, at, f"CI tests {m.path}")
                    break
