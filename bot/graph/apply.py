"""Kept repairs become graph changes: one function per atom kind (bot/atoms.py)."""

from __future__ import annotations

from typing import Any, Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from bot.atoms import Atom
from bot.catalogue import KINDS, canonical
from bot.graph.model import DepGraph, Node

SCM_PRETEND_VERSION = "0.1.0"


# the evidence source of a repair the setup loop kept (the compiled Dockerfile cites it)
REPAIR_EVIDENCE = "setupbot loop"


def _evidence(evidence: Iterable[Any] | str | None, atom: Atom) -> list[tuple[str, int | None, str]]:
    if evidence is None:
        return [("repair", None, atom.describe())]
    if isinstance(evidence, str):
        return [("repair", None, evidence)]
    out = []
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


def apply_atom(g: DepGraph, atom: Atom, evidence: Iterable[Any] | str | None = None) -> list[str]:
    atom.validate()
    ev = _evidence(evidence, atom)
    a = atom.args
    changed: list[str] = []
    if atom.kind == "apt_install":
        for pkg in a["packages"]:
            n = _node(g, Node(f"systemlib:{pkg}", "SYSTEMLIB", pkg, "SATISFIED", action="apt", attrs={"repair": True}), ev)
            n.state, n.action = "SATISFIED", "apt"
            link_runtime(g, n.id)
            for p in g.of_type("PACKAGE"):
                if p.action in ("pip", "project", "repair-pip"):
                    g.edge(p.id, n.id)
            changed.append(n.id)
    elif atom.kind == "pip_install":
        for spec in a["packages"]:
            try:
                name = canonicalize_name(Requirement(spec).name)
            except InvalidRequirement:
                name = canonicalize_name(spec)
            nid = f"package:{name}"
            n = g.nodes.get(nid)
            if n is None:
                n = _node(g, Node(nid, "PACKAGE", name, "SATISFIED", action="repair-pip",
                                  attrs={"spec": spec, "group": "repair"}), ev)
            else:
                for e in ev:
                    n.add_evidence(*e)
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
    elif atom.kind == "pip_constraint":
        for spec in a["constraints"]:
            nid = f"config:constraint:{spec}"
            n = _node(g, Node(nid, "CONFIG", spec, "SATISFIED", action="constraint", attrs={"kind": "pip_constraint", "spec": spec}), ev)
            for p in g.of_type("PACKAGE") + g.of_type("TOOL"):
                if p.action in ("pip", "project", "repair-pip", "tool"):
                    g.edge(p.id, n.id)
            changed.append(n.id)
    elif atom.kind == "switch_python":
        rt = g.runtime
        version = a["version"]
        rt.attrs["version"] = version
        rt.attrs["base_image"] = f"python:{version}-slim"
        rt.name = f"python {version}"
        rt.state = "SATISFIED"
        for e in ev:
            rt.add_evidence(*e)
        changed.append(rt.id)
    elif atom.kind == "set_env":
        nid = f"config:env:{a['name']}"
        n = _node(g, Node(nid, "CONFIG", a["name"], "SATISFIED", action="env", attrs={"kind": "env", "value": a["value"]}), ev)
        n.attrs["value"], n.action, n.state = a["value"], "env", "SATISFIED"
        link_runtime(g, nid)
        g.edge(g.target.id, nid)
        proj = project_node(g)
        if proj is not None:
            g.edge(proj.id, nid)
        changed.append(nid)
    elif atom.kind == "start_service":
        # the catalogue's defaults (bot/catalogue.py): "mariadb" and "mysql" are one kind
        kind = canonical(a["service"]) or a["service"]
        spec = KINDS.get(kind)
        image = a.get("image") or (spec.image if spec else kind)
        env = dict(spec.start_env) if spec else {}
        env.update({str(k): str(v) for k, v in (a.get("env") or {}).items()})
        nid = f"service:{kind}"
        ports = [str(spec.port)] if spec else []
        n = _node(g, Node(nid, "SERVICE", kind, "SATISFIED", action="service",
                          attrs={"kind": kind, "image": image, "ports": ports, "env": env}), ev)
        g.edge(g.target.id, nid)
        changed.append(n.id)
    elif atom.kind == "use_tool":
        proj = project_node(g)
        if proj is not None:
            proj.attrs["install_with"] = a["tool"]
            for e in ev:
                proj.add_evidence(*e)
            changed.append(proj.id)
    elif atom.kind == "run":
        command = list(a["command"])
        nid = "config:run:" + " ".join(command)
        n = _node(g, Node(nid, "CONFIG", " ".join(command), "SATISFIED", action="run", attrs={"kind": "run", "command": command}), ev)
        link_runtime(g, nid)
        proj = project_node(g)
        if proj is not None:
            g.edge(nid, proj.id)
        for t in g.of_type("TOOL"):
            g.edge(nid, t.id)
        g.edge(g.target.id, nid)
        changed.append(nid)
    elif atom.kind == "install_extras":
        proj = project_node(g)
        if proj is not None:
            extras = sorted(set(proj.attrs.get("extras", [])) | set(a["extras"]))
            proj.attrs["extras"] = extras
            for e in ev:
                proj.add_evidence(*e)
            changed.append(proj.id)
    elif atom.kind == "test_command":
        t = g.target
        t.attrs["command"] = list(a["command"])
        for e in ev:
            t.add_evidence(*e)
        changed.append(t.id)
    elif atom.kind == "install_deps_only":
        proj = project_node(g)
        if proj is not None:
            proj.attrs["deps_only"] = True
            for e in ev:
                proj.add_evidence(*e)
            changed.append(proj.id)
    elif atom.kind == "drop_package":
        for name in a["packages"]:
            if a["manager"] == "apt":
                n = g.nodes.get(f"systemlib:{name}")
            else:
                n = g.nodes.get(f"package:{canonicalize_name(name)}")
            if n is None or n.id == "package:@project":
                continue
            n.action = None
            n.state = "UNKNOWN"
            # a requirement file that names it can no longer be installed as written
            n.attrs["dropped"] = "repair"
            for e in ev:
                n.add_evidence(*e)
            changed.append(n.id)
    elif atom.kind == "git_init":
        changed += apply_atom(g, Atom("set_env", {"name": "SETUPTOOLS_SCM_PRETEND_VERSION", "value": SCM_PRETEND_VERSION}), ev)
    return changed
