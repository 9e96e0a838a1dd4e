"""Rust nodes of the DepGraph -> Dockerfile steps, rendered by the one Dockerfile template
(templates/Dockerfile.j2, through bot.compile.dockerfile's environment, its value checks and its
parse-back check: SECURITY.md S14 holds for Rust as it does for Python).

The layers, cheapest to invalidate last:
  FROM rust:<ver>-slim                     runtime:rust
  RUN apt-get install <-dev packages>      systemlib:* (from -sys crates and build helpers)
  RUN <add rustfmt / clippy>               tool:rust-component:* (a build script runs it)
  WORKDIR /workspace
  COPY Cargo.toml, Cargo.lock, member manifests
  RUN <stub sources> && cargo fetch --locked && <remove stubs>   crates.io, once per lock change
  COPY . .
  RUN cargo build --tests --locked         compiled once in the image; the test run only links
  CMD cargo test --locked                  (or cargo nextest run)

Where the engine that proves the Dockerfile builds with BuildKit (buildx), the fetch and the
compile keep what they make in a BuildKit cache mount between builds: Cargo's downloaded
.crate files and the target/ folder are copied in from the cache before the command and back
after it, also when it fails, so a rebuild (the loop's next trial, or a developer's rebuild
after a change) downloads and compiles only what changed. They are copied, not mounted in
place, because the image must still hold them: cargo needs the .crate files to build offline,
and the tests in the image link against target/.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from typing import Any

from bot.compile.dockerfile import (
    CompiledDockerfile,
    DockerLine,
    Glob,
    _environment,
    _validate_steps,
    verify_dockerfile,
)
from bot.ecosystems.base import CompileSnippet
from bot.ecosystems.rust.graph import (
    COMPONENT_ACTION,
    COMPONENTS,
    LOCK,
    MANIFESTS,
    NEXTEST,
    RUNTIME,
    TARGET,
)
from bot.graph.model import DepGraph, Node

WORKDIR = "/workspace"
ENV = [("CARGO_TERM_COLOR", "never"), ("CARGO_INCREMENTAL", "0"), ("CARGO_NET_RETRY", "5")]


def _where(nodes: list[Node], limit: int = 2) -> list[str]:
    out = []
    for n in nodes:
        for f, line, detail in n.evidence[:limit]:
            out.append(f"{n.name}: {f}{':' + str(line) if line else ''}" + (f" ({detail})" if detail else ""))
    return out[: limit * 2]


def _manifest_copies(files: list[str], lock: str | None, cargo_config: str | None) -> list[dict[str, Any]]:
    """One COPY per folder: the root's manifest, lock and cargo config together, then each
    member's Cargo.toml into its own folder."""
    root = ["Cargo.toml"] + ([lock] if lock else [])
    steps = [
        {
            "op": "COPY",
            "src": root,
            "dest": "./",
            "nodes": [],
            "comments": ["the manifests alone first: crates.io is fetched once per lock change"],
        }
    ]
    if cargo_config:
        steps.append(
            {
                "op": "COPY",
                "src": [cargo_config],
                "dest": posixpath.dirname(cargo_config) + "/",
                "nodes": [],
                "comments": [],
            }
        )
    for rel in files:
        if rel != "Cargo.toml":
            steps.append(
                {"op": "COPY", "src": [rel], "dest": posixpath.dirname(rel) + "/", "nodes": [], "comments": []}
            )
    return steps


# where the BuildKit cache mounts are, inside the build's RUN steps only
CACHE_ROOT = "/var/cache/cargo"
REGISTRY_KEEP = '"$CARGO_HOME"/registry/cache'  # both rust image families set CARGO_HOME


