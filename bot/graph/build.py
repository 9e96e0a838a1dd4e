"""Evidence -> DepGraph."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from typing import Any

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as PkgReq
from packaging.utils import canonicalize_name

from bot.evidence.imports import REMOVED_STDLIB, is_stdlib
from bot.evidence.model import (
    MAIN,
    TEST,
    Evidence,
    LockFile,
    Project,
    Requirement,
    ScanWarning,
    ServiceRequirement,
    Source,
)
from bot.evidence.requirements import companion_file
from bot.evidence.services import service_clients
from bot.graph.alternatives import choose
from bot.graph.apply import SCM_PRETEND_VERSION, link_runtime
from bot.graph.mapping import Registry, candidates_for, declared_for, import_key, known_distribution, system_table
from bot.graph.model import BUILD_ONLY_ATTR, DEVCONTAINER_SOURCE, WORKDIR, DepGraph, Node

PROJECT = "package:@project"
MEMBER_PREFIX = "package:@member:"
SCM_ENV = {
    "setuptools-scm": ["SETUPTOOLS_SCM_PRETEND_VERSION"],
    "hatch-vcs": ["SETUPTOOLS_SCM_PRETEND_VERSION"],
    "flit-scm": ["SETUPTOOLS_SCM_PRETEND_VERSION"],
    "versioningit": ["SETUPTOOLS_SCM_PRETEND_VERSION"],
    "pdm-scm": ["PDM_BUILD_SCM_VERSION"],
    "pbr": ["PBR_VERSION"],
    "poetry-dynamic-versioning": ["POETRY_DYNAMIC_VERSIONING_BYPASS"],
    "setuptools-git-versioning": ["SETUPTOOLS_SCM_PRETEND_VERSION"],
}
# Debian packages a CI file may name that do not belong in a python:X-slim image
# distributions that only install on Windows or macOS: never in a Linux image
NOT_ON_LINUX = {
    "pywin32",
    "pypiwin32",
    "pywinauto",
    "wmi",
    "comtypes",
    "windows-curses",
    "win10toast",
    "pywinpty",
    "pyobjc",
    "pyobjc-core",
    "pyobjc-framework-cocoa",
    "appnope",
    "pythonnet",
    "winshell",
    "colorama-win",
}
_APT_SKIP = re.compile(
    r"^(mingw-w64.*|wine.*|tox|nox|pipx|pre-commit|python3?(-.*)?|python3\.\d+.*|sudo|software-properties-common|apt-transport-https|lsb-release|curl|wget|gnupg2?|ca-certificates)$"
)


def _ev(src: Source) -> tuple[str, int | None, str]:
    return (src.file, src.line, src.detail)


def install_spec(req_spec: str, pinned: str | None) -> str:
    if not pinned:
        return req_spec
    try:
        r = PkgReq(req_spec)
    except InvalidRequirement:
        return req_spec
    if r.url:
        return req_spec
    extras = f"[{','.join(sorted(r.extras))}]" if r.extras else ""
    marker = f"; {r.marker}" if r.marker else ""
    return f"{r.name}{extras}=={pinned}{marker}"


def build_graph(ev: Evidence, registry: Registry, warnings: list[ScanWarning]) -> DepGraph:
    g = DepGraph()
    g.add(Node("runtime:python", "RUNTIME", "python", "UNKNOWN", action="from", attrs={}))
    target = g.add(Node("target:tests", "TARGET", "collect and run the tests", "UNKNOWN", attrs={}))
    proj = ev.project
    project_name = canonicalize_name(proj.name) if proj.name else None
    lock = ev.locks[0] if ev.locks else None
    if lock:
        _add_lock(g, lock)
    test_extras = _test_extras(ev)
    if proj.installable:
        _add_project(g, proj, test_extras)
    _add_members(g, ev)
    reqs = [r for r in ev.requirements if not r.local and r.name]
    has_pip_manifest = any(r.group != "conda" for r in reqs)
    declared = _add_requirements(g, reqs, test_extras, project_name, lock, has_pip_manifest, warnings)
    _link_declared_packages(g, declared)
    _add_constraints(g, ev)
    local = ev.local_modules | ({project_name.replace("-", "_")} if project_name else set())
    # what the checkout's root holds: a repair that finds setup.py importing one of these puts
    # the checkout on the build's path instead of installing a distribution (bot.graph.apply)
    g.meta["checkout_modules"] = sorted(
        {m for m in ev.root_modules if m.isidentifier()} | ({project_name.replace("-", "_")} if project_name else set())
    )
    _add_imports(g, ev, registry, declared, local, not has_pip_manifest)
    _pkg_resources_guard(g, ev)
    _add_system_libraries(g, ev, reqs, warnings)
    _add_test_tools(g, ev)
    add_services(g, ev.services)
    _add_test_env(g, ev)
    _add_test_paths(g, ev)
    _link_constraints(g)
    _add_target_hints(target, ev, local)
    return g


def _add_lock(g: DepGraph, lock: LockFile) -> None:
    """The lock's pins constrain every pip install, so pip installs what the lock says."""
    g.meta["lock"] = {"kind": lock.kind, "file": lock.file}
    # the lock's pins constrain every pip install, so pip installs what the lock says
    # without poetry/pdm/uv in the image
    ln = g.add(
        Node(
            "config:lock",
            "CONFIG",
            lock.file,
            "SATISFIED",
            action="constraint",
            attrs={
                "kind": "lock",
                "tool": lock.kind,
                "pins": dict(sorted(lock.pins.items())),
                "versions": dict(sorted(lock.versions.items())),
            },
        )
    )
    ln.add_evidence(lock.file, None, f"{len(lock.pins)} pins from the {lock.kind} lock")


