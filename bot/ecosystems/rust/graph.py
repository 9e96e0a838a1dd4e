"""Rust evidence -> DepGraph nodes (the ``contribute`` step of the seam).

Node ids are the shared ones where the meaning is shared, so the repair atoms apply unchanged:
``systemlib:<deb>`` (action ``apt``), ``service:<kind>`` (action ``service``), ``target:tests``.
The Rust-only nodes are ``runtime:rust`` (the image), ``config:cargo-manifests`` (what the fetch
layer copies), ``config:cargo-lock`` and ``tool:cargo-nextest``.
"""

from __future__ import annotations

from typing import Any

from bot.ecosystems.rust.evidence import RustEvidence
from bot.ecosystems.rust.sysdeps import COMPONENTS
from bot.ecosystems.rust.toolchain import RustChoice
from bot.graph.build import add_services
from bot.graph.model import DepGraph, Node

RUNTIME = "runtime:rust"
MANIFESTS = "config:cargo-manifests"
LOCK = "config:cargo-lock"
NEXTEST = "tool:cargo-nextest"
# toolchain components (bot.ecosystems.rust.sysdeps.COMPONENTS) are TOOL nodes under this prefix
COMPONENT_PREFIX = "tool:rust-component:"
COMPONENT_ACTION = "rust-component"
TARGET = "target:tests"
# cargo-nextest from crates.io, at a version that builds on rustc 1.85 (the oldest stand-in).
NEXTEST_SPEC = "cargo-nextest@0.9.92"


def _ev(source: Any) -> tuple[str, int | None, str]:
    return (source.file, source.line, source.detail)


def test_command(ev: RustEvidence) -> tuple[list[str], list[tuple[str, int | None, str]]]:
    """``cargo nextest run`` when CI uses nextest, else ``cargo test``; ``--workspace`` for a
    workspace, ``--all-features`` when CI tests with it. Always ``--locked`` with a lock."""
    why: list[tuple[str, int | None, str]] = []
    flags: list[str] = []
    if ev.workspace_members:
        flags.append("--workspace")
    for argv, src in ev.ci_commands:
        if argv[1:2] in (["test"], ["nextest"]) and "--all-features" in argv:
            flags.append("--all-features")
            why.append(_ev(src))
            break
    if ev.lockfile:
        flags.append("--locked")
    if ev.uses_nextest:
        src = next(s for a, s in ev.ci_commands if a[:2] == ["cargo", "nextest"])
        return ["cargo", "nextest", "run", *flags, "--no-fail-fast"], [_ev(src), *why]
    tested = next((s for a, s in ev.ci_commands if a[1:2] == ["test"]), None)
    if tested is not None:
        why.insert(0, _ev(tested))
    return ["cargo", "test", *flags, "--no-fail-fast"], why or [("Cargo.toml", None, "cargo's own test runner")]


def build_command(ev: RustEvidence) -> list[str]:
    argv = ["cargo", "build", "--tests"]
    if ev.workspace_members:
        argv.append("--workspace")
    if any(a[1:2] in (["test"], ["nextest"]) and "--all-features" in a for a, _ in ev.ci_commands):
        argv.append("--all-features")
    if ev.lockfile:
        argv.append("--locked")
    return argv


def stub_targets(ev: RustEvidence) -> list[str]:
    """Empty source files so that cargo can load the workspace from the manifests alone (the
    fetch layer runs before the source is copied): each crate's ``[lib] path`` or
    ``src/lib.rs``, and every declared bin/test/bench/example file."""
    out: list[str] = []
    for c in ev.crates:
        if c.virtual:
            continue
        for rel in [c.lib_path or "src/lib.rs", *c.declared_targets]:
            path = f"{c.folder}/{rel}" if c.folder else rel
            if path not in out:
                out.append(path)
    return out


def contribute(ev: RustEvidence, choice: RustChoice, graph: DepGraph) -> None:
    _add_runtime(choice, graph)
    _add_target(ev, graph)
    _add_manifests(ev, graph)
    _add_system_packages_and_tools(ev, graph)
    add_services(graph, ev.services)
    graph.meta.setdefault("ecosystems", [])
    if "rust" not in graph.meta["ecosystems"]:
        graph.meta["ecosystems"].append("rust")


