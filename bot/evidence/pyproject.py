"""pyproject.toml: PEP 621, PEP 735 dependency groups, poetry, pdm, hatch, uv, flit, the build
system, dynamic versions, and the pytest section."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bot.evidence import pytest_config
from bot.evidence import requirements as reqmod
from bot.evidence import tox as toxmod
from bot.evidence.files import RepoFiles, as_table, line_of, load_toml
from bot.evidence.model import MAIN, TEST, Evidence, PythonConstraint, Source
from bot.evidence.reqparse import poetry_constraint, poetry_markers

SCM_BUILD_TOOLS = {
    "setuptools-scm": "setuptools-scm",
    "setuptools_scm": "setuptools-scm",
    "hatch-vcs": "hatch-vcs",
    "versioningit": "versioningit",
    "flit-scm": "flit-scm",
    "setuptools-git-versioning": "setuptools-git-versioning",
    "poetry-dynamic-versioning": "poetry-dynamic-versioning",
    "dunamai": "dunamai",
    "pbr": "pbr",
    "setuptools-git-version": "setuptools-git-version",
    "vcversioner": "vcversioner",
}
COMPILE_BUILD_TOOLS = (
    "cython",
    "pybind11",
    "scikit-build",
    "scikit-build-core",
    "meson-python",
    "cffi",
    "maturin",
    "setuptools-rust",
    "nanobind",
    "numpy",
    "extension-helpers",
    "cmake",
    "ninja",
    "mypyc",
)
_TEST_WORDS = re.compile(r"(^|[-_.])(test|tests|testing|pytest|dev|develop|development|ci|check)([-_.]|$)")


def is_test_group(name: str) -> bool:
    n = name.lower()
    return bool(_TEST_WORDS.search(n)) or n.startswith("test")


def scan(files: RepoFiles, ev: Evidence, rel: str = "pyproject.toml") -> None:
    loaded = load_toml(files, rel, ev, "TOML")
    if loaded is None:
        return
    text, data = loaded
    try:
        _scan_data(files, ev, data, rel, text)
    except (TypeError, AttributeError, ValueError) as exc:
        # A value of an unexpected type (group = 1, dependencies = {...}): what was read before
        # it stays, the rest of the file is skipped, and the message names the file.
        ev.warn(rel, None, f"unexpected value ({type(exc).__name__}: {exc}); the rest of {rel} ignored")


@dataclass
class _Doc:
    """One pyproject.toml being read: where its keys sit, and how its requirement strings are recorded."""

    ev: Evidence
    rel: str
    text: str

    def src(self, needle: str, detail: str = "") -> Source:
        """The line a key or value is on (a key by "name =" first)."""
        # a key is found by "name =" before a bare substring, so "dev" does not hit "description"
        text = self.text
        line = None
        if needle and "=" not in needle and " " not in needle:
            line = line_of(text, f"{needle} =") or line_of(text, f'"{needle}"') or line_of(text, f"{needle}=")
        return Source(self.rel, line or line_of(text, needle), detail)

    def add(self, spec: Any, group: str, detail: str = "", optional: bool = False) -> None:
        """Record one requirement string (anything else is warned about and ignored)."""
        if not isinstance(spec, str):
            self.ev.warn(self.rel, None, f"{detail}: expected a requirement string, got {spec!r}; ignored")
            return
        self.ev.add_requirement(spec, group, self.src(spec, detail), optional=optional)


def _scan_data(files: RepoFiles, ev: Evidence, data: dict[str, Any], rel: str, text: str) -> None:
    doc = _Doc(ev, rel, text)
    build = data.get("build-system")
    if isinstance(build, dict):
        _build_system(doc, build)
    project = data.get("project")
    if isinstance(project, dict):
        _project_table(doc, data, project)

    # PEP 735 dependency groups
    groups = data.get("dependency-groups")
    if isinstance(groups, dict):
        _dependency_groups(ev, groups, rel, text)

    tool = data.get("tool") or {}
    if not isinstance(tool, dict):
        return
    _scm_from_tool(doc, tool)
    setuptools_dyn = as_table(as_table(tool.get("setuptools")).get("dynamic"))
    if setuptools_dyn:
        _setuptools_dynamic(files, doc, setuptools_dyn)
    # setuptools' own table can declare C extensions (ext-modules, setuptools 74 on)
    if as_table(tool.get("setuptools")).get("ext-modules"):
        ev.project.c_extensions = ev.project.c_extensions or doc.src("ext-modules", "[tool.setuptools] ext-modules")
    _tool_managers(doc, tool)
    # an application that says it is not a package: Poetry's package-mode = false, uv's
    # package = false. Its tools install the dependencies only (--no-root,
    # --no-install-project), and so does the plan
    poetry_tool = as_table(tool.get("poetry"))
    uv_tool = as_table(tool.get("uv"))
    if poetry_tool.get("package-mode") is False or uv_tool.get("package") is False:
        ev.project.installable = False
        ev.warn(
            rel,
            line_of(text, "package-mode") or line_of(text, "package ="),
            "the project is not a package (package-mode/package = false): dependencies only, run from the checkout",
        )
    pytest_opts = (tool.get("pytest") or {}).get("ini_options")
    if isinstance(pytest_opts, dict):
        pytest_config.record(ev, rel, pytest_opts, text)
    tox = tool.get("tox")
    if isinstance(tox, dict) and isinstance(tox.get("legacy_tox_ini"), str):
        toxmod.scan_text(ev, tox["legacy_tox_ini"], rel, line_offset=line_of(text, "legacy_tox_ini") or 0)


def _build_system(doc: _Doc, build: dict[str, Any]) -> None:
    """[build-system]: installable, its backend and manager, SCM versioning and compiled extensions."""
    src = doc.src
    proj = doc.ev.project
    proj.installable = True
    proj.install_source = src("[build-system]", "build-system")
    proj.build_backend = str(build.get("build-backend") or "setuptools.build_meta:__legacy__")
    reqs = build.get("requires") or []
    if isinstance(reqs, list):
        proj.build_requires = [str(r) for r in reqs]
        for r in reqs:
            low = re.split(r"[<>=!~\[; ]", str(r).lower(), maxsplit=1)[0].replace("_", "-")
            if low in SCM_BUILD_TOOLS and low != "dunamai":
                proj.scm_version = src(str(r), f"build requires {r}")
                proj.scm_tool = SCM_BUILD_TOOLS[low]
            if low in COMPILE_BUILD_TOOLS and low not in ("numpy", "cmake", "ninja"):
                proj.c_extensions = proj.c_extensions or src(str(r), f"build requires {r}")
    backend = proj.build_backend
    for m, name in (
        ("poetry", "poetry"),
        ("pdm", "pdm"),
        ("hatch", "hatch"),
        ("flit", "flit"),
        ("setuptools", "setuptools"),
        ("maturin", "maturin"),
        ("mesonpy", "meson"),
    ):
        if m in backend:
            proj.manager = proj.manager or name
            break


def _project_table(doc: _Doc, data: dict[str, Any], project: dict[str, Any]) -> None:
    """[project] (PEP 621): name, requires-python, dependencies, extras, classifiers, dynamic version."""
    src, ev = doc.src, doc.ev
    proj = ev.project
    proj.installable = proj.installable or True
    proj.install_source = proj.install_source or src("[project]", "[project]")
    if isinstance(project.get("name"), str):
        proj.name = project["name"]
        proj.name_source = src("name", "project.name")
    rp = project.get("requires-python")
    if isinstance(rp, str) and rp.strip():
        ev.python.append(PythonConstraint("requires", rp, src("requires-python", "requires-python")))
    deps = project.get("dependencies") or []
    if not isinstance(deps, list):
        ev.warn(
            doc.rel, src("dependencies").line, "project.dependencies must be a list of requirement strings; ignored"
        )
        deps = []
    for dep in deps:
        doc.add(dep, MAIN, "project.dependencies")
    opt = project.get("optional-dependencies") or {}
    if isinstance(opt, dict):
        _optional_dependencies(doc, opt)
    _classifiers(ev, project.get("classifiers") or [], doc.rel, doc.text)
    dyn = project.get("dynamic") or []
    tool = as_table(data.get("tool"))
    given = as_table(as_table(tool.get("setuptools")).get("dynamic")).get("dependencies") or as_table(
        tool.get("poetry")
    ).get("dependencies")
    if isinstance(dyn, list) and "dependencies" in dyn and not given:
        # a build backend's plugin gives them (hatch-requirements-txt and the like)
        proj.unread_dependencies = proj.unread_dependencies or src("dynamic", "dynamic dependencies")
    if isinstance(dyn, list) and "version" in dyn and proj.scm_version is None:
        tool = data.get("tool") or {}
        if "setuptools_scm" in tool or "setuptools-scm" in tool:
            proj.scm_version = src("[tool.setuptools_scm]", "tool.setuptools_scm")
            proj.scm_tool = "setuptools-scm"


def _optional_dependencies(doc: _Doc, opt: dict[str, Any]) -> None:
    """[project.optional-dependencies]: the extras, and which of them the tests need."""
    src, ev = doc.src, doc.ev
    for extra, deps in sorted(opt.items()):
        ev.project.extras[extra] = [d for d in deps if isinstance(d, str)] if isinstance(deps, list) else []
        for dep in deps or []:
            doc.add(dep, f"extra:{extra}", f"optional-dependencies.{extra}", optional=True)
        if is_test_group(extra) and extra.lower() not in ("dev",) or extra.lower() in ("test", "tests", "testing"):
            ev.test_extras.append((extra, src(f"{extra}", f"test extra {extra}")))
    # "dev" counts as a test extra only when nothing more specific exists
    if not any(is_test_group(e) and e.lower() != "dev" for e in opt) and "dev" in opt:
        ev.test_extras.append(("dev", src("dev", "extra dev")))


def _scm_from_tool(doc: _Doc, tool: dict[str, Any]) -> None:
    """The SCM versioning plugin a [tool.*] table configures (setuptools-scm, hatch-vcs, pdm, poetry)."""
    src = doc.src
    proj = doc.ev.project
    if "setuptools_scm" in tool or "setuptools-scm" in tool:
        proj.scm_version = proj.scm_version or src("setuptools_scm", "tool.setuptools_scm")
        proj.scm_tool = proj.scm_tool or "setuptools-scm"
    hatch_version = (tool.get("hatch") or {}).get("version") or {}
    if isinstance(hatch_version, dict) and hatch_version.get("source") == "vcs":
        proj.scm_version = proj.scm_version or src("source", "tool.hatch.version source=vcs")
        proj.scm_tool = proj.scm_tool or "hatch-vcs"
    pdm_version = (tool.get("pdm") or {}).get("version") or {}
    if isinstance(pdm_version, dict) and pdm_version.get("source") == "scm":
        proj.scm_version = proj.scm_version or src("scm", "tool.pdm.version source=scm")
        proj.scm_tool = proj.scm_tool or "pdm-scm"
    pdv = tool.get("poetry-dynamic-versioning")
    if isinstance(pdv, dict) and pdv.get("enable"):
        proj.scm_version = proj.scm_version or src("poetry-dynamic-versioning", "poetry-dynamic-versioning")
        proj.scm_tool = "poetry-dynamic-versioning"


def _setuptools_dynamic(files: RepoFiles, doc: _Doc, setuptools_dyn: dict[str, Any]) -> None:
    """[tool.setuptools.dynamic]: dependencies read from requirement files."""
    ev = doc.ev
    deps = setuptools_dyn.get("dependencies")
    if isinstance(deps, dict):
        for f in _as_list(deps.get("file")):
            reqmod.scan_file(files, ev, f, MAIN, via_ok=True)
    opt = setuptools_dyn.get("optional-dependencies")
    if isinstance(opt, dict):
        for extra, spec in opt.items():
            if isinstance(spec, dict):
                group = TEST if is_test_group(extra) else f"extra:{extra}"
                for f in _as_list(spec.get("file")):
                    reqmod.scan_file(files, ev, f, group, via_ok=True)
                if is_test_group(extra):
                    ev.test_extras.append((extra, doc.src(extra, f"dynamic extra {extra}")))


def _tool_managers(doc: _Doc, tool: dict[str, Any]) -> None:
    """The project manager's own tables: poetry, pdm, uv, hatch, flit."""
    ev = doc.ev
    proj = ev.project
    if isinstance(tool.get("poetry"), dict):
        _poetry(ev, tool["poetry"], doc.rel, doc.text)
    if isinstance(tool.get("pdm"), dict):
        pdm = tool["pdm"]
        proj.manager = proj.manager or "pdm"
        dev = pdm.get("dev-dependencies") or {}
        if isinstance(dev, dict):
            for g, deps in sorted(dev.items()):
                group = TEST if is_test_group(g) else f"group:{g}"
                for d in deps or []:
                    if isinstance(d, str) and d.startswith("-e"):
                        continue
                    doc.add(d, group, f"tool.pdm.dev-dependencies.{g}")
    if isinstance(tool.get("uv"), dict):
        proj.manager = proj.manager or "uv"
        for d in tool["uv"].get("dev-dependencies") or []:
            doc.add(d, TEST, "tool.uv.dev-dependencies")
    if isinstance(tool.get("hatch"), dict):
        _hatch_envs(doc, tool["hatch"])
    if isinstance(tool.get("flit"), dict):
        _flit(doc, tool["flit"])


