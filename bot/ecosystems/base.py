"""The ecosystem seam: what the core asks of a language ecosystem (Python today, Rust next).

In the spirit of repo2docker's BuildPack (docs/architecture.md, "Ecosystems"; issue 17 item 4):
an ecosystem says whether a repository is one of its own (``detect``), reads what the repository
says about itself (``scan``), turns that into DepGraph nodes (``make_plan`` when it leads the plan,
``extend_plan`` when it joins a plan another ecosystem leads), names the base-image family and
how a version is chosen, gives the Dockerfile fragments its nodes compile to, the test runner and
how its results are parsed, its own diagnose rules and its editor extensions.

The core knows no ecosystem by name: it asks the registry (``bot.ecosystems``). Adding one is a
subpackage ``bot/ecosystems/<name>/`` with a class that satisfies ``Ecosystem`` plus one line in
``REGISTRY``.

This module is the contract. Members are only ever added, never renamed (other ecosystems build
on it). It imports nothing from the pipeline stages, so every layer may import it.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from bot.evidence.files import SKIP_DIRS as EVIDENCE_SKIP_DIRS

if TYPE_CHECKING:  # types only: the seam sits below the stages it describes
    from bot.compile.plan import Plan
    from bot.graph.model import DepGraph
    from bot.junit import TestResults
    from bot.loop.diagnose import Signature


# Folders never looked into when detecting: dependencies, caches and virtualenvs hold other
# projects' manifests (a node_modules/ full of package.json says nothing about the repository).
# The evidence walk's own list, plus build output and vendored code of other ecosystems
# (cargo's target/, go's vendor/) and setupbot's own output folders.
SKIP_DIRS = frozenset(EVIDENCE_SKIP_DIRS | {"target", "vendor", ".devcontainer", ".setupbot"})
# How deep and how wide detection looks: manifests of a workspace's members sit one or two
# levels down; a repository with more files than this is judged on the ones seen first.
MAX_DEPTH = 3
MAX_FILES = 20000


@dataclass(frozen=True)
class Detection:
    """An ecosystem's claim on a repository.

    ``markers``: repository-relative paths that made the call (``pyproject.toml``,
    ``crates/a/Cargo.toml``), sorted, for the report and the "not supported" message.
    ``confidence``: 0..1. 1.0 a manifest of the ecosystem at the root; about 0.6 a manifest
    further down or test files only; about 0.3 loose source files only. The registry lets the
    most confident detection lead the plan and drops detections under
    ``bot.ecosystems.MIN_CONFIDENCE`` when another ecosystem's manifest is at the root.
    ``reason``: one sentence for the report ("pyproject.toml at the root").
    """

    ecosystem: str
    markers: tuple[str, ...]
    confidence: float
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "ecosystem": self.ecosystem,
            "markers": list(self.markers),
            "confidence": round(self.confidence, 2),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class ImageFamily:
    """The official base images of an ecosystem's runtime.

    ``name``: the runtime node's name stem and the image repository (``python``, ``rust``).
    ``pattern``: the tag pattern with ``{version}`` (``python:{version}-slim``).
    ``versions``: the official versions offered when no engine answers, oldest first.
    ``choice``: one sentence on how a version is chosen (the report and docs quote it).
    """

    name: str
    pattern: str
    versions: tuple[str, ...]
    choice: str = ""

    def image(self, version: str) -> str:
        """The image reference for ``version`` (``python:3.12-slim``)."""
        return self.pattern.format(version=version)


@dataclass(frozen=True)
class TestRunner:
    """How an ecosystem runs and collects tests, and in what form the results come back.

    ``command`` / ``collect_command``: the default argv (no shell) when the evidence names
    nothing better. ``result_format``: ``junit`` (an XML file the runner writes), ``libtest``
    (cargo's text output), ...; ``results_file``: where a file-based format is written inside
    the container ("" for a text format parsed from the output).
    """

    __test__ = False  # not a pytest class

    command: tuple[str, ...]
    collect_command: tuple[str, ...]
    result_format: str
    results_file: str = ""


@dataclass(frozen=True)
class CompileSnippet:
    """One Dockerfile template fragment an ecosystem contributes, in the step shape the one
    template (templates/Dockerfile.j2, through ``bot.compile.dockerfile``) renders:
    ``{"op": "RUN", "commands": [[argv], ...], "head": 4, "nodes": [Node, ...],
    "comments": [...]}`` (ops: FROM, ENV, RUN, COPY, WORKDIR, CMD). Commands are argv lists,
    never shell text. ``layer`` places it among the cache layers: ``base``, ``env``,
    ``system``, ``manifests``, ``dependencies``, ``source``, ``project``, ``tools``, ``target``,
    ``dev`` (the development stage after the tests' CMD: what only the editor uses).
    """

    layer: str
    step: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Ecosystem(Protocol):
    """One language ecosystem behind the seam. Implementations are plain classes (no base class
    needed); ``bot.ecosystems.REGISTRY`` holds one instance of each.

    Data members
    ------------
    ``name``: the registry key and the word ``--only`` takes (``python``, ``rust``).
    ``title``: how reports name it (``Python``, ``Rust``).
    ``markers``: file names (``Cargo.toml``) or glob patterns (``*.csproj``) that signal the
        ecosystem; the registry uses them to tell a foreign repository what it found.
    ``image_family``: the base-image family (``ImageFamily``).
    ``test_runner``: the default test runner and its result format (``TestRunner``).
    ``devcontainer_extensions``: VS Code extension ids the devcontainer.json gets
        (``ms-python.python``, ``rust-lang.rust-analyzer``).
    """

    name: str
    title: str
    markers: tuple[str, ...]
    image_family: ImageFamily
    test_runner: TestRunner
    devcontainer_extensions: tuple[str, ...]

    def detect(self, repo: Path) -> Detection | None:
        """Whether the checkout ``repo`` is (partly) this ecosystem's, from file names only:
        nothing is read or executed here. Implementations normally return
        ``self.detect_files(list_files(repo))``. None when nothing is recognised."""
        ...

    def detect_files(self, files: Sequence[str]) -> Detection | None:
        """The same judgement from repository-relative posix file names alone (``Cargo.toml``,
        ``crates/a/Cargo.toml``), for a repository seen through an API with no checkout
        (``setupbot rollout`` sees only the root listing). ``files`` may be partial: judge what
        is there."""
        ...

    def scan(self, repo: Path, output_dir: str | None = None) -> Any:
        """Evidence collection: what the repository says about itself, read statically through
        the safe reader. Returns the ecosystem's evidence object (for Python
        ``bot.evidence.model.Evidence``). Malformed inputs are warnings, never exceptions;
        ``output_dir`` (output.dir) holds setupbot's own files, which are never evidence."""
        ...

    def contribute(self, evidence: Any, graph: DepGraph, warnings: list[Any]) -> None:
        """Graph contributions: add this ecosystem's nodes (RUNTIME, PACKAGE, TOOL, SYSTEMLIB,
        SERVICE, CONFIG) and prerequisite edges to ``graph`` from ``evidence``; append
        ``bot.evidence.model.ScanWarning``s to ``warnings``. Services go through the shared
        service catalogue, never an ecosystem's own table."""
        ...

    def available_versions(self, settings: Any) -> list[str]:
        """The runtime versions this machine can offer (local images and stand-ins when the
        engine answers, else ``image_family.versions``), oldest first."""
        ...

    def choose_version(self, evidence: Any, available: Sequence[str]) -> Any:
        """The runtime version for the image: hard constraints must hold, then the developer's
        pin, then the newest version the project tests, then the newest available. Returns an
        object with ``version``, ``satisfied``, ``reason`` and ``warnings`` (for Python
        ``bot.graph.runtime.RuntimeChoice``)."""
        ...

    def make_plan(self, repo: Path, settings: Any = None, **options: Any) -> Plan:
        """The whole plan when this ecosystem leads: scan -> graph -> runtime -> resolution
        -> target. ``options`` are planning knobs passed through from the CLI and the loop:
        ``available_versions`` (the runtime versions the engine offers; None: ask
        ``available_versions(settings)``) for every ecosystem, and the ecosystem's own (for
        Python: ``available_pythons``, ``resolve``, ``registry``, ``resolve_timeout``,
        ``index_url``); an ecosystem ignores knobs it does not know."""
        ...

    def extend_plan(self, plan: Plan, settings: Any = None) -> None:
        """Join a plan another ecosystem leads (a Python package that builds a Rust extension:
        the Python plan gets a Rust toolchain). Adds nodes and edges to ``plan.graph`` and
        warnings to ``plan.warnings``; does nothing when there is nothing to add."""
        ...

    def compile_snippets(self, graph: DepGraph) -> list[CompileSnippet]:
        """Install/compile snippets: the Dockerfile fragments this ecosystem's nodes in
        ``graph`` compile to, in order. They are rendered by the one Dockerfile template;
        code never concatenates Dockerfile text."""
        ...

    def test_command(self, evidence: Any, graph: DepGraph) -> tuple[list[str], list[tuple[str, int | None, str]]]:
        """The test argv for the TARGET node and the evidence (file, line, detail) for it."""
        ...

    def parse_results(self, text: str) -> TestResults:
        """Per-test outcomes from the runner's result output (``test_runner.result_format``):
        test id -> passed / failed / error / skipped. Malformed input gives empty results,
        never an exception."""
        ...

    def diagnose(self, output: str) -> list[Signature]:
        """This ecosystem's diagnose rules applied to a failure log: the signatures found,
        earliest first, one per (kind, key). Shared kinds (missing_header, missing_command,
        connection_refused) keep their names so the repair knowledge applies across
        ecosystems."""
        ...

    def devcontainer(self, config: dict[str, Any], plan: Any) -> dict[str, Any]:
        """Devcontainer extensions: the devcontainer.json dict with this ecosystem's editor
        extensions and settings added (returns a new dict; the input is not changed). ``plan``
        is the plan's JSON (``Plan.to_json()``) when the outputs are written, may be None."""
        ...


@dataclass
class SetupOutcome:
    """What an ecosystem's own setup loop hands back to the pipeline: the same three things the
    shared loop and the verification give it, so the outputs, the run records and the exit code
    are made the one way. ``plan``: the plan as the loop left it, in the shape the outputs read
    (``test_command``, ``base_image``, ``graph``, ``dockerfile``, ``to_json()``, ...);
    ``run_record``: a ``bot.loop.records.RunRecord``; ``verification``: an object with a
    ``verdict`` dict (``tier``, ``reasons``) and ``to_json()``, or None when nothing was judged."""

    plan: Any = None
    run_record: Any = None
    verification: Any = None


@runtime_checkable
class DrivesOwnSetup(Protocol):
    """Optional, next to ``Ecosystem``: an ecosystem whose plans the shared setup loop cannot
    drive (that loop builds, collects with pytest and repairs through Python's atoms) brings its
    own loop. The pipeline asks the lead ecosystem for it (``own_setup_loop``) and runs the
    shared loop otherwise. Not a member of ``Ecosystem``, so ecosystems without one need nothing.

    ``setup`` plans, builds, runs the tests, repairs and replays from scratch within
    ``settings.budgets``; it catches ``Interrupted`` and returns the record as it stands (status
    ``interrupted``), and leaves the engine's containers to the caller's ``engine.clean``.
    ``verify=False`` (``--no-verify``) returns no verdict."""

    def setup(self, repo: Path, settings: Any, engine: Any, *, verify: bool = True) -> SetupOutcome: ...


def own_setup_loop(ecosystem: Any) -> Callable[..., SetupOutcome] | None:
    """The ecosystem's own setup loop (``DrivesOwnSetup.setup``), or None: the shared one."""
    return ecosystem.setup if isinstance(ecosystem, DrivesOwnSetup) else None


@runtime_checkable
class NamesInputs(Protocol):
    """Optional, next to ``Ecosystem``: the files of ``repo`` this ecosystem's plan reads
    (manifests, locks, toolchain files), repository-relative posix paths. ``bot.incremental``
    hashes them beside what the shared scan reads, so that a changed Cargo.toml makes the next
    run redo the work; an ecosystem without it adds nothing to that hash."""

    def input_files(self, repo: Path) -> list[str]: ...


def own_input_files(ecosystem: Any, repo: Path) -> list[str]:
    """The files ``ecosystem`` names as its plan's inputs (``NamesInputs``), or []."""
    return list(ecosystem.input_files(repo)) if isinstance(ecosystem, NamesInputs) else []


def list_files(
    repo: Path, *, max_depth: int = MAX_DEPTH, limit: int = MAX_FILES, skip: Callable[[str], bool] | None = None
) -> list[str]:
    """Repository-relative file names (posix), breadth by depth: the root's files first.
    Symlinks are listed by name and never followed (SECURITY.md S13); dependency and cache
    folders (``SKIP_DIRS``) and hidden folders are not entered. Nothing is read."""
    root = Path(repo)
    out: list[str] = []
    level = [("", root)]
    for _depth in range(max_depth + 1):
        nxt: list[tuple[str, Path]] = []
        for rel, path in level:
            try:
                with os.scandir(path) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                name = f"{rel}{entry.name}"
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if is_dir:
                    if entry.name in SKIP_DIRS or entry.name.startswith(".") or (skip and skip(name)):
                        continue
                    nxt.append((name + "/", Path(entry.path)))
                else:
                    out.append(name)
                    if len(out) >= limit:
                        return out
        if not nxt:
            break
        level = nxt
    return out


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether the file name ``name`` matches one of ``patterns`` (names or globs)."""
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def basename(rel: str) -> str:
    return rel.rsplit("/", 1)[-1]


def depth(rel: str) -> int:
    return rel.count("/")
