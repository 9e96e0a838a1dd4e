"""The ecosystem registry: which ecosystems setupbot supports, and which one leads a repository's
plan (docs/architecture.md, "Ecosystems"; the contract is ``bot.ecosystems.base.Ecosystem``).

Adding an ecosystem is one subpackage ``bot/ecosystems/<name>/`` and one line in ``REGISTRY``
below. The core asks ``select(repo)`` and never names an ecosystem itself.

A repository that no registered ecosystem recognises is not planned at all: ``select`` says
which other ecosystems' markers it found ("not supported yet: found package.json, go.mod"),
and the commands turn that into ``bot.errors.NotSupported`` (no Dockerfile, no pull request).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.ecosystems.base import (
    CompileSnippet,
    Detection,
    Ecosystem,
    ImageFamily,
    TestRunner,
    basename,
    depth,
    list_files,
    matches,
    own_input_files,
)
from bot.ecosystems.python import PythonEcosystem
from bot.ecosystems.rust import RustEcosystem
from bot.errors import ConfigError, NotSupported

# name -> the ecosystem. Order breaks ties between equally confident detections.
REGISTRY: dict[str, Ecosystem] = {
    "python": PythonEcosystem(),
    "rust": RustEcosystem(),
}

# A detection under this confidence (loose source files only) does not count when another
# ecosystem's manifest sits at the repository's root: a Node project's scripts/build.py does
# not make it a Python project.
MIN_CONFIDENCE = 0.5

# Markers of ecosystems setupbot recognises but does not support (yet), with their names. A
# marker a registered ecosystem claims (its ``markers``) is not foreign, so registering Rust
# takes Cargo.toml off this list by itself.
FOREIGN_MARKERS: dict[str, str] = {
    "package.json": "Node.js",
    "deno.json": "Deno",
    "go.mod": "Go",
    "Cargo.toml": "Rust",
    "pom.xml": "Java (Maven)",
    "build.gradle": "Java/Kotlin (Gradle)",
    "build.gradle.kts": "Java/Kotlin (Gradle)",
    "build.sbt": "Scala (sbt)",
    "Gemfile": "Ruby",
    "composer.json": "PHP",
    "*.csproj": ".NET",
    "*.fsproj": ".NET",
    "*.sln": ".NET",
    "mix.exs": "Elixir",
    "rebar.config": "Erlang",
    "Package.swift": "Swift",
    "pubspec.yaml": "Dart",
    "stack.yaml": "Haskell",
    "*.cabal": "Haskell",
    "dune-project": "OCaml",
    "CMakeLists.txt": "C/C++ (CMake)",
    "meson.build": "C/C++ (Meson)",
    "Project.toml": "Julia",
}
# How deep foreign markers are looked for (the root and the first level: a frontend/ or cmd/).
FOREIGN_DEPTH = 1


@dataclass
class Selection:
    """Which ecosystems a repository is, most confident first, and the foreign markers found.
    ``lead`` makes the plan; every other ecosystem in ``detections`` joins it
    (``Ecosystem.extend_plan``)."""

    repo: Path
    detections: list[Detection] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)  # repository-relative marker paths
    dropped: list[Detection] = field(default_factory=list)  # under MIN_CONFIDENCE next to a foreign manifest
    registry: Mapping[str, Ecosystem] = field(default_factory=lambda: REGISTRY)

    @property
    def supported(self) -> bool:
        return bool(self.detections)

    @property
    def names(self) -> list[str]:
        return [d.ecosystem for d in self.detections]

    @property
    def lead(self) -> Ecosystem | None:
        return self.registry[self.detections[0].ecosystem] if self.detections else None

    @property
    def joining(self) -> list[Ecosystem]:
        return [self.registry[d.ecosystem] for d in self.detections[1:]]

    def foreign_names(self) -> list[str]:
        """The ecosystems the foreign markers belong to, in marker order, once each."""
        out: list[str] = []
        for rel in self.foreign:
            for pattern, title in FOREIGN_MARKERS.items():
                if fnmatch.fnmatchcase(basename(rel), pattern) and title not in out:
                    out.append(title)
        return out

    def not_supported_message(self) -> str:
        """ "not supported yet: found package.json, go.mod" (or that nothing was recognised)."""
        if self.foreign:
            shown = self.foreign[:8]
            more = f" and {len(self.foreign) - len(shown)} more" if len(self.foreign) > len(shown) else ""
            return (
                f"not supported yet: found {', '.join(shown)}{more} "
                f"({', '.join(self.foreign_names())}); setupbot supports {', '.join(self.registry)}"
            )
        return (
            f"not supported yet: no marker of a supported ecosystem ({', '.join(self.registry)}) "
            "and no known manifest of another"
        )

    def error(self) -> NotSupported:
        return NotSupported(
            f"{self.repo.name}: {self.not_supported_message()}",
            "No Dockerfile was written and no pull request opened. setupbot plans only "
            "repositories of a supported ecosystem (`setupbot rollout --only` filters on them).",
            markers=list(self.foreign),
        )

    def to_json(self) -> dict[str, object]:
        return {
            "ecosystems": [d.to_json() for d in self.detections],
            "foreign_markers": list(self.foreign),
            "supported": self.supported,
        }


def foreign_markers(files: Iterable[str], registry: Mapping[str, Ecosystem] | None = None) -> list[str]:
    """The foreign-ecosystem marker paths among ``files`` (repository-relative), root first;
    markers a registered ecosystem claims are not foreign."""
    registry = REGISTRY if registry is None else registry
    claimed = [p for eco in registry.values() for p in eco.markers]
    patterns = [p for p in FOREIGN_MARKERS if p not in claimed]
    found = [
        f
        for f in files
        if depth(f) <= FOREIGN_DEPTH and matches(basename(f), patterns) and not matches(basename(f), claimed)
    ]
    order = list(FOREIGN_MARKERS)

    def rank(f: str) -> tuple[int, int, str]:
        return (depth(f), next(i for i, p in enumerate(order) if fnmatch.fnmatchcase(basename(f), p)), f)

    return sorted(found, key=rank)


def detect_all(repo: Path | str, registry: Mapping[str, Ecosystem] | None = None) -> list[Detection]:
    """Every registered ecosystem's detection of the checkout ``repo``, most confident first
    (registry order breaks ties). An ecosystem whose detect() fails is left out, never fatal."""
    registry = REGISTRY if registry is None else registry
    return _ranked(registry, lambda eco: eco.detect(Path(repo)))


def detect_files(files: Sequence[str], registry: Mapping[str, Ecosystem] | None = None) -> list[Detection]:
    """``detect_all`` from repository-relative file names (a repository seen through an API)."""
    registry = REGISTRY if registry is None else registry
    return _ranked(registry, lambda eco: eco.detect_files(files))


def _ranked(registry: Mapping[str, Ecosystem], detect: Callable[[Ecosystem], Detection | None]) -> list[Detection]:
    order = {name: i for i, name in enumerate(registry)}
    found = []
    for eco in registry.values():
        try:
            d = detect(eco)
        except (OSError, ValueError):
            d = None
        if d is not None:
            found.append(d)
    return sorted(found, key=lambda d: (-d.confidence, order.get(d.ecosystem, len(order))))


def select(repo: Path | str, registry: Mapping[str, Ecosystem] | None = None) -> Selection:
    """The ecosystems of the checkout ``repo`` and the foreign markers found in it (file names
    only: nothing is read or run)."""
    registry = REGISTRY if registry is None else registry
    root = Path(repo).resolve()
    return _selection(root, detect_all(root, registry), list_files(root, max_depth=FOREIGN_DEPTH), registry)


def select_files(name: str, files: Sequence[str], registry: Mapping[str, Ecosystem] | None = None) -> Selection:
    """``select`` for a repository known by its file names only (``name`` labels it)."""
    registry = REGISTRY if registry is None else registry
    return _selection(Path(name), detect_files(files, registry), list(files), registry)


def _selection(
    root: Path, detections: list[Detection], files: list[str], registry: Mapping[str, Ecosystem]
) -> Selection:
    foreign = foreign_markers(files, registry)
    dropped: list[Detection] = []
    if any(depth(f) == 0 for f in foreign):
        dropped = [d for d in detections if d.confidence < MIN_CONFIDENCE]
        detections = [d for d in detections if d.confidence >= MIN_CONFIDENCE]
    return Selection(root, detections, foreign, dropped, registry)


def make_plan(
    repo: Path | str,
    settings: Any = None,
    available_versions: Sequence[str] | None = None,
    *,
    selection: Selection | None = None,
    **options: Any,
) -> Any:
    """The plan of ``repo`` through the registry: the lead ecosystem makes it, every other
    detected ecosystem joins it (``extend_plan``), and ``graph.meta["ecosystems"]`` names them.
    ``available_versions``: the runtime versions the engine offers for the lead's image family
    (the loop passes them positionally, as it did to ``bot.graph.make_plan``); None lets the
    lead ask (``available_versions(settings)``). A repository no registered ecosystem
    recognises raises ``NotSupported``: nothing is planned."""
    selection = selection if selection is not None else select(repo)
    lead = selection.lead
    if lead is None:
        raise selection.error()
    if available_versions is not None:
        options["available_versions"] = list(available_versions)
    plan = lead.make_plan(Path(repo), settings, **options)
    for eco in selection.joining:
        eco.extend_plan(plan, settings)
    plan.graph.meta["ecosystems"] = selection.names
    return plan


def input_files(repo: Path | str, registry: Mapping[str, Ecosystem] | None = None) -> list[str]:
    """The files every ecosystem of ``repo`` names as its plan's inputs (``NamesInputs``),
    sorted: what ``bot.incremental`` hashes beside the shared scan's files."""
    selection = select(repo, registry)
    return sorted({rel for eco in [selection.lead, *selection.joining] for rel in own_input_files(eco, Path(repo))})