def _hatch_envs(doc: _Doc, hatch: dict[str, Any]) -> None:
    """[tool.hatch.envs]: the dependencies and features of the default and test environments."""
    envs = hatch.get("envs") or {}
    if not isinstance(envs, dict):
        return
    for env_name, env in sorted(envs.items()):
        if not isinstance(env, dict) or not (
            env_name == "default" or is_test_group(env_name) or env_name in ("hatch-test",)
        ):
            continue
        for d in env.get("dependencies") or []:
            doc.add(d, TEST, f"tool.hatch.envs.{env_name}.dependencies")
        for d in env.get("extra-dependencies") or []:
            doc.add(d, TEST, f"tool.hatch.envs.{env_name}.extra-dependencies")
        for feat in env.get("features") or []:
            if isinstance(feat, str):
                doc.ev.test_extras.append((feat, doc.src(feat, f"hatch env {env_name} features")))


def _flit(doc: _Doc, flit: dict[str, Any]) -> None:
    """[tool.flit.metadata] (the pre-PEP 621 form): module name, requirements, requires-python."""
    proj = doc.ev.project
    meta = flit.get("metadata") or {}
    proj.manager = proj.manager or "flit"
    if not isinstance(meta, dict):
        return
    proj.name = proj.name or meta.get("module")
    for d in meta.get("requires") or []:
        doc.add(d, MAIN, "tool.flit.metadata.requires")
    for extra, deps in (meta.get("requires-extra") or {}).items():
        group = TEST if is_test_group(extra) else f"extra:{extra}"
        for d in deps or []:
            doc.add(d, group, f"tool.flit.metadata.requires-extra.{extra}")
    rp = meta.get("requires-python")
    if isinstance(rp, str):
        doc.ev.python.append(PythonConstraint("requires", rp, doc.src("requires-python", "flit requires-python")))