def _test_extras(ev: Evidence) -> list[str]:
    """Which of the project's extras the tests need installed."""
    test_extras = []
    for extra, _src in ev.test_extras:
        if extra in ev.project.extras and extra not in test_extras:
            test_extras.append(extra)
    # "dev"-style extras usually bundle docs, linters and release tools: when an extra made for
    # the tests exists, it is enough
    if any("test" in e.lower() for e in test_extras):
        test_extras = [e for e in test_extras if "test" in e.lower()]
    return test_extras


def _add_project(g: DepGraph, proj: Project, test_extras: list[str]) -> None:
    """The project itself, installed editable with its test extras (and a pretend SCM version)."""
    pnode = g.add(
        Node(
            PROJECT,
            "PACKAGE",
            proj.name or "(this project)",
            "UNKNOWN",
            action="project",
            attrs={
                "extras": sorted(test_extras),
                "editable": True,
                "install_with": "pip",
                "manager": proj.manager or "",
                "build_backend": proj.build_backend or "",
            },
        )
    )
    if proj.install_source:
        pnode.add_evidence(*_ev(proj.install_source))
    if proj.self_import and (proj.build_backend or "").strip() == "setuptools.build_meta":
        # setuptools.build_meta (unlike its __legacy__ form) leaves the checkout off sys.path, and
        # pip's isolated build replaces PYTHONPATH: setup.py's import fails before the build starts
        pnode.attrs["self_import"] = True
        pnode.add_evidence(
            proj.self_import.file,
            proj.self_import.line,
            proj.self_import.detail + ", which setuptools.build_meta does not put on sys.path",
        )
    if proj.unread_dependencies:
        # only installing the project with its dependencies gets them all: no lock drawn from
        # what was read may stand in for them (bot.loop.lock.plan_lock_refusal)
        pnode.attrs["unread_dependencies"] = True
        src = proj.unread_dependencies
        pnode.add_evidence(src.file, src.line, f"dependencies {src.detail}, not read statically")
    unisolated = _build_imports_not_required(proj)
    if unisolated:
        # pip's isolated build environment holds only [build-system].requires: setup.py's own
        # import of an installed distribution fails there; the project installs without it
        pnode.attrs["build_imports"] = [module for module, _ in unisolated]
        for _, src in unisolated:
            pnode.add_evidence(
                src.file,
                src.line,
                f"{src.detail}, which pip's isolated build does not have "
                + ("([build-system] does not require it)" if proj.build_requires else "(no [build-system] requires)"),
            )
    link_runtime(g, PROJECT)
    g.edge("target:tests", PROJECT)
    if proj.scm_version:
        _add_scm_env(g, proj, proj.scm_version)