def _add_runtime(choice: RustChoice, graph: DepGraph) -> None:
    """The Rust toolchain image the choice settled on, with the floor that bounded it."""
    rt = graph.add(
        Node(
            RUNTIME,
            "RUNTIME",
            "rust",
            "SATISFIED" if choice.satisfied else "MISSING",
            action="from",
            attrs={
                "version": choice.version,
                "base_image": choice.image,
                "reason": choice.reason,
                "floor": choice.floor,
                "floor_why": choice.floor_why,
            },
        )
    )
    if choice.floor_why:
        rt.add_evidence(
            choice.floor_why.rsplit(" in ", 1)[-1] if " in " in choice.floor_why else "Cargo.toml",
            None,
            choice.floor_why,
        )


def _add_target(ev: RustEvidence, graph: DepGraph) -> None:
    """The test target: cargo test (or nextest), its listing and build commands."""
    target = graph.add(Node(TARGET, "TARGET", "build and run the tests", "UNKNOWN"))
    command, why = test_command(ev)
    plain = [a for a in command if a != "--no-fail-fast"]
    collect = [*plain, "--", "--list"] if command[1] == "test" else ["cargo", "nextest", "list", *plain[3:]]
    named = [c.name for c in sorted(ev.crates, key=lambda c: (c.folder != "", c.folder)) if c.name]
    target.attrs.update(
        {
            "command": command,
            "collect_command": collect,
            "build_command": build_command(ev),
            "result_format": "libtest",
            # the root crate's name (a workspace's first member's): names the target/ cache
            "project": named[0] if named else "workspace",
        }
    )
    for e in why:
        target.add_evidence(*e)
    graph.edge(TARGET, RUNTIME)


def _add_manifests(ev: RustEvidence, graph: DepGraph) -> None:
    """The Cargo manifests fetched before the source, and Cargo.lock when there is one."""
    manifests = sorted({c.manifest for c in ev.crates})
    m = graph.add(
        Node(
            MANIFESTS,
            "CONFIG",
            "Cargo manifests",
            "SATISFIED",
            action="cargo_fetch",
            attrs={
                "files": manifests,
                "stubs": stub_targets(ev),
                "lock": ev.lockfile,
                "cargo_config": None if ev.vendored else ev.cargo_config,
            },
        )
    )
    for rel in manifests[:20]:
        m.add_evidence(rel, None, "manifest")
    graph.edge(MANIFESTS, RUNTIME)
    graph.edge(TARGET, MANIFESTS)
    if ev.lockfile:
        lock = graph.add(Node(LOCK, "CONFIG", ev.lockfile, "SATISFIED", attrs={"file": ev.lockfile, "kind": "cargo"}))
        lock.add_evidence(ev.lockfile, None, f"Cargo.lock format {ev.lock_version}")
        graph.edge(MANIFESTS, LOCK)


def add_component(graph: DepGraph, name: str, why: str) -> Node:
    """A toolchain component (a key of COMPONENTS) as a TOOL node, ahead of the fetch layer's
    build, where a build script may run it."""
    node = graph.add(
        Node(f"{COMPONENT_PREFIX}{name}", "TOOL", name, "SATISFIED", action=COMPONENT_ACTION, attrs={"why": why})
    )
    graph.edge(MANIFESTS, node.id)
    graph.edge(node.id, RUNTIME)
    return node


def _add_system_packages_and_tools(ev: RustEvidence, graph: DepGraph) -> None:
    """The Debian packages the -sys crates need, the toolchain components the CI's test job
    installs, and cargo-nextest when the project uses it."""
    for p in ev.system_packages:
        s = graph.add(
            Node(f"systemlib:{p.package}", "SYSTEMLIB", p.package, "SATISFIED", action="apt", attrs={"why": p.why})
        )
        s.add_evidence(*_ev(p.source))
        graph.edge(MANIFESTS, s.id)  # build scripts run from the fetch layer's build on
        graph.edge(s.id, RUNTIME)
    for name, src in ev.test_components:
        if name in COMPONENTS:
            add_component(graph, name, "the CI job that runs the tests installs it").add_evidence(*_ev(src))
    if ev.uses_nextest:
        n = graph.add(
            Node(NEXTEST, "TOOL", "cargo-nextest", "SATISFIED", action="cargo_install", attrs={"spec": NEXTEST_SPEC})
        )
        graph.edge(TARGET, n.id)
        graph.edge(n.id, RUNTIME)