def _as_list(v: Any) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, list):
        return [x for x in v if isinstance(x, str)]
    return []


def _dependency_groups(ev: Evidence, groups: dict[str, Any], rel: str, text: str) -> None:
    def expand(name: str, seen: set[str]) -> list[str]:
        if name in seen:
            ev.warn(rel, line_of(text, name), f"dependency group {name!r} includes itself; cycle ignored")
            return []
        seen = seen | {name}
        out: list[str] = []
        for item in groups.get(name) or []:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, dict) and isinstance(item.get("include-group"), str):
                out.extend(expand(item["include-group"], seen))
        return out

    for g in sorted(groups):
        group = TEST if is_test_group(g) else f"group:{g}"
        for dep in expand(g, set()):
            ev.add_requirement(dep, group, Source(rel, line_of(text, dep), f"dependency-groups.{g}"))


def _classifiers(ev: Evidence, classifiers: list[Any], rel: str, text: str) -> None:
    for c in classifiers:
        m = re.match(r"Programming Language :: Python :: (3\.\d+)\s*$", str(c))
        if m:
            ev.python.append(PythonConstraint("tested", m.group(1), Source(rel, line_of(text, str(c)), "classifier")))


def _poetry(ev: Evidence, poetry: dict[str, Any], rel: str, text: str) -> None:
    proj = ev.project
    proj.manager = "poetry"
    proj.name = proj.name or poetry.get("name")
    if not proj.installable and ("name" in poetry):
        proj.installable = True
    _classifiers(ev, poetry.get("classifiers") or [], rel, text)
    doc = _Doc(ev, rel, text)
    _poetry_deps(
        doc,
        poetry,
        poetry.get("dependencies"),
        MAIN,
        "tool.poetry.dependencies",
        line_of(text, "[tool.poetry.dependencies]"),
    )
    _poetry_deps(
        doc,
        poetry,
        poetry.get("dev-dependencies"),
        TEST,
        "tool.poetry.dev-dependencies",
        line_of(text, "[tool.poetry.dev-dependencies]"),
    )
    for gname, g in sorted((poetry.get("group") or {}).items()):
        if isinstance(g, dict):
            group = TEST if is_test_group(gname) else f"group:{gname}"
            _poetry_deps(
                doc,
                poetry,
                g.get("dependencies"),
                group,
                f"tool.poetry.group.{gname}.dependencies",
                line_of(text, f"[tool.poetry.group.{gname}.dependencies]"),
            )
    for extra, members in sorted((poetry.get("extras") or {}).items()):
        proj.extras[extra] = [str(m) for m in members] if isinstance(members, list) else []
        if is_test_group(extra):
            ev.test_extras.append((extra, Source(rel, line_of(text, extra), f"poetry extra {extra}")))