def _build_imports_not_required(proj: Project) -> list[tuple[str, Source]]:
    """setup.py's imports of distributions that [build-system].requires does not list (by
    distribution name, or by the module's known distribution)."""
    required = set()
    for spec in proj.build_requires:
        try:
            required.add(canonicalize_name(PkgReq(spec).name))
        except InvalidRequirement:
            continue
    out = []
    for module, src in proj.build_imports:
        names = {canonicalize_name(module), canonicalize_name(known_distribution(module) or module)}
        if not names & required:
            out.append((module, src))
    return out


def _add_scm_env(g: DepGraph, proj: Project, scm_version: Source) -> None:
    """The environment variables that stand in for the version an SCM plugin reads from .git."""
    for var in SCM_ENV.get(proj.scm_tool or "setuptools-scm", ["SETUPTOOLS_SCM_PRETEND_VERSION"]):
        value = "1" if var.endswith("BYPASS") else SCM_PRETEND_VERSION
        n = g.add(
            Node(
                f"config:env:{var}",
                "CONFIG",
                var,
                "SATISFIED",
                action="env",
                attrs={
                    "kind": "env",
                    "value": value,
                    "why": f"{proj.scm_tool} needs a version and the build context has no .git",
                },
            )
        )
        n.add_evidence(*_ev(scm_version))
        link_runtime(g, n.id)
        g.edge(PROJECT, n.id)


def _add_members(g: DepGraph, ev: Evidence) -> None:
    """Workspace members: installed editable from their folders, in dependency order."""
    for i, m in enumerate(getattr(ev, "members", []) or []):
        mid = f"{MEMBER_PREFIX}{m.path}"
        mn = g.add(
            Node(
                mid,
                "PACKAGE",
                m.name,
                "UNKNOWN",
                action="project",
                attrs={
                    "path": m.path,
                    "extras": list(m.extras),
                    "editable": True,
                    "install_with": "pip",
                    "member": True,
                    "order": i,
                    "requires": list(m.requires),
                    "tests": m.tests,
                    "ci": bool(m.ci),
                },
            )
        )
        mn.add_evidence(*_ev(m.source))
        if m.ci is not None:
            mn.add_evidence(*_ev(m.ci))
        link_runtime(g, mid)
        g.edge("target:tests", mid)
        for dep in m.requires:
            other = next((x for x in ev.members if x.name == dep), None)
            if other is not None:
                g.edge(mid, f"{MEMBER_PREFIX}{other.path}")


def _add_requirements(
    g: DepGraph,
    reqs: list[Requirement],
    test_extras: list[str],
    project_name: str | None,
    lock: LockFile | None,
    has_pip_manifest: bool,
    warnings: list[ScanWarning],
) -> dict[str, Node]:
    """Declared requirements: which are installed, in which group, pinned by the lock or not."""
    installed_groups = {MAIN, TEST} | {f"extra:{e}" for e in test_extras}
    declared: dict[str, Node] = {}
    for r in reqs:
        if project_name and r.name == project_name:
            _add_self_extras(g, r, installed_groups)
            continue
        group = r.group
        install = group in installed_groups or (group == "conda" and not has_pip_manifest)
        if install and r.name in NOT_ON_LINUX and not _has_marker(r.spec):
            warnings.append(
                ScanWarning(r.source.file, r.source.line, f"{r.name} installs only on Windows/macOS; left out")
            )
            install = False
        norm_group = MAIN if group in (MAIN, "conda") else TEST if install else group
        nid = f"package:{r.name}"
        existing = g.nodes.get(nid)
        if existing is not None:
            existing.add_evidence(*_ev(r.source))
            if install and existing.action != "pip":
                existing.action = "pip"
                existing.attrs.update(spec=r.spec, group=norm_group)
            elif install and norm_group == MAIN and existing.attrs.get("group") != MAIN:
                existing.attrs["group"] = MAIN
            continue
        attrs: dict[str, Any] = {"spec": r.spec, "group": norm_group}
        if r.via_file and install:
            attrs["via_file"] = r.via_file
            if r.hashed:
                attrs["via_hashed"] = True
        if lock and r.name in lock.pins and install:
            attrs["pinned"] = lock.pins[r.name]
            attrs["lock"] = lock.file
        n = g.add(Node(nid, "PACKAGE", r.name, "UNKNOWN", action="pip" if install else None, attrs=attrs))
        n.add_evidence(*_ev(r.source))
        declared[r.name] = n
    return declared