def cache_id(purpose: str, project: str | None = None) -> str:
    """The cache's id: ``cargo-registry`` (crates are the same for every project), or
    ``cargo-target-<project>`` (one project's build output must not end up in another's image)."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", (project or "").lower()).strip("-_")[:40]
    return f"cargo-{purpose}" + (f"-{slug}" if slug else "")


def kept_between_builds(commands: list[list[str]], keep: str, cache: str) -> tuple[list[str], list[str]]:
    """The mount, and the shell lines (one command a line, as the template writes commands) that
    run ``commands`` with the folder ``keep`` filled from the cache mount ``cache`` before them
    and copied back after them, whatever their exit; the exit stays theirs."""
    where = f"{CACHE_ROOT}/{cache.removeprefix('cargo-')}"
    lines = [f"mkdir -p {keep} && cp -a {where}/. {keep}/;"]
    lines += [("&& " if i else "") + shlex.join(c) for i, c in enumerate(commands)]
    lines[-1] += ";"
    lines.append(f"s=$?; cp -a {keep}/. {where}/; exit $s")
    return [f"type=cache,id={cache},target={where},sharing=locked"], lines


def _fetch_commands(stubs: list[str], locked: bool) -> list[list[str]]:
    folders = sorted({posixpath.dirname(s) for s in stubs if posixpath.dirname(s)})
    cmds: list[list[str]] = []
    if folders:
        cmds.append(["mkdir", "-p", *folders])
    if stubs:
        cmds.append(["touch", *stubs])
    cmds.append(["cargo", "fetch", *(["--locked"] if locked else [])])
    if stubs:
        cmds.append(["rm", "-f", *stubs])
    return cmds


def component_script(names: list[str]) -> str:
    """The shell that adds toolchain components (names from ``COMPONENTS`` only): ``rustup
    component add`` where rustup manages the toolchain (the official images), else the Debian
    packages that match the installed rustc (``rustc-web`` has its own)."""
    unknown = [n for n in names if n not in COMPONENTS]
    if unknown:
        raise ValueError(f"not a toolchain component: {', '.join(unknown)}")
    plain = " ".join(COMPONENTS[n][0] for n in names)
    web = " ".join(COMPONENTS[n][1] for n in names)
    return (
        f"if command -v rustup >/dev/null 2>&1; then rustup component add {' '.join(names)}; "
        f'else if dpkg -s rustc-web >/dev/null 2>&1; then p="{web}"; else p="{plain}"; fi '
        "&& apt-get update && apt-get install -y --no-install-recommends $p && rm -rf /var/lib/apt/lists/*; fi"
    )


def _toolchain_steps(graph: DepGraph) -> list[dict[str, Any]]:
    """The base image, the environment, the system packages and the test runner."""
    rt = graph.nodes[RUNTIME]
    base = rt.attrs["base_image"]
    if rt.attrs.get("base_digest") and "@" not in base:
        base = f"{base}@{rt.attrs['base_digest']}"  # pulled from a registry: pinned, as for Python
    steps: list[dict[str, Any]] = [
        {
            "op": "FROM",
            "image": base,
            "nodes": [rt],
            "comments": [f"Rust {rt.attrs.get('version')}: {rt.attrs.get('reason', '')}"],
        }
    ]
    steps.append({"op": "ENV", "pairs": list(ENV), "nodes": [], "comments": []})
    apts = sorted((n for n in graph.of_type("SYSTEMLIB") if n.action == "apt"), key=lambda n: n.name)
    if apts:
        steps.append(
            {
                "op": "RUN",
                "head": 4,
                "nodes": apts,
                "comments": ["system packages the build scripts look for"]
                + sorted({n.attrs["why"] for n in apts if n.attrs.get("why")})[:4],
                "commands": [
                    ["apt-get", "update"],
                    ["apt-get", "install", "-y", "--no-install-recommends", *[n.name for n in apts]],
                    ["rm", "-rf", Glob("/var/lib/apt/lists/*")],
                ],
            }
        )
    components = sorted((n for n in graph.of_type("TOOL") if n.action == COMPONENT_ACTION), key=lambda n: n.name)
    if components:
        steps.append(
            {
                "op": "RUN",
                "head": None,
                "nodes": components,
                "comments": [
                    "toolchain components: rustup's on an official image, Debian's package on a Debian toolchain"
                ]
                + _where(components),
                "commands": [["sh", "-c", component_script([n.name for n in components])]],
            }
        )
    nextest = graph.nodes.get(NEXTEST)
    if nextest is not None:
        steps.append(
            {
                "op": "RUN",
                "head": None,
                "nodes": [nextest],
                "comments": ["the test runner CI uses"] + _where([nextest]),
                "commands": [["cargo", "install", "--locked", nextest.attrs["spec"]]],
            }
        )
    return steps


def _dependency_steps(graph: DepGraph) -> list[dict[str, Any]]:
    """The manifests alone, then the crates.io fetch they allow."""
    m = graph.nodes[MANIFESTS]
    locked = LOCK in graph.nodes
    steps = _manifest_copies(list(m.attrs["files"]), m.attrs.get("lock"), m.attrs.get("cargo_config"))
    steps[-1]["nodes"] = [m]
    fetch: dict[str, Any] = {
        "op": "RUN",
        "head": None,
        "nodes": [m],
        "comments": [
            "crates.io dependencies"
            + (" exactly as Cargo.lock pins them" if locked else " (no Cargo.lock: resolved now, not reproducible)")
        ],
        "commands": _fetch_commands(list(m.attrs.get("stubs") or []), locked),
    }
    _keep_in_cache(graph, fetch, REGISTRY_KEEP, cache_id("registry"), "the downloaded crates", "downloads")
    steps.append(fetch)
    return steps


def _keep_in_cache(graph: DepGraph, step: dict[str, Any], keep: str, cache: str, what: str, does: str) -> None:
    """Where the plan builds under BuildKit, ``step`` keeps the folder ``keep`` in the cache
    mount ``cache`` between builds, and its comment says so."""
    if not graph.nodes[RUNTIME].attrs.get("cache_mounts"):
        return
    step["mounts"], step["shell"] = kept_between_builds(step["commands"], keep, cache)
    step["comments"].append(
        f"BuildKit keeps {what} in a cache between builds (copied in before, copied back after), "
        f"so a rebuild {does} only what changed; this line needs BuildKit, Docker's default builder"
    )


def _source_steps(graph: DepGraph) -> list[dict[str, Any]]:
    """The source, its compiled tests, the project's own commands and the test command."""
    steps: list[dict[str, Any]] = [{"op": "COPY", "src": ["."], "dest": ".", "nodes": [], "comments": ["the source"]}]
    tgt = graph.nodes[TARGET]
    build: dict[str, Any] = {
        "op": "RUN",
        "head": None,
        "nodes": [tgt],
        "comments": ["compile the crates and their tests"],
        "commands": [list(tgt.attrs["build_command"])],
    }
    _keep_in_cache(graph, build, "target", cache_id("target", tgt.attrs.get("project")), "target/", "compiles")
    steps.append(build)
    for n in (x for x in graph.topological() if x.action == "run"):
        steps.append(
            {"op": "RUN", "head": None, "nodes": [n], "commands": [list(n.attrs["command"])], "comments": _where([n])}
        )
    steps.append({"op": "CMD", "argv": list(tgt.attrs["command"]), "nodes": [tgt], "comments": ["the tests"]})
    return steps