def _poetry_deps(doc: _Doc, poetry: dict[str, Any], table: Any, group: str, where: str, start_line: int | None) -> None:
    """One Poetry dependency table: python is a constraint, the rest requirements (optional ones in their extra)."""
    ev, rel, text = doc.ev, doc.rel, doc.text
    if not isinstance(table, dict):
        return
    for name, value in table.items():
        line = line_of(text, f"{name} =", start_line or 1) or line_of(text, name, start_line or 1)
        source = Source(rel, line, where)
        if name.lower() == "python":
            if isinstance(value, str) and group == MAIN:
                ev.python.append(PythonConstraint("requires", poetry_constraint(value) or ">=3", source))
            continue
        parts = _poetry_value(ev, rel, line, name, value)
        if parts is None:
            continue
        constraint, optional, extras, markers = parts
        spec = name + (f"[{','.join(extras)}]" if extras else "") + constraint
        markers = [m for m in markers if m]
        if markers:
            spec += "; " + " and ".join(f"({m})" for m in markers)
        g = group
        if optional and group == MAIN:
            g = "extra:?"
        req = ev.add_requirement(spec, g, source, optional=optional)
        if req and optional:
            for extra, members in (poetry.get("extras") or {}).items():
                if name in members or name.lower() in [str(x).lower() for x in members]:
                    req.group = f"extra:{extra}"


def _poetry_value(
    ev: Evidence, rel: str, line: int | None, name: str, value: Any
) -> tuple[str, bool, list[str], list[str]] | None:
    """A Poetry dependency value as (constraint, optional, extras, markers); None to skip it."""
    optional = False
    extras: list[str] = []
    markers = []
    if isinstance(value, str):
        constraint = poetry_constraint(value)
    elif isinstance(value, dict):
        if any(k in value for k in ("path", "git", "url")):
            if "git" in value or "url" in value:
                ev.warn(rel, line, f"{name}: VCS/URL dependency kept as a name only")
            else:
                return None
        constraint = poetry_constraint(value.get("version", ""))
        optional = bool(value.get("optional"))
        extras = [e for e in value.get("extras", []) if isinstance(e, str)]
        markers = poetry_markers(value)
    elif isinstance(value, list):
        # several constraints keyed by python version: take the first, with its marker
        first = value[0] if value else {}
        constraint = poetry_constraint(first.get("version", "")) if isinstance(first, dict) else ""
    else:
        return None
    return constraint, optional, extras, markers