def _add_self_extras(g: DepGraph, r: Requirement, installed_groups: set[str]) -> None:
    """A self-reference (test = ["pkg[all]"]) names extras of the project itself."""
    try:
        extras = PkgReq(r.spec).extras
    except InvalidRequirement:
        extras = set()
    if PROJECT in g.nodes and extras and r.group in installed_groups:
        g.nodes[PROJECT].attrs["extras"] = sorted(set(g.nodes[PROJECT].attrs["extras"]) | extras)


def _has_marker(spec: str) -> bool:
    """Whether a requirement carries an environment marker (an unparsable one has none)."""
    try:
        marker = PkgReq(spec).marker
    except InvalidRequirement:
        marker = None
    return marker is not None


def _link_declared_packages(g: DepGraph, declared: dict[str, Node]) -> None:
    """Installed packages hang off the runtime and the project; every package counts as declared."""
    for nid, n in list(g.nodes.items()):
        if n.type == "PACKAGE" and n.action == "pip":
            link_runtime(g, nid)
            if PROJECT in g.nodes:
                g.edge(PROJECT, nid)
        if n.type == "PACKAGE" and nid != PROJECT:
            declared.setdefault(n.name, n)


def _add_constraints(g: DepGraph, ev: Evidence) -> None:
    """The repository's pip constraints, as constraint nodes."""
    for c in ev.constraints:
        n = g.add(
            Node(
                f"config:constraint:{c.spec}",
                "CONFIG",
                c.spec,
                "SATISFIED",
                action="constraint",
                attrs={"kind": "pip_constraint", "spec": c.spec},
            )
        )
        n.add_evidence(*_ev(c.source))


# setuptools 81 no longer ships pkg_resources: code that imports it needs an older setuptools
PKG_RESOURCES_LAST = "setuptools<81"


def _pkg_resources_guard(g: DepGraph, ev: Evidence) -> None:
    """An installed import of ``pkg_resources`` constrains setuptools below the release that
    dropped it, unless the project itself (its dependencies or its build) asks for that release."""
    inode = g.nodes.get("import:pkg_resources")
    pn = g.nodes.get("package:setuptools")
    if inode is None or pn is None or not pn.action or f"config:constraint:{PKG_RESOURCES_LAST}" in g.nodes:
        return
    wanted = [str(pn.attrs.get("spec") or "")] + list(ev.project.build_requires) + [c.spec for c in ev.constraints]
    for spec in wanted:
        try:
            req = PkgReq(spec)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == "setuptools" and not req.specifier.contains("80.9.0", prereleases=True):
            return
    n = g.add(
        Node(
            f"config:constraint:{PKG_RESOURCES_LAST}",
            "CONFIG",
            PKG_RESOURCES_LAST,
            "SATISFIED",
            action="constraint",
            attrs={"kind": "pip_constraint", "spec": PKG_RESOURCES_LAST},
        )
    )
    src = inode.evidence[0] if inode.evidence else (".", None, "")
    n.add_evidence(src[0], src[1], "import pkg_resources, which setuptools 81 no longer ships")


def _add_imports(
    g: DepGraph, ev: Evidence, registry: Registry, declared: dict[str, Node], local: set[str], no_manifest: bool
) -> None:
    """Third-party imports: mapped to a declared package, or to a distribution the plan adds."""
    by_module: dict[str, list] = {}
    for use in ev.imports:
        if is_stdlib(use.module) or use.module in local:
            continue
        by_module.setdefault(import_key(use.full or use.module), []).append(use)
    declared_names = {name: n.attrs.get("spec", name) for name, n in declared.items()}
    matrix = {posixpath.normpath(path.strip()) for path, _src in ev.matrix_files}
    for module in sorted(by_module):
        uses = by_module[module]
        required_in_tests = any(u.in_tests and not u.optional for u in uses)
        inode = g.add(
            Node(
                f"import:{module}",
                "IMPORT",
                module,
                "UNKNOWN",
                attrs={"optional": all(u.optional for u in uses), "in_tests_only": all(u.in_tests for u in uses)},
            )
        )
        for u in uses[:5]:
            inode.add_evidence(*_ev(u.source))
        if len(uses) > 5:
            inode.attrs["uses"] = len(uses)
        dist = declared_for(module, declared_names)
        if dist:
            _map_to_declared(g, inode, declared[dist], required_in_tests, matrix)
            continue
        # without any manifest the imports are all there is to go on (optional ones stay out:
        # the code runs without them); with one, only what the tests import unconditionally
        want = required_in_tests or (no_manifest and any(not u.optional for u in uses))
        _map_to_distribution(g, inode, module, want, registry, no_manifest)