def unsupported_reason(repo: str, root_files: Sequence[str]) -> str:
    """Why ``setupbot rollout`` skips a repository seen by its root file names: "not supported
    yet: found ..." when they show only foreign manifests; "" otherwise. A root that names
    nothing at all is unknown, not foreign (the listing is partial): such a repository goes
    ahead, and its first run answers."""
    found = select_files(repo, root_files)
    return found.not_supported_message() if not found.supported and found.foreign else ""


def plan_ecosystems(plan_json: Any) -> list[str]:
    """The ecosystems a plan (``Plan.to_json()`` or its graph's JSON) was made by, lead first;
    [] for a plan recorded before the registry named them."""
    data = plan_json if isinstance(plan_json, dict) else {}
    graph = data.get("graph") if isinstance(data.get("graph"), dict) else data
    names = (graph.get("meta") or {}).get("ecosystems") if isinstance(graph, dict) else None
    return [str(n) for n in names] if isinstance(names, list) else []


def devcontainer_for(
    config: dict[str, Any],
    plan_json: Any = None,
    names: Iterable[str] | None = None,
    registry: Mapping[str, Ecosystem] | None = None,
) -> dict[str, Any]:
    """The devcontainer.json dict with the extensions and settings of each ecosystem of the
    plan (``names``, default: the plan JSON's ``plan_ecosystems``) added through
    ``Ecosystem.devcontainer``; names no longer registered are left out. The shape of
    ``bot.outputs``' ``customise_devcontainer`` hook."""
    registry = REGISTRY if registry is None else registry
    names = plan_ecosystems(plan_json) if names is None else names
    for name in names:
        eco = registry.get(name)
        if eco is not None:
            config = eco.devcontainer(config, plan_json)
    return config


def parse_only(text: str | Iterable[str] | None, registry: Mapping[str, Ecosystem] | None = None) -> list[str]:
    """``--only python,rust`` as a list of registered names; an unknown name is a ConfigError
    that lists the registered ones. None or "" means no filter ([])."""
    registry = REGISTRY if registry is None else registry
    if not text:
        return []
    parts = text.split(",") if isinstance(text, str) else [p for t in text for p in str(t).split(",")]
    names = [p.strip().lower() for p in parts if p.strip()]
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise ConfigError(
            f"--only: unknown ecosystem{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}",
            f"Registered ecosystems: {', '.join(registry)}.",
        )
    return list(dict.fromkeys(names))


__all__ = [
    "FOREIGN_MARKERS",
    "MIN_CONFIDENCE",
    "REGISTRY",
    "CompileSnippet",
    "Detection",
    "Ecosystem",
    "ImageFamily",
    "Selection",
    "TestRunner",
    "detect_all",
    "detect_files",
    "devcontainer_for",
    "foreign_markers",
    "input_files",
    "list_files",
    "make_plan",
    "parse_only",
    "plan_ecosystems",
    "select",
    "select_files",
    "unsupported_reason",
]
