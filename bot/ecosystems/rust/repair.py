"""Deterministic repairs of the Rust failure classes (issue #18, "Diagnose and repair").

A repair is chosen only when the diagnosis names it; nothing is guessed:

- a -sys build script that did not find its system library, header or pkg-config, or a build
  script that did not find protoc / cmake / clang / a C++ compiler: the Debian package the
  diagnosis names (``bot.ecosystems.rust.diagnose.packages_for``), with pkg-config for a
  pkg-config lookup, as long as the package is one the rules know (a header or module name the
  tables do not map is no Debian package, and installing a guess would fail the build anew);
- a build script that runs rustfmt or clippy, which the toolchain lacks: that component of the
  toolchain (``rustup component add`` on an official image, Debian's package on a stand-in);
- a toolchain older than the MSRV, the edition or the lock format: the oldest offered
  ``rust:X.Y-slim`` image at or above the version the log names, newer than the one in use;
  when none is offered the decision says so plainly and names the image that is missing.

Everything else (a stale Cargo.lock, nightly features, services, environment variables) is the
developer's to decide: the decision says why no repair applies. A kept repair is a graph change
(``apply``), so the compiled Dockerfile carries it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot.atoms import Atom
from bot.ecosystems.rust.diagnose import (
    COMMAND_PACKAGES,
    HEADER_PACKAGES,
    LINK_PACKAGES,
    PC_PACKAGES,
    packages_for,
)
from bot.ecosystems.rust.evidence import version_key
from bot.ecosystems.rust.graph import COMPONENT_PREFIX, COMPONENTS, MANIFESTS, RUNTIME, add_component
from bot.ecosystems.rust.sysdeps import SYSTEM_CRATES
from bot.graph.model import DepGraph, Node
from bot.loop.diagnose import Signature
from bot.loop.repair import Candidate

# Debian packages a repair may install: the ones the diagnose tables and the -sys crate table
# name, and pkg-config itself.
KNOWN_PACKAGES = frozenset(
    [
        *PC_PACKAGES.values(),
        *HEADER_PACKAGES.values(),
        *COMMAND_PACKAGES.values(),
        *LINK_PACKAGES.values(),
        "pkg-config",
        "libclang-dev",
    ]
    + [p for need in SYSTEM_CRATES.values() for p in need.packages]
)
APT_KINDS = (
    "missing_pkg_config_module",
    "missing_pkg_config",
    "missing_header",
    "missing_command",
    "missing_compiler",
    "missing_pq",
    "missing_shared_lib",
    "sys_build_failed",
)
# Why no repair applies, for the kinds the loop leaves to the developer.
LEFT_TO_THE_DEVELOPER = {
    "stale_lock": "Cargo.lock is out of date with Cargo.toml and the build uses --locked: run `cargo update` "
    "(or `cargo generate-lockfile`) and commit the lock; setupbot does not change it",
    "missing_lock": "the build uses --locked but Cargo.lock is missing: commit Cargo.lock",
    "nightly_feature": "the code needs a nightly compiler; the rust:X.Y-slim images carry stable toolchains",
    "missing_submodule": "a build script compiles vendored C source from a git submodule that the checkout does "
    "not have: check the repository out with --recurse-submodules (actions/checkout: submodules: true)",
    "connection_refused": "the tests reach a service that no compose file or CI workflow `services:` block of the "
    "repository declares (setupbot starts the declared ones): declare it there",
    "missing_env": "the tests need an environment variable; name it in .github/setupbot.yml (target.env)",
}


@dataclass
class RustRepair(Candidate):
    """A Rust repair in the loop's candidate shape (the run record, the report and the CLI read
    ``describe()``, ``source`` and ``why``). ``atoms`` holds an ``apt_install`` for a package
    repair; a toolchain switch has no atom kind of its own (``switch_python`` is Python's), so
    it is described by ``image``."""

    image: str = ""  # rust:X.Y-slim for a toolchain switch
    version: str = ""
    component: str = ""  # rustfmt / clippy: a toolchain component a build script runs

    def describe(self) -> str:
        if self.image:
            return f"switch the toolchain image to {self.image}"
        if self.component:
            return f"add the {self.component} component to the toolchain"
        return super().describe()

    @property
    def packages(self) -> list[str]:
        return [p for a in self.atoms if a.kind == "apt_install" for p in a.args["packages"]]

    def to_json(self) -> dict:
        out = super().to_json()
        if self.image:
            out["switch_image"] = self.image
        if self.component:
            out["component"] = self.component
        return out


@dataclass
class Decision:
    """The repair for one signature, or why there is none."""

    signature: Signature | None
    repair: RustRepair | None = None
    reason: str = ""


def _why(sig: Signature) -> str:
    return f"the log said: {sig.message}" if sig.message else sig.describe()


def apt_repair(sig: Signature, graph: DepGraph) -> Decision | None:
    """The Debian packages the signature names that the graph does not install yet."""
    if sig.kind not in APT_KINDS:
        return None
    wanted = packages_for(sig)
    if sig.kind == "sys_build_failed" and not wanted:
        return Decision(sig, None, f"{sig.key}'s build script failed and no rule maps it to a Debian package")
    if not wanted:
        return Decision(sig, None, f"no rule maps {sig.key} to a Debian package ({sig.message})")
    unknown = [p for p in wanted if p not in KNOWN_PACKAGES]
    if unknown:
        return Decision(sig, None, f"{', '.join(unknown)} is not a Debian package the rules know ({sig.message})")
    new = [p for p in dict.fromkeys(wanted) if f"systemlib:{p}" not in graph.nodes]
    if not new:
        return Decision(sig, None, f"{', '.join(wanted)} is installed already and the build still fails")
    atom = Atom("apt_install", {"packages": new})
    atom.validate()
    return Decision(sig, RustRepair([atom], "rule", why=_why(sig)))


def component_repair(sig: Signature, graph: DepGraph) -> Decision:
    """The toolchain component a build script runs (rustfmt, clippy), unless it is there already."""
    if sig.key not in COMPONENTS:
        return Decision(sig, None, f"{sig.key} is not a toolchain component the rules know ({sig.message})")
    if f"{COMPONENT_PREFIX}{sig.key}" in graph.nodes:
        return Decision(sig, None, f"the {sig.key} component is installed already and the build still fails")
    return Decision(sig, RustRepair([], "rule", why=_why(sig), component=sig.key))


def toolchain_repair(sig: Signature, current: str | None, offered: Sequence[str]) -> Decision:
    """The oldest offered image at or above the version the log names, newer than ``current``."""
    need = sig.key
    newer = [
        v
        for v in sorted(set(offered), key=version_key)
        if version_key(v) >= version_key(need) and (current is None or version_key(v) > version_key(current))
    ]
    if newer:
        image = f"rust:{newer[0]}-slim"
        return Decision(sig, RustRepair([], "rule", why=_why(sig), image=image, version=newer[0]))
    shown = ", ".join(sorted(set(offered), key=version_key)) or "none"
    return Decision(
        sig,
        None,
        f"the build needs rustc {need} or newer ({sig.message}), and no rust image offered here is "
        f"(offered: {shown}): make rust:{need}-slim or newer available (a registry that answers, or "
        "`setupbot images bootstrap --ecosystem rust` once a stand-in of that version exists)",
    )


def repair_key(repair: RustRepair) -> tuple:
    """What a tried repair is remembered by: its image, or its packages (sorted)."""
    if repair.component:
        return ("component", repair.component)
    return ("image", repair.image) if repair.image else ("apt", *sorted(repair.packages))


def _tried(repair: RustRepair, tried: set[tuple]) -> bool:
    """Tried before, or a part of a package set that was tried and did not help."""
    key = repair_key(repair)
    if key in tried:
        return True
    wanted = set(key[1:])
    return key[0] == "apt" and any(t[0] == "apt" and wanted <= set(t[1:]) for t in tried)


def decide(
    signatures: Iterable[Signature], graph: DepGraph, offered: Sequence[str], tried: set[tuple] | None = None
) -> Decision:
    """The first repair the signatures name (earliest signature first) that was not tried
    before; else why none applies (the first signature's reason)."""
    tried = tried or set()
    current = graph.nodes[RUNTIME].attrs.get("version") if RUNTIME in graph.nodes else None
    first: Decision | None = None
    for sig in signatures:
        if sig.kind == "test_failed":
            continue
        if sig.kind == "rust_floor":
            found: Decision | None = toolchain_repair(sig, current, offered)
        elif sig.kind == "missing_rust_component":
            found = component_repair(sig, graph)
        elif sig.kind in LEFT_TO_THE_DEVELOPER:
            found = Decision(sig, None, f"{LEFT_TO_THE_DEVELOPER[sig.kind]} ({sig.message})")
        else:
            found = apt_repair(sig, graph)
        if found is None:
            continue
        if found.repair is not None and _tried(found.repair, tried):
            found = Decision(sig, None, f"{found.repair.describe()} was tried and did not help")
        if found.repair is not None:
            return found
        first = first or found
    return first or Decision(None, None, "")


def apply(repair: RustRepair, graph: DepGraph, evidence: str) -> None:
    """The repair as a graph change: SYSTEMLIB nodes (action apt) before the fetch layer, a TOOL
    node (action rust-component) for a toolchain component, or the runtime node's image and
    version."""
    if repair.component:
        add_component(graph, repair.component, "a repair").add_evidence("build log", None, evidence[:200])
    for pkg in repair.packages:
        node = graph.add(
            Node(f"systemlib:{pkg}", "SYSTEMLIB", pkg, "SATISFIED", action="apt", attrs={"why": "a repair"})
        )
        node.add_evidence("build log", None, evidence[:200])
        graph.edge(MANIFESTS, node.id)
        graph.edge(node.id, RUNTIME)
    if repair.image:
        rt = graph.nodes[RUNTIME]
        before = rt.attrs.get("base_image")
        rt.state = "SATISFIED"
        rt.attrs.update(
            version=repair.version,
            base_image=repair.image,
            reason=f"a repair: {before} was older than the build needs ({evidence[:160]})",
        )
        for key in ("base_digest", "base_origin", "base_resolved"):
            rt.attrs.pop(key, None)
        rt.add_evidence("build log", None, evidence[:200])