def _map_to_declared(g: DepGraph, inode: Node, pn: Node, required_in_tests: bool, matrix: set[str]) -> None:
    """An import a declared package provides; promoted to installed when the tests need it."""
    g.edge(inode.id, pn.id, "mapping")
    if pn.action is None and required_in_tests:
        # declared only in a non-test extra, but the tests import it unconditionally
        _promote_to_test(g, pn, "imported by tests")
        _promote_companions(g, pn, matrix)
    inode.state = "SATISFIED" if pn.action else "UNKNOWN"


def _promote_to_test(g: DepGraph, pn: Node, why: str) -> None:
    """A declared package that was not to be installed becomes a test dependency."""
    pn.action = "pip"
    pn.attrs["promoted"] = why
    # declared in an extra of the project's own: its range is the project's word on what
    # works (regions: plot = ["matplotlib>=3.5"]) and stays. Declared only in a file that is
    # not installed (often one cell of a version matrix): keep the name and extras, and let
    # the resolver pick the version
    try:
        r0 = PkgReq(pn.attrs.get("spec", pn.name))
    except InvalidRequirement:
        r0 = None
    exact = r0 is not None and any(s.operator in ("==", "===") for s in r0.specifier)
    if r0 is not None and (exact or not str(pn.attrs.get("group", "")).startswith("extra:")):
        # an exact pin in an extra is an environment's too (an "oldest" extra)
        pn.attrs["spec"] = r0.name + (f"[{','.join(sorted(r0.extras))}]" if r0.extras else "")
    pn.attrs["group"] = TEST
    link_runtime(g, pn.id)
    if PROJECT in g.nodes:
        g.edge(PROJECT, pn.id)


def _promote_companions(g: DepGraph, pn: Node, matrix: set[str]) -> None:
    """A package the tests import, declared only in requirement files that one factor of a
    tox test environment installs (one cell of a version matrix: sanic-latest: -r
    requirements/sanic-latest.txt), brings the other lines of those files with it: the
    repository installs them together to run those tests, and what nothing imports there is
    what the tests need beside it (sanic-testing, which sanic's test client loads). A file no
    test environment names (a benchmark's comparison set) or one named for documentation,
    linting or examples brings nothing."""
    files = {f for f, _line, detail in pn.evidence if detail == "requirements" and f in matrix and companion_file(f)}
    if not files:
        return
    for other in g.of_type("PACKAGE"):
        if other.action is not None or other.attrs.get("group") != "other" or other is pn:
            continue
        if any(f in files and detail == "requirements" for f, _line, detail in other.evidence):
            _promote_to_test(g, other, f"listed beside {pn.name}, which the tests import")


def _choose_distribution(inode: Node, module: str, want: bool, registry: Registry) -> str | None:
    """The distribution an undeclared import most likely comes from (the table, else the registry)."""
    cands = candidates_for(module)
    chosen = None
    in_table = known_distribution(module) is not None
    if in_table:
        chosen = cands[0]
    elif want:
        for cand in cands[:2]:
            exists = registry.exists(cand)
            if exists:
                chosen = cand
                break
            if exists is None:
                inode.attrs["registry"] = "unknown (offline or not checked)"
                break
        else:
            inode.state = "MISSING"
            inode.attrs["registry"] = "no distribution found"
    if chosen is None:
        inode.attrs["candidate"] = canonicalize_name(cands[0])
    return chosen


def _map_to_distribution(
    g: DepGraph, inode: Node, module: str, want: bool, registry: Registry, no_manifest: bool
) -> None:
    """An undeclared import: the package node it maps to, installed when the tests need it."""
    chosen = _choose_distribution(inode, module, want, registry)
    if chosen is None:
        return
    name = canonicalize_name(chosen)
    if name in NOT_ON_LINUX:
        inode.attrs["platform"] = "not installable on Linux"
        return
    nid = f"package:{name}"
    pn = g.nodes.get(nid) or g.add(
        Node(
            nid,
            "PACKAGE",
            name,
            "UNKNOWN",
            action="pip" if want else None,
            attrs={"spec": chosen, "group": TEST if not no_manifest else MAIN, "source": "import"},
        )
    )
    pn.add_evidence(inode.evidence[0][0], inode.evidence[0][1], f"import {module}")
    if want and pn.action is None:
        pn.action = "pip"
    if pn.action:
        link_runtime(g, nid)
        if PROJECT in g.nodes:
            g.edge(PROJECT, nid)
    g.edge(inode.id, nid, "mapping")
    inode.state = "SATISFIED" if pn.action else "UNKNOWN"


