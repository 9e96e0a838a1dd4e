"""Kept repairs become graph changes: one function per atom kind (``APPLY``; the kinds are
defined in bot.atoms.ATOM_KINDS)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from bot.atoms import Atom, cythonize_command
from bot.catalogue import KINDS, canonical
from bot.graph.mapping import repair_distribution
from bot.graph.model import BUILD_ONLY_ATTR, DepGraph, Node

SCM_PRETEND_VERSION = "0.1.0"


# the evidence source of a repair the setup loop kept (the compiled Dockerfile cites it)
REPAIR_EVIDENCE = "setupbot loop"


def _evidence(evidence: Iterable[Any] | str | None, atom: Atom) -> list[tuple[str, int | None, str]]:
    if evidence is None:
        return [("repair", None, atom.describe())]
    if isinstance(evidence, str):
        return [("repair", None, evidence)]
    out: list[tuple[str, int | None, str]] = []
    for e in evidence:
        if isinstance(e, (list, tuple)):
            out.append((str(e[0]), e[1] if len(e) > 1 else None, str(e[2]) if len(e) > 2 else atom.describe()))
        elif hasattr(e, "file"):
            out.append((e.file, getattr(e, "line", None), getattr(e, "detail", "") or atom.describe()))
        else:
            out.append(("repair", None, str(e)))
    return out or [("repair", None, atom.describe())]


def _node(g: DepGraph, node: Node, ev: list[tuple[str, int | None, str]]) -> Node:
    n = g.add(node)
    for e in ev:
        n.add_evidence(*e)
    return n


def project_node(g: DepGraph) -> Node | None:
    return g.nodes.get("package:@project")


def link_runtime(g: DepGraph, node_id: str) -> None:
    if "runtime:python" in g.nodes and node_id != "runtime:python":
        g.edge(node_id, "runtime:python")


Evidence = list[tuple[str, int | None, str]]


def _cite(n: Node, ev: Evidence) -> None:
    for e in ev:
        n.add_evidence(*e)


def _apt_install(g: DepGraph, a: Mapping[str, Any], ev: Evidence) -> list[str]:
    changed = []
    for pkg in a["packages"]:
        n = _node(g, Node(f"systemlib:{pkg}", "SYSTEMLIB", pkg, "SATISFIED", action="apt", attrs={"repair": True}), ev)
        n.state, n.action = "SATISFIED", "apt"
        n.attrs.pop(BUILD_ONLY_ATTR, None)  # a repair showed it is needed: no lock leaves it out
        link_runtime(g, n.id)
        for p in g.of_type("PACKAGE"):
            if p.action in ("pip", "project", "repair-pip"):
                g.edge(p.id, n.id)
        changed.append(n.id)
    return changed


def _pip_install(g: DepGraph, a: Mapping[str, Any], ev: Evidence) -> list[str]:
    changed = []
    for spec in a["packages"]:
        try:
            name = canonicalize_name(Requirement(spec).name)
        except InvalidRequirement:
            name = canonicalize_name(spec)
        nid = f"package:{name}"
        n = g.nodes.get(nid)
        if n is None:
            n = _node(
                g,
                Node(nid, "PACKAGE", name, "SATISFIED", action="repair-pip", attrs={"spec": spec, "group": "repair"}),
                ev,
            )
        else:
            _cite(n, ev)
            n.attrs["spec"] = spec
            n.attrs.pop("pinned", None)
            if n.action not in ("pip",):
                n.action = "repair-pip"
                n.attrs["group"] = "repair"
            n.state = "SATISFIED"
        link_runtime(g, nid)
        for s in g.of_type("SYSTEMLIB"):
            if s.attrs.get("repair") or s.name == "build-essential":
                g.edge(nid, s.id)
        proj = project_node(g)
        if proj is not None:
            g.edge(proj.id, nid)
        for imp in g.of_type("IMPORT"):
            if imp.attrs.get("candidate") == name:
                g.edge(imp.id, nid, "mapping")
                imp.state = "SATISFIED"
        changed.append(nid)
    return changed


def _exact_pin(req: Requirement) -> str | None:
    """The version of ``name==V`` (no wildcard), else None."""
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        return specs[0].version
    return None


def _yields_to(g: DepGraph, spec: str) -> bool:
    """Whether ``spec`` gives way to the constraints already kept on its distribution, which
    it contradicts: an exact pin (the era's release) yields to a range a repair kept, and a
    range drops the exact pins it excludes (the targeted repair wins over the era's release),
    so the constraint file never asks for two versions pip cannot both meet."""
    try:
        req = Requirement(spec)
    except InvalidRequirement:
        return False
    name, pin = canonicalize_name(req.name), _exact_pin(req)
    for n in [c for c in g.of_type("CONFIG") if c.attrs.get("kind") == "pip_constraint"]:
        try:
            other = Requirement(str(n.attrs.get("spec") or ""))
        except InvalidRequirement:
            continue
        if canonicalize_name(other.name) != name or str(other.specifier) == str(req.specifier):
            continue
        other_pin = _exact_pin(other)
        if pin is not None and other_pin is None and not other.specifier.contains(pin, prereleases=True):
            return True
        if pin is None and other_pin is not None and not req.specifier.contains(other_pin, prereleases=True):
            g.remove(n.id)
    return False


def _pip_constraint(g: DepGraph, a: Mapping[str, Any], ev: Evidence) -> list[str]:
    changed = []
    for spec in a["constraints"]:
        if _yields_to(g, spec):
            continue
        nid = f"config:constraint:{spec}"
        n = _node(
            g,
            Node(nid, "CONFIG", spec, "SATISFIED", action="constraint", attrs={"kind": "pip_constraint", "spec": spec}),
            ev,
        )
        for p in g.of_type("PACKAGE") + g.of_type("TOOL"):
            if p.action in ("pip", "project", "repair-pip", "tool"):
                g.edge(p.id, n.id)
        changed.append(n.id)
    return changed


def _switch_python(g: DepGraph, a: Mapping[str, Any], ev: Evidence) -> list[str]:
    rt = g.runtime
    version = a["version"]
    rt.attrs["version"] = version
    rt.attrs["base_image"] = f"python:{version}-slim"
    rt.name = f"python {version}"
    rt.state = "SATISFIED"
    _cite(rt, ev)
    return [rt.id]


def _set_env(g: DepGraph, a: Mapping[str, Any], ev: Evidence) -> list[str]:
    nid = f"config:env:{a['name']}"
    n = _node(
        g, Node(nid, "CONFIG", a["name"], "SATISFIED", action="env", attrs={"kind": "env", "value": a["value"]}), ev
    )
    n.attrs["value"], n.action, n.state = a["value"], "env", "SATISFIED"
    n.attrs.pop("for_tests", None)  # set for the build too, until a trial shows the tests alone need it
    link_runtime(g, nid)
    g.edge(g.target.id, nid)
    proj = project_node(g)
    if proj is not None:
        g.edge(proj.id, nid)
    return [nid]


def _start_service(g: DepGraph, a: Mapping[str, Any], ev: Evidence) -> list[str]:
    # the catalogue's defaults (bot/catalogue.py): "mariadb" and "mysql" are one kind
    kind = canonical(a["service"]) or a["service"]
    spec = KINDS.get(kind)
    image = a.get("image") or (spec.image if spec else kind)
    env = dict(spec.start_env) if spec else {}
    env.update({str(k): str(v) for k, v in (a.get("env") or {}).items()})
    nid = f"service:{kind}"
    ports = [str(spec.port)] if spec else []
    n = _node(
        g,
        Node(
            nid,
            "SERVICE",
            kind,
            "SATISFIED",
            action="service",
            attrs={"kind": kind, "image": image, "ports": ports, "env": env},
        ),
        ev,
    )
    g.edge(g.target.id, nid)
    return [n.id]


def _on_project(
    update: Callable[[Node, Mapping[str, Any]], None],
) -> Callable[[DepGraph, Mapping[str, Any], Evidence], list[str]]:
    """An atom that changes how the project itself is installed."""

    def apply(g: DepGraph, a: Mapping[str, Any], ev: Evidence) -> list[str]:
        proj = project_node(g)
        if proj is None:
            return []
        update(proj, a)
        _cite(proj, ev)
        return [proj.id]

    return apply


def _run(g: DepGraph, a: Mapping[str, Any], ev: Evidence, in_checkout: bool = False) -> list[str]:
    command = list(a["command"])
    nid = "config:run:" + " ".join(command)
    attrs: dict[str, Any] = {"kind": "run", "command": command}
    if in_checkout:
        # what it builds lands in the checkout, which the devcontainer's mount hides: run again there
        attrs["in_checkout"] = True
    _node(g, Node(nid, "CONFIG", " ".join(command), "SATISFIED", action="run", attrs=attrs), ev)
    link_runtime(g, nid)
    proj = project_node(g)
    if proj is not None:
        g.edge(nid, proj.id)
    for t in g.of_type("TOOL"):
        g.edge(nid, t.id)
    g.edge(g.target.id, nid)
    return [nid]


def _compile_in_place(g: DepGraph, a: Mapping[str, Any], ev: Evidence) -> list[str]:
    return _run(g, {"command": cythonize_command(list(a["sources"]))}, ev, in_checkout=True)


def _test_command(g: DepGraph, a: Mapping[str, Any], ev: Evidence) -> list[str]:
    t = g.target
    t.attrs["command"] = list(a["command"])
    t.attrs["command_from_repair"] = True
    _cite(t, ev)
    return [t.id]


def _drop_package(g: DepGraph, a: Mapping[str, Any], ev: Evidence) -> list[str]:
    changed = []
    for name in a["packages"]:
        n = g.nodes.get(f"systemlib:{name}" if a["manager"] == "apt" else f"package:{canonicalize_name(name)}")
        if n is None or n.id == "package:@project":
            continue
        n.action = None
        n.state = "UNKNOWN"
        # a requirement file that names it can no longer be installed as written
        n.attrs["dropped"] = "repair"
        _cite(n, ev)
        changed.append(n.id)
    return changed


def project_name(g: DepGraph) -> str | None:
    """The project's own distribution name; None when the plan has no project or no name."""
    proj = project_node(g)
    own = proj.name.strip() if proj is not None else ""
    return None if own in ("", "(this project)") else own


def is_the_project(g: DepGraph, name: str) -> bool:
    """Whether ``name`` is the project's own distribution (any name, when the plan has none)."""
    if project_node(g) is None:
        return False
    own = project_name(g)
    return own is None or canonicalize_name(own) == canonicalize_name(name)


def checkout_holds(g: DepGraph, module: str) -> bool:
    """Whether ``module`` (its top-level name) is one the checkout's root holds (the plan's
    reading, graph meta ``checkout_modules``)."""
    return module.split(".")[0] in set(g.meta.get("checkout_modules") or ())


def project_compiles(g: DepGraph) -> bool:
    """Whether the project compiles its own extension (C, or Rust through maturin or
    setuptools-rust): the tests import a module only a build of the project makes."""
    proj = project_node(g)
    return bool((proj is not None and proj.attrs.get("compiles")) or g.meta.get("rust_toolchain"))


def _install_project(g: DepGraph, a: Mapping[str, Any], ev: Evidence) -> list[str]:
    proj = project_node(g)
    if proj is None or not is_the_project(g, a["name"]) or not proj.attrs.get("deps_only"):
        return []
    proj.attrs.pop("deps_only", None)
    _cite(proj, ev)
    return [proj.id]


def _git_init(g: DepGraph, a: Mapping[str, Any], ev: Evidence) -> list[str]:
    return _set_env(g, {"name": "SETUPTOOLS_SCM_PRETEND_VERSION", "value": SCM_PRETEND_VERSION}, ev)


def _build_without_isolation(g: DepGraph, a: Mapping[str, Any], ev: Evidence) -> list[str]:
    """The project's build imports ``module``, which pip's isolated build environment lacks:
    a module the checkout's root holds puts the checkout on PYTHONPATH (self_import); any other is
    installed first (its distribution's PACKAGE node) and the build sees it (build_imports).
    Either way the project installs without build isolation (bot.compile.dockerfile)."""
    proj = project_node(g)
    if proj is None:
        return []
    module = str(a["module"]).split(".")[0]
    changed = [proj.id]
    if checkout_holds(g, module):
        proj.attrs["self_import"] = True
    else:
        imports = list(proj.attrs.get("build_imports") or [])
        if module not in imports:
            proj.attrs["build_imports"] = [*imports, module]
        dist = repair_distribution(module) or module
        have = g.nodes.get(f"package:{canonicalize_name(dist)}")
        if have is None or have.action is None:
            changed += _pip_install(g, {"packages": [dist]}, ev)
    _cite(proj, ev)
    return changed


def _extras(proj: Node, a: Mapping[str, Any]) -> None:
    proj.attrs["extras"] = sorted(set(proj.attrs.get("extras", [])) | set(a["extras"]))


# How each atom kind changes the graph (bot.atoms.ATOM_KINDS describes the kind; its ``graph``
# field says in words what the function here does).
APPLY: dict[str, Callable[[DepGraph, Mapping[str, Any], Evidence], list[str]]] = {
    "apt_install": _apt_install,
    "pip_install": _pip_install,
    "pip_constraint": _pip_constraint,
    "switch_python": _switch_python,
    "set_env": _set_env,
    "start_service": _start_service,
    "use_tool": _on_project(lambda proj, a: proj.attrs.__setitem__("install_with", a["tool"])),
    "run": _run,
    "install_extras": _on_project(_extras),
    "test_command": _test_command,
    "install_deps_only": _on_project(lambda proj, a: proj.attrs.__setitem__("deps_only", True)),
    "install_project": _install_project,
    "drop_package": _drop_package,
    "git_init": _git_init,
    "build_without_isolation": _build_without_isolation,
    "compile_in_place": _compile_in_place,
}


def apply_atom(g: DepGraph, atom: Atom, evidence: Iterable[Any] | str | None = None) -> list[str]:
    """Make the graph change a kept repair stands for; returns the ids of the changed nodes."""
    atom.validate()
    return APPLY[atom.kind](g, atom.args, _evidence(evidence, atom))
