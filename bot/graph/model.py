"""The DepGraph: typed requirement nodes with states and evidence, prerequisite and mapping
edges (docs/architecture.md, "DepGraph and plan"). Everything the Dockerfile compiler needs
lives here, so a kept repair is a graph change and the Dockerfile follows from the graph."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bot.graph.phases import phase_of

# where the image holds the checkout (the Dockerfile's WORKDIR)
WORKDIR = "/workspace"
NODE_TYPES = ("TARGET", "IMPORT", "PACKAGE", "RUNTIME", "TOOL", "SYSTEMLIB", "SERVICE", "CONFIG")
STATES = ("MISSING", "SATISFIED", "UNKNOWN")
EDGE_KINDS = ("prerequisite", "mapping")
# The Dockerfile's two stages when the development container needs more than the tests do:
# TESTED_STAGE is the environment the loop builds, tests and replays; DEV_STAGE adds on top of
# it what only the editor uses (git, the non-root user), built once on the run's first image.
TESTED_STAGE = "env"
DEV_STAGE = "dev"
# the evidence source of what setupbot adds for the development container alone
DEVCONTAINER_SOURCE = "setupbot"
# the mark on a Debian package that only a source build of a distribution needs (the system
# table's ``build`` list): a lock whose every distribution installs from a wheel leaves it out
BUILD_ONLY_ATTR = "build_only"


@dataclass
class Node:
    id: str
    type: str
    name: str
    state: str = "UNKNOWN"
    evidence: list[tuple[str, int | None, str]] = field(default_factory=list)
    action: str | None = None  # what the compiler does for it: from, env, apt, pip, project, tool, run, service
    attrs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.type not in NODE_TYPES:
            raise ValueError(f"unknown node type {self.type!r}")
        if self.state not in STATES:
            raise ValueError(f"unknown node state {self.state!r}")

    def add_evidence(self, file: str, line: int | None, detail: str = "") -> None:
        item = (file, line, detail)
        if item not in self.evidence:
            self.evidence.append(item)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "name": self.name,
            "state": self.state,
            "evidence": [list(e) for e in self.evidence],
            "action": self.action,
            "attrs": _plain(self.attrs),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Node:
        return cls(
            d["id"],
            d["type"],
            d["name"],
            d.get("state", "UNKNOWN"),
            [tuple(e) for e in d.get("evidence", [])],
            d.get("action"),
            dict(d.get("attrs", {})),
        )


def dev_stage_only(n: Node) -> bool:
    """Whether ``n`` is for the development container alone: the user, or a Debian package
    whose only evidence is setupbot's own (git for the editor). Evidence from the repository or
    a repair (a dependency from a git URL, a test that runs git) puts it in the tested stage."""
    if n.action == "user":
        return True
    return n.action == "apt" and bool(n.evidence) and all(e[0] == DEVCONTAINER_SOURCE for e in n.evidence)


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in sorted(v.items())}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, set):
        return sorted(_plain(x) for x in v)
    return v


class DepGraph:
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.edges: set[tuple[str, str, str]] = set()
        self.meta: dict[str, Any] = {}

    # -- construction -------------------------------------------------------------------
    def add(self, node: Node) -> Node:
        """Add ``node``; if the id exists, merge evidence and attrs into the existing node."""
        existing = self.nodes.get(node.id)
        if existing is None:
            self.nodes[node.id] = node
            return node
        for e in node.evidence:
            existing.add_evidence(*e)
        for k, v in node.attrs.items():
            existing.attrs.setdefault(k, v)
        if existing.action is None:
            existing.action = node.action
        return existing

    def edge(self, src: str, dst: str, kind: str = "prerequisite") -> None:
        if kind not in EDGE_KINDS:
            raise ValueError(f"unknown edge kind {kind!r}")
        if src not in self.nodes or dst not in self.nodes:
            raise KeyError(f"edge {src} -> {dst}: both nodes must exist")
        if src != dst:
            self.edges.add((src, dst, kind))

    def remove(self, node_id: str) -> None:
        self.nodes.pop(node_id, None)
        self.edges = {e for e in self.edges if node_id not in (e[0], e[1])}

    # -- queries ------------------------------------------------------------------------
    def of_type(self, type_: str) -> list[Node]:
        return [n for _, n in sorted(self.nodes.items()) if n.type == type_]

    def mapped(self, node_id: str) -> list[str]:
        return sorted(d for s, d, k in self.edges if s == node_id and k == "mapping")

    @property
    def target(self) -> Node:
        return self.nodes["target:tests"]

    @property
    def runtime(self) -> Node:
        return self.nodes["runtime:python"]

    def topological(self) -> list[Node]:
        """Nodes in prerequisite order (prerequisites first); ties broken by phase then id, so the
        order, and the Dockerfile, is the same for the same graph."""
        from graphlib import TopologicalSorter

        ts: TopologicalSorter[str] = TopologicalSorter()
        for nid in sorted(self.nodes):
            ts.add(nid)
        for s, d, k in sorted(self.edges):
            if k == "prerequisite":
                ts.add(s, d)
        ts.prepare()
        out: list[Node] = []
        while ts.is_active():
            ready = sorted(ts.get_ready(), key=lambda i: (phase_of(self.nodes[i]), i))
            for nid in ready:
                out.append(self.nodes[nid])
                ts.done(nid)
        return out

    # -- serialization ------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "meta": _plain(self.meta),
            "nodes": [self.nodes[k].to_json() for k in sorted(self.nodes)],
            "edges": [list(e) for e in sorted(self.edges)],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | str) -> DepGraph:
        if isinstance(data, str):
            data = json.loads(data)
        assert isinstance(data, dict), "a graph's JSON form is an object"
        g = cls()
        g.meta = dict(data.get("meta", {}))
        for nd in data.get("nodes", []):
            n = Node.from_json(nd)
            g.nodes[n.id] = n
        for s, d, k in data.get("edges", []):
            g.edge(s, d, k)
        return g

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True)

    def render_text(self) -> str:
        """A readable listing: one line per node grouped by type, its state, the evidence, and
        what it depends on."""
        lines = [f"DepGraph: {len(self.nodes)} nodes, {len(self.edges)} edges"]
        for type_ in NODE_TYPES:
            nodes = self.of_type(type_)
            if not nodes:
                continue
            lines.append(f"{type_} ({len(nodes)})")
            for n in nodes:
                mark = {"SATISFIED": "ok", "MISSING": "MISSING", "UNKNOWN": "?"}[n.state]
                extra = ""
                if n.type == "PACKAGE" and n.attrs.get("spec") and n.attrs["spec"] != n.name:
                    extra = f"  [{n.attrs['spec']}]"
                if n.attrs.get("pinned"):
                    extra += f" =={n.attrs['pinned']}"
                if n.attrs.get("resolved"):
                    extra += f" (resolved {n.attrs['resolved']})"
                group = f" {{{n.attrs['group']}}}" if n.attrs.get("group") else ""
                lines.append(f"  [{mark:>7}] {n.name}{extra}{group}")
                for f, ln, detail in n.evidence[:3]:
                    where = f"{f}:{ln}" if ln else f
                    lines.append(f"            from {where}" + (f"  ({detail})" if detail else ""))
                if len(n.evidence) > 3:
                    lines.append(f"            ... and {len(n.evidence) - 3} more")
                maps = self.mapped(n.id)
                if maps:
                    lines.append(f"            maps to {', '.join(maps)}")
        return "\n".join(lines)

    # -- repairs ------------------------------------------------------------------------
    def apply_atom(self, atom: Any, evidence: Iterable[Any] | str | None = None) -> list[str]:
        from bot.graph.apply import apply_atom  # apply.py builds on this module's DepGraph: a cycle at import

        return apply_atom(self, atom, evidence)