def _add_system_libraries(g: DepGraph, ev: Evidence, reqs: list[Requirement], warnings: list[ScanWarning]) -> None:
    """Debian packages: those the packages need, those CI installs, git, the dev user, a compiler."""
    compile_reasons: list[tuple[str, int | None, str]] = []
    if ev.project.c_extensions:
        compile_reasons.append(_ev(ev.project.c_extensions))
        if PROJECT in g.nodes:
            g.nodes[PROJECT].attrs["compiles"] = True
    _add_table_apt(g, compile_reasons)
    _add_declared_apt(g, ev.apt_packages, compile_reasons)
    _docs_apt(g, ev, compile_reasons, warnings)
    _drop_apt_conflicts(g, ev, warnings)
    if any(r.spec.split("@", 1)[-1].strip().startswith("git+") for r in reqs if "@" in r.spec):
        s = g.add(Node("systemlib:git", "SYSTEMLIB", "git", "SATISFIED", action="apt"))
        s.add_evidence("requirements", None, "a dependency is installed from a git URL")
        link_runtime(g, s.id)
    # the devcontainer people expect has git (issue 16); a dependency from a git URL needs it too
    git = g.add(Node("systemlib:git", "SYSTEMLIB", "git", "SATISFIED", action="apt"))
    git.add_evidence(DEVCONTAINER_SOURCE, None, "git in the development container")
    link_runtime(g, git.id)
    # the non-root user the devcontainer attaches as (remoteUser); the tests still run as root
    user = g.add(Node("config:dev-user", "CONFIG", "dev", "SATISFIED", action="user", attrs={"kind": "user"}))
    user.add_evidence(DEVCONTAINER_SOURCE, None, "devcontainer remoteUser")
    link_runtime(g, user.id)
    if compile_reasons:
        be = g.add(Node("systemlib:build-essential", "SYSTEMLIB", "build-essential", "SATISFIED", action="apt"))
        for e in compile_reasons[:5]:
            be.add_evidence(*e)
        link_runtime(g, be.id)
        for n in g.of_type("PACKAGE"):
            if n.action in ("pip", "project"):
                g.edge(n.id, be.id)
    if PROJECT in g.nodes:
        for s in g.of_type("SYSTEMLIB"):
            g.edge(PROJECT, s.id)


def _add_table_apt(g: DepGraph, compile_reasons: list[tuple[str, int | None, str]]) -> None:
    """The Debian packages the system table says an installed package needs (and which compile)."""
    table = system_table()
    for n in list(g.of_type("PACKAGE")):
        if n.action != "pip":
            continue
        info = table.get(n.name)
        if not info:
            continue
        # "build": only a source build of this distribution needs it, and a lock whose every
        # distribution installs from a wheel leaves it out (bot.loop.lock), as it does the
        # compilers; "apt": it is needed to run, whichever distribution named it first
        listed = [(deb, False) for deb in info.get("apt", [])] + [(deb, True) for deb in info.get("build", [])]
        for deb, build_only in listed:
            known = f"systemlib:{deb}" in g.nodes
            s = g.add(Node(f"systemlib:{deb}", "SYSTEMLIB", deb, "SATISFIED", action="apt"))
            why = f"{n.name} builds from source with {deb}" if build_only else f"{n.name} needs {deb}"
            s.add_evidence("bot/graph/data/system_packages.json", None, why)
            if not build_only:
                s.attrs.pop(BUILD_ONLY_ATTR, None)
            elif not known:
                s.attrs[BUILD_ONLY_ATTR] = True
            link_runtime(g, s.id)
            g.edge(n.id, s.id)
        if info.get("compile"):
            compile_reasons.append(("bot/graph/data/system_packages.json", None, f"{n.name} builds from source"))
            n.attrs["compiles"] = True