def plan_steps(graph: DepGraph) -> list[dict[str, Any]]:
    steps = _toolchain_steps(graph)
    steps.append({"op": "WORKDIR", "path": WORKDIR, "nodes": [], "comments": []})
    steps += _dependency_steps(graph)
    steps += _source_steps(graph)
    return steps


def compile_dockerfile(graph: DepGraph) -> CompiledDockerfile:
    env = _environment()
    template = env.get_template("Dockerfile.j2")
    steps = plan_steps(graph)
    _validate_steps(steps)
    text = template.render(steps=steps)
    verify_dockerfile(text, steps)
    module = template.make_module({"steps": steps})
    instruction = module.instruction  # type: ignore[attr-defined]  # a macro of the template
    lines = [
        DockerLine(str(instruction(s)), tuple(sorted({n.id for n in s["nodes"]})), tuple(s["comments"])) for s in steps
    ]
    return CompiledDockerfile(text, lines)


_LAYER = {"FROM": "base", "ENV": "env", "WORKDIR": "source", "CMD": "target"}


def compile_snippets(graph: DepGraph) -> list[CompileSnippet]:
    out = []
    after_source = False
    for step in plan_steps(graph):
        op = step["op"]
        if op == "COPY":
            layer = "source" if step["src"] == ["."] else "manifests"
            after_source = after_source or layer == "source"
        elif op == "RUN":
            first = step["commands"][0][:1]
            layer = (
                "project"
                if after_source
                else "system"
                if first == ["apt-get"]
                else "tools"
                if first == ["cargo"] and step["commands"][0][1:2] == ["install"]
                else "dependencies"
            )
        else:
            layer = _LAYER[op]
        out.append(CompileSnippet(layer, step))
    return out