def _add_declared_apt(
    g: DepGraph, packages: list[tuple[str, Source]], compile_reasons: list[tuple[str, int | None, str]], why: str = ""
) -> None:
    """The Debian packages the repository's CI installs, minus those a slim image must not get."""
    for deb, src in packages:
        if _APT_SKIP.match(deb):
            continue
        s = g.add(Node(f"systemlib:{deb}", "SYSTEMLIB", deb, "SATISFIED", action="apt"))
        s.add_evidence(src.file, src.line, src.detail + why)
        s.attrs.pop(BUILD_ONLY_ATTR, None)  # the repository installs it: not ours to leave out
        link_runtime(g, s.id)
        if deb.endswith("-dev") or deb in ("build-essential", "gcc", "g++"):
            compile_reasons.append((src.file, src.line, f"{deb} is a build dependency"))


def _docs_apt(
    g: DepGraph, ev: Evidence, compile_reasons: list[tuple[str, int | None, str]], warnings: list[ScanWarning]
) -> None:
    """The Debian packages a README or docs page installs. When the project compiles, its docs
    name what its build needs, and they are installed; otherwise they serve another use of the
    project (keyring's README installs gnome-keyring to use it on a desktop) and are left out,
    with a warning: a test that needs one fails with a cause the loop repairs."""
    if not ev.project.c_extensions:
        left = [(deb, src) for deb, src in ev.docs_apt_packages if not _APT_SKIP.match(deb)]
        left = [(deb, src) for deb, src in left if f"systemlib:{deb}" not in g.nodes]
        for deb, src in left:
            warnings.append(
                ScanWarning(src.file, src.line, f"{deb} is installed by the documentation, not by CI; left out")
            )
        return
    _add_declared_apt(g, ev.docs_apt_packages, compile_reasons, " (the project compiles; its documentation names it)")


def _drop_apt_conflicts(g: DepGraph, ev: Evidence, warnings: list[ScanWarning]) -> None:
    """Alternatives apt refuses to install together: keep one (the repository's own choice first)."""
    apts = [n.name for n in g.of_type("SYSTEMLIB") if n.action == "apt"]
    declared_apt = [deb for deb, _ in ev.apt_packages]
    for deb, keep in sorted(choose(apts, declared_apt).items()):
        n = g.nodes[f"systemlib:{deb}"]
        n.action, n.state = None, "UNKNOWN"
        n.attrs["excluded"] = f"conflicts with {keep}, which the plan keeps"
        warnings.append(
            ScanWarning(
                n.evidence[0][0] if n.evidence else "",
                None,
                f"{deb} and {keep} cannot be installed together; kept {keep}",
            )
        )


def _add_test_tools(g: DepGraph, ev: Evidence) -> None:
    """pytest and its plugins, unless the project already installs them."""
    pytest_node = g.add(Node("tool:pytest", "TOOL", "pytest", "SATISFIED", action="tool", attrs={"spec": "pytest"}))
    pytest_node.add_evidence(
        *(_ev(ev.pytest_config) if ev.pytest_config else ("setupbot", None, "collection runs pytest"))
    )
    for dist, src in ev.pytest_plugins:
        if not dist:
            continue
        name = canonicalize_name(dist)
        provider = g.nodes.get(f"package:{name}")
        if provider is not None and provider.action == "pip":
            provider.add_evidence(*_ev(src))
            continue
        t = g.add(Node(f"tool:{name}", "TOOL", name, "SATISFIED", action="tool", attrs={"spec": name}))
        t.add_evidence(*_ev(src))
    _add_django_settings(g, ev)
    for t in g.of_type("TOOL"):
        provider = g.nodes.get(f"package:{t.name}")
        if provider is not None and provider.action == "pip":
            # the project already installs it (with its own pin): nothing to add
            t.action = None
            t.attrs["provided_by"] = provider.id
            g.edge(t.id, provider.id, "mapping")
        link_runtime(g, t.id)
        g.edge("target:tests", t.id)
        if PROJECT in g.nodes:
            g.edge(t.id, PROJECT)
        for n in g.of_type("PACKAGE"):
            if n.action == "pip":
                g.edge(t.id, n.id)


def _add_django_settings(g: DepGraph, ev: Evidence) -> None:
    """A Django project whose tests import Django and whose own runner names the settings module,
    without pytest-django (``ev.django_settings``, bot.evidence.django): pytest imports those test modules only once
    pytest-django has set Django up with that module. The plan gives the collection both; the
    variable is for the tests alone, so the Dockerfile sets it after the install steps. The
    runner's own run is unchanged: it sets the same module itself."""
    if ev.django_settings is None:
        return
    module, src = ev.django_settings
    why = f"{src.short()} {src.detail}; pytest collects Django tests only through pytest-django"
    tool = g.add(
        Node("tool:pytest-django", "TOOL", "pytest-django", "SATISFIED", action="tool", attrs={"spec": "pytest-django"})
    )
    tool.add_evidence(src.file, src.line, why)
    env = g.add(
        Node(
            "config:env:DJANGO_SETTINGS_MODULE",
            "CONFIG",
            "DJANGO_SETTINGS_MODULE",
            "SATISFIED",
            action="env",
            attrs={"kind": "env", "value": module, "for_tests": True, "why": why},
        )
    )
    env.add_evidence(src.file, src.line, src.detail)
    link_runtime(g, env.id)
    g.edge("target:tests", env.id)


def add_services(g: DepGraph, services: Iterable[ServiceRequirement]) -> None:
    """The services the tests need, one per kind (every ecosystem's graph adds them this way)."""
    seen_kinds: set[str] = set()
    for svc in services:
        key = svc.kind if svc.kind != "other" else svc.name
        if key in seen_kinds:
            continue
        seen_kinds.add(key)
        s = g.add(
            Node(
                f"service:{key}",
                "SERVICE",
                svc.name,
                "UNKNOWN",
                action="service",
                attrs={"kind": svc.kind, "image": svc.image, "ports": list(svc.ports), "env": dict(svc.env)},
            )
        )
        for svc_src in svc.evidence:
            s.add_evidence(*_ev(svc_src))
        g.edge("target:tests", s.id)


def _add_test_env(g: DepGraph, ev: Evidence) -> None:
    """The environment variables the tests run with."""
    for env_name, (value, env_src) in sorted(ev.env.items()):
        n = g.add(
            Node(
                f"config:testenv:{env_name}",
                "CONFIG",
                env_name,
                "SATISFIED",
                attrs={"kind": "test-env", "value": value},
            )
        )
        n.add_evidence(*_ev(env_src))
        g.edge("target:tests", n.id)


def _add_test_paths(g: DepGraph, ev: Evidence) -> None:
    """Package folders whose tests import a module beside them by its bare name go on
    PYTHONPATH (relative to the checkout; bot.compile renders the image's paths)."""
    if not ev.test_paths:
        return
    folders = sorted(ev.test_paths)
    n = g.add(
        Node(
            "config:env:PYTHONPATH",
            "CONFIG",
            "PYTHONPATH",
            "SATISFIED",
            action="env",
            attrs={
                "kind": "env",
                "value": ":".join(f"{WORKDIR}/{folder}" for folder in folders),
                "why": "test modules import "
                + ", ".join(sorted({ev.test_paths[f].detail for f in folders}))
                + " from beside them by bare name, and "
                + ", ".join(f"{f}/" for f in folders)
                + (" is a package" if len(folders) == 1 else " are packages")
                + ", which pytest does not put on sys.path",
            },
        )
    )
    for folder in folders:
        src = ev.test_paths[folder]
        n.add_evidence(src.file, src.line, f"imports {src.detail}, which is {folder}/{src.detail}")
    link_runtime(g, n.id)
    g.edge("target:tests", n.id)


def _link_constraints(g: DepGraph) -> None:
    """Every install step depends on every constraint (lock or pip constraint)."""
    for n in g.of_type("CONFIG"):
        if n.action == "constraint":
            for p in list(g.nodes.values()):
                if p.action in ("pip", "project", "tool"):
                    g.edge(p.id, n.id)


def _add_target_hints(target: Node, ev: Evidence, local: set[str]) -> None:
    """Hints on the test target: the services the client libraries talk to, removed stdlib imports."""
    clients = service_clients(ev)
    if clients:
        # a hint, never a service started on its own: which kinds the code's client libraries
        # talk to (bot/catalogue.py), so a refused connection can be read against it
        target.attrs["service_clients"] = {k: sorted({u.module for u in uses}) for k, uses in sorted(clients.items())}
    target.attrs["removed_stdlib"] = sorted(
        {u.module for u in ev.imports if u.module in REMOVED_STDLIB and not u.optional and u.module not in local}
    )
