"""make_plan: evidence -> DepGraph -> runtime -> resolution -> Dockerfile. The plan is a view over
the graph and compiles its Dockerfile, so it sits in the compile layer, above the graph it reads."""

from __future__ import annotations

import logging
import re
import shlex
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import Version

from bot import safefs
from bot.atoms import Atom
from bot.compile.dockerfile import compile_dockerfile
from bot.errors import ImageUnavailableError
from bot.evidence import scan_repository
from bot.evidence.files import MAX_BYTES
from bot.evidence.imports import REMOVED_STDLIB
from bot.evidence.model import Evidence, ScanWarning, ServiceRequirement
from bot.graph.apply import project_compiles
from bot.graph.build import PROJECT, build_graph
from bot.graph.era import reference_date
from bot.graph.lock import LOCK_NAME, LOCK_NODE, MARKER_LINE, apply_lock, inputs_hash, parse_lock
from bot.graph.mapping import DATA, Registry, import_key
from bot.graph.model import DepGraph, Node
from bot.graph.native_lock import use_native_lock
from bot.graph.resolve import Resolution, names_in_error, sdist_only, uv_compile, wheel_resolution
from bot.graph.runtime import OFFICIAL_PYTHONS, RuntimeChoice, choose_python
from bot.graph.specs import (
    constraint_specs,
    install_specs,
    planned_test_command,
    service_requirements,
    untargeted_test_imports,
)

log = logging.getLogger(__name__)
Warning = ScanWarning  # noqa: A001 - the contract's name for (file, line, message)


@dataclass
class Plan:
    """A view over one DepGraph: every fact below is read from the graph when asked, so a kept
    repair (a graph change) or an undo (a restored graph) is what the plan says at once. The
    setup loop holds its graph only through this view (issue 17)."""

    repo: Path
    graph: DepGraph
    warnings: list[ScanWarning] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def python(self) -> str:
        return self.graph.runtime.attrs["version"]

    @property
    def base_image(self) -> str:
        return self.graph.runtime.attrs["base_image"]

    @property
    def base_image_digest(self) -> str | None:
        return self.graph.runtime.attrs.get("base_digest") or None

    @property
    def base_image_origin(self) -> str:
        return self.graph.runtime.attrs.get("base_origin") or "not resolved"

    @property
    def test_command(self) -> list[str]:
        return list(self.graph.target.attrs["command"])

    @property
    def repaired_test_command(self) -> list[str] | None:
        """The test command a kept repair set (it wins over the configured one), else None."""
        t = self.graph.target
        return list(t.attrs["command"]) if t.attrs.get("command_from_repair") else None

    @property
    def collect_command(self) -> list[str]:
        return list(self.graph.target.attrs["collect_command"])

    @property
    def services(self) -> list[ServiceRequirement]:
        return service_requirements(self.graph)

    @property
    def post_create_command(self) -> list[str] | None:
        """What the devcontainer runs once it is created, or None (then nothing). A project that
        compiles its own extension is installed editable with the extension built into the
        checkout, and the devcontainer mounts the host's checkout over it, where no extension is
        built: the tests could not import it. So it is built again there, as the container's user
        (pip then installs into the user's site, which comes first). Several commands run in
        order, each only when the one before passed."""
        commands: list[list[str]] = []
        proj = self.graph.nodes.get(PROJECT)
        if proj is not None and not proj.attrs.get("deps_only") and project_compiles(self.graph):
            commands.append(["python", "-m", "pip", "install", "--no-deps", "-e", "."])
        # a module a repair compiled in place (a Cython module nothing else builds) is likewise
        # under the mount: it is compiled there again
        commands += [
            list(n.attrs["command"])
            for n in self.graph.topological()
            if n.action == "run" and n.attrs.get("in_checkout") and n.attrs.get("command")
        ]
        if not commands:
            return None
        if len(commands) == 1:
            return commands[0]
        return ["sh", "-c", " && ".join(shlex.join(c) for c in commands)]

    @property
    def env(self) -> dict[str, str]:
        out = {}
        for n in self.graph.of_type("CONFIG"):
            if n.attrs.get("kind") in ("test-env", "env"):
                out[n.name] = str(n.attrs.get("value", ""))
        return dict(sorted(out.items()))

    @property
    def dockerfile(self):
        return compile_dockerfile(self.graph)

    def to_json(self) -> dict[str, Any]:
        df = self.dockerfile
        return {
            "repo": str(self.repo),
            "python": self.python,
            "base_image": self.base_image,
            # "sha256:..." when the image came from a registry; a stand-in has none
            "base_image_digest": self.base_image_digest,
            "base_image_origin": self.base_image_origin,
            "test_command": self.test_command,
            "collect_command": self.collect_command,
            "services": [s.to_json() for s in self.services],
            "env": self.env,
            "warnings": [w.to_json() for w in self.warnings],
            "dockerfile": df.text,
            "dockerfile_lines": [ln.to_json() for ln in df.lines],
            "graph": self.graph.to_json(),
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
        }


_NOT_FOUND = re.compile(r"Because (\S+?)(?:\[[^\]]*\])? was not found in the package registry")
_BUILD_FAILED = re.compile(r"Failed to build `([^=`@ ]+)")


def _resolve(
    g: DepGraph,
    python: str,
    warnings: list[ScanWarning],
    timeout: float,
    index_url: str | None = None,
    use_cache: bool = True,
):
    """uv pip compile; a test-only dependency that does not exist on the index or cannot be built
    for this Python is left out (with a warning) and the resolution retried, so one stale test
    dependency does not cost the whole image. Runtime dependencies are never dropped."""
    dropped: list[str] = []
    total = 0.0
    for _ in range(4):
        res = uv_compile(
            install_specs(g),
            python,
            timeout=timeout,
            index_url=index_url,
            constraints=constraint_specs(g),
            use_cache=use_cache,
        )
        total += res.seconds
        res.seconds = total
        if res.ok or res.skipped:
            return res, dropped
        m = _NOT_FOUND.search(res.error) or _BUILD_FAILED.search(res.error)
        node = g.nodes.get(f"package:{canonicalize_name(m.group(1))}") if m else None
        if m is None or node is None or node.action not in ("pip", "repair-pip") or node.attrs.get("group") == "main":
            return res, dropped
        why = "is not on the package index" if "not found" in m.group(0) else f"does not build for Python {python}"
        node.action = None
        node.state = "MISSING"
        node.attrs["dropped"] = why
        node.add_evidence("uv pip compile", None, f"{node.name} {why}; left out")
        src = next((e for e in node.evidence if e[0] not in ("uv pip compile",)), (".", None, ""))
        warnings.append(ScanWarning(src[0], src[1], f"test dependency {node.name} {why}; left out of the image"))
        dropped.append(node.name)
    return res, dropped


def _numpy2_guard(g: DepGraph, pins: dict[str, str], python: str, warnings: list[ScanWarning]) -> bool:
    """numpy>=2 next to a distribution built against NumPy 1 fails at import ("numpy.dtype size
    changed"): constrain numpy<2, the way the project's own lock or CI would have had it."""
    import json

    from packaging.version import InvalidVersion, Version

    numpy = pins.get("numpy")
    if not numpy or "config:constraint:numpy<2" in g.nodes:
        return False
    try:
        if Version(numpy).major < 2:
            return False
        table = {k: v for k, v in json.loads((DATA / "numpy2_abi.json").read_text()).items() if not k.startswith("_")}
        old = sorted(n for n, first in table.items() if n in pins and Version(pins[n]) < Version(first))
    except (InvalidVersion, ValueError, OSError):
        return False
    if not old:
        return False
    why = f"{old[0]}=={pins[old[0]]} is built against NumPy 1 (resolution picked numpy {numpy})"
    g.apply_atom(Atom("pip_constraint", {"constraints": ["numpy<2"]}), [("uv pip compile", None, why)])
    warnings.append(ScanWarning(".", None, f"numpy<2: {why}"))
    return True


def _add_compiler(g: DepGraph, evidence: tuple[str, int | None, str]) -> None:
    be = g.add(Node("systemlib:build-essential", "SYSTEMLIB", "build-essential", "SATISFIED", action="apt"))
    be.add_evidence(*evidence)
    g.edge(be.id, "runtime:python")
    for n in g.of_type("PACKAGE"):
        if n.action in ("pip", "project", "repair-pip"):
            g.edge(n.id, be.id)


def _reuse_lock(repo: Path, ev: Evidence, g: DepGraph, settings: Any, warnings: list[ScanWarning]):
    """The requirements lock setupbot wrote last time, when its inputs hash is the plan's and no
    refresh was asked for; else None (with a warning saying why it was not used)."""
    output = getattr(settings, "output", None)
    out_dir = str(getattr(output, "dir", "") or ".devcontainer").strip("/")
    rel = f"{out_dir}/{LOCK_NAME}"
    # setupbot's own output, so the evidence reader (RepoFiles) leaves it out on purpose: it is
    # read here through the safe reader, as the previous result, never as evidence
    try:
        text = safefs.read_text(repo, rel, max_bytes=MAX_BYTES, errors="strict")
    except (OSError, safefs.UnsafePath, UnicodeDecodeError):
        return None
    lock = parse_lock(text)
    if lock is None or MARKER_LINE not in text.splitlines()[:8]:
        return None
    if not getattr(output, "lock", True):
        warnings.append(ScanWarning(rel, None, "output.lock is false: the version ranges are installed, not this lock"))
        return None
    if getattr(output, "refresh_lock", False):
        warnings.append(ScanWarning(rel, None, "lock refreshed on request: resolved anew"))
        return None
    if lock.inputs_hash != g.meta["inputs_hash"]:
        warnings.append(
            ScanWarning(
                rel,
                None,
                f"the lock was made from other inputs (sha256:{lock.inputs_hash}, "
                f"now sha256:{g.meta['inputs_hash']}): resolved anew and locked again",
            )
        )
        return None
    apply_lock(g, lock, rel, source="reused: its inputs are unchanged", apt_versions=lock.debs)
    return lock


def make_plan(
    repo: Path | str,
    settings: Any = None,
    available_pythons: list[str] | None = None,
    resolve: bool = True,
    registry: Registry | None = None,
    resolve_timeout: float = 120.0,
    index_url: str | None = None,
) -> Plan:
    t0 = time.monotonic()
    repo = Path(repo)
    ev = scan_repository(repo, getattr(getattr(settings, "output", None), "dir", None))
    t_scan = time.monotonic()
    warnings = list(ev.warnings)
    registry = registry if registry is not None else Registry()
    g, ev = _graph_for_the_tests_run(ev, registry, warnings)
    t_graph = time.monotonic()
    available_pythons = _offered_pythons(available_pythons)
    g.meta["available_pythons"] = sorted(available_pythons, key=lambda v: tuple(int(x) for x in v.split(".")))

    # runtime
    removed = g.target.attrs.get("removed_stdlib", [])
    choice = _choose_runtime(g, ev, available_pythons, removed, warnings, reference_date(repo, settings))
    rt = g.runtime
    _drop_untested_lock(
        g, ev, choice.version, warnings, check_wheels=resolve, timeout=resolve_timeout, index_url=index_url
    )
    _add_stdlib_backports(g, ev, removed, choice.version)

    # target
    _set_test_command(g, ev)

    # the repository's own lock is installed by its own tool, unless it is stale (issue 16)
    use_native_lock(g, warnings)
    # the lock of a previous run stands while its inputs do (issue 16)
    g.meta["inputs_hash"] = inputs_hash(g)
    reused = _reuse_lock(repo, ev, g, settings, warnings) if resolve else None
    # a refresh asks for today's resolution, not a cached one
    cached = not getattr(getattr(settings, "output", None), "refresh_lock", False)

    # resolution
    t_res = time.monotonic()
    if reused is not None:
        _apply_reused_lock(g, reused.pins, choice.version, resolve_timeout, index_url)
    elif resolve:
        _resolve_and_record(g, choice.version, warnings, resolve_timeout, index_url, cached)
    else:
        g.meta["resolution"] = {"ok": None, "skipped": "--no-resolve"}
    for n in g.of_type("PACKAGE"):
        if n.id == PROJECT:
            n.state = "SATISFIED" if rt.state == "SATISFIED" else "UNKNOWN"
    t_end = time.monotonic()
    plan = Plan(
        repo.resolve(),
        g,
        sorted(set(warnings), key=lambda w: (w.file, w.line or 0, w.message)),
        {"scan": t_scan - t0, "graph": t_graph - t_scan, "resolve": t_end - t_res, "total": t_end - t0},
    )
    replan = _Replan(
        plan, choice, available_pythons, reused is not None, settings, registry, resolve_timeout, index_url
    )
    older = _older_python_plan(replan) or _older_python_with_wheels(replan)
    if older is None:
        return plan
    older.graph.meta["available_pythons"] = g.meta["available_pythons"]  # what was offered, not asked
    return older


# uv's words when a resolution fails because of the Python version: no wheel for its ABI, a
# requires-python that excludes it, or a dependency of a dependency that only an sdist offers
# for this Python (the host never builds; an older Python is taken only if it resolves there)
_PYTHON_BOUND = re.compile(
    r"ABI tags?|current Python version|requires-python|Python ?[<>=]=?\s*3\.|Wheels are required for", re.I
)


@dataclass(frozen=True)
class _Replan:
    """What planning again for another offered Python needs: the first plan and its inputs."""

    plan: Plan
    choice: RuntimeChoice
    available: list[str]
    reused: bool
    settings: Any
    registry: Registry
    resolve_timeout: float
    index_url: str | None

    @property
    def resolution(self) -> dict[str, Any]:
        return self.plan.graph.meta.get("resolution") or {}

    def older(self) -> list[str]:
        """The offered Pythons older than the chosen one, newest first."""
        return sorted(
            (v for v in self.available if Version(v) < Version(self.choice.version)), key=Version, reverse=True
        )

    def again(self, versions: list[str]) -> Plan | None:
        """The plan for ``versions`` offered, when its dependencies resolve and its Python holds."""
        p = make_plan(
            self.plan.repo, self.settings, versions, True, self.registry, self.resolve_timeout, self.index_url
        )
        ok = (p.graph.meta.get("resolution") or {}).get("ok") and p.graph.runtime.state == "SATISFIED"
        return p if ok else None

    def moved(self, again: Plan, reason: str, evidence: tuple[str, str], why: str) -> Plan:
        """``again``, its runtime saying why it is not the chosen Python, and a warning."""
        rt = again.graph.runtime
        rt.attrs["reason"] = reason
        rt.add_evidence(evidence[0], None, evidence[1])
        again.warnings.append(
            ScanWarning(".", None, f"Python {rt.attrs['version']} instead of {self.choice.version}: {why}")
        )
        return again


def _older_python_plan(r: _Replan) -> Plan | None:
    """When the dependencies do not resolve for the chosen Python because of the Python (a
    pinned release with no wheel for it, a requires-python that excludes it), the plan for the
    newest older offered Python on which they do resolve; None when there is none."""
    error = str(r.resolution.get("error") or "")
    if r.reused or r.resolution.get("ok") is not False or not _PYTHON_BOUND.search(error):
        return None
    older = r.older()
    again = r.again(older) if older else None
    if again is None:
        return None
    last = re.sub(r"^(?:hint|error):\s*", "", error.strip().splitlines()[-1].strip())[:200]
    why = f"the dependencies do not resolve for Python {r.choice.version} ({last})"
    reason = f"the newest offered on which the dependencies resolve (not {r.choice.version}: uv said {last})"
    return r.moved(again, reason, ("uv pip compile", why), why)


# how many older Pythons, and how many pinned distributions, the wheel check asks about
_OLDER_TRIES, _WHEEL_CHECKS = 3, 8


def _older_python_with_wheels(r: _Replan) -> Plan | None:
    """The dependencies resolve for the chosen Python, but some exact pins only as source
    distributions, which the image would compile against a CPython newer than their release
    knew (lxml==4.9.1 on 3.13). When such a pin has a wheel for an older offered Python, the
    plan for the newest such Python on which everything resolves; None otherwise. A pin with no
    wheel for any Python (a pure-Python sdist) never moves the Python."""
    if r.reused or r.resolution.get("ok") is not True:
        return None
    unbuilt = set(r.resolution.get("unbuilt") or [])
    pinned: dict[str, str] = {}
    for n in r.plan.graph.of_type("PACKAGE"):
        m = re.fullmatch(
            r"\s*[A-Za-z0-9][A-Za-z0-9._\-]*\s*===?\s*([A-Za-z0-9.+!_\-]+)\s*", str(n.attrs.get("spec") or "")
        )
        if n.name in unbuilt and m:
            pinned[n.name] = m.group(1)
    if not pinned:
        return None
    for version in r.older()[:_OLDER_TRIES]:
        gained = [
            name
            for name, pin in sorted(pinned.items())[:_WHEEL_CHECKS]
            if uv_compile(
                [f"{name}=={pin}"],
                version,
                timeout=r.resolve_timeout,
                index_url=r.index_url,
                only_binary=True,
                no_deps=True,
            ).ok
        ]
        again = r.again([version]) if gained else None
        if again is None:
            continue
        names = ", ".join(f"{n}=={pinned[n]}" for n in gained)
        why = f"{names} {'has a wheel' if len(gained) == 1 else 'have wheels'} for Python {version} and none for {r.choice.version}"
        reason = f"the newest offered on which the pins install from wheels ({why})"
        return r.moved(again, reason, ("uv pip compile --only-binary", why), f"{why} (it would compile from source)")
    return None


def _offered_pythons(available_pythons: list[str] | None) -> list[str]:
    """The Python versions the images offer (the official list unless told); none is an error."""
    if available_pythons is None:
        # the planner never asks the engine itself (the graph layer sits below it): a caller that
        # has an engine passes bot.engine.images.default_pythons(settings)
        available_pythons = list(OFFICIAL_PYTHONS)
    if not available_pythons:
        raise ImageUnavailableError(
            "no Python image is offered: the local store has no python:X.Y-slim image and no registry answers",
            "Run `setupbot images bootstrap` to build offline stand-ins, or point "
            "images.registry at a registry or pull-through cache that answers.",
        )
    return available_pythons


def _choose_runtime(
    g: DepGraph,
    ev: Evidence,
    available_pythons: list[str],
    removed: list[str],
    warnings: list[ScanWarning],
    era: tuple[str, str] = ("", ""),
) -> RuntimeChoice:
    """The Python version and base image, under the ceilings that removed stdlib modules set."""
    ceilings = sorted({(REMOVED_STDLIB[m][0], f"imports {m}") for m in removed if REMOVED_STDLIB[m][1] is None})
    choice = choose_python(ev.python, available_pythons, ceilings, era)
    warnings += choice.warnings
    rt = g.runtime
    rt.attrs.update(version=choice.version, base_image=f"python:{choice.version}-slim", reason=choice.reason)
    rt.name = f"python {choice.version}"
    rt.state = "SATISFIED" if choice.satisfied else "MISSING"
    for c in choice.used:
        rt.add_evidence(c.source.file, c.source.line, f"{c.kind} {c.value}")
    if not rt.evidence:
        rt.add_evidence("setupbot", None, choice.reason)
    return choice


def _drop_untested_lock(
    g: DepGraph,
    ev: Evidence,
    version: str,
    warnings: list[ScanWarning],
    *,
    check_wheels: bool = False,
    timeout: float = 120.0,
    index_url: str | None = None,
) -> None:
    """The project's lock pins are dropped when the chosen Python is not one the project tests,
    unless every pin has a wheel for it (``check_wheels``: one ``--only-binary`` resolution)."""
    # a lock resolved for Pythons the project tests may pin builds that have no wheels for a
    # newer one (greenlet 1.1 on 3.11): beyond the tested versions, ranges are safer than pins,
    # unless the pins install as they are (typer 0.9 needs the click < 8.2 its lock pins)
    tested = {c.value for c in ev.python if c.kind == "tested"}
    lock_node = g.nodes.get("config:lock")
    if lock_node is not None and tested and version not in tested:
        pins = dict(lock_node.attrs.get("pins") or {})
        if check_wheels and pins:
            res = wheel_resolution(pins, version, timeout=timeout, index_url=index_url)
            if res.ok and not res.skipped:
                lock_node.add_evidence(
                    lock_node.name, None, f"every pin has a wheel for Python {version}, which the project does not test"
                )
                warnings.append(
                    ScanWarning(
                        lock_node.name,
                        None,
                        f"lock pins used on Python {version}, which the project does not test "
                        f"({', '.join(sorted(tested, key=lambda v: tuple(map(int, v.split('.')))))}): "
                        "every pinned distribution has a wheel for it",
                    )
                )
                return
        lock_node.action = None
        lock_node.attrs["ignored"] = f"Python {version} is not among the tested {', '.join(sorted(tested))}"
        for n in g.of_type("PACKAGE"):
            n.attrs.pop("pinned", None)
            n.attrs.pop("lock", None)
        warnings.append(
            ScanWarning(
                lock_node.name,
                None,
                f"lock pins not used: the project tests Python "
                f"{', '.join(sorted(tested, key=lambda v: tuple(map(int, v.split('.')))))}, "
                f"the image has {version}",
            )
        )


def _graph_for_the_tests_run(
    ev: Evidence, registry: Registry, warnings: list[ScanWarning]
) -> tuple[DepGraph, Evidence]:
    """The graph, without the test imports that the test command never runs when it names the
    folders it runs (bot.graph.specs.untargeted_test_imports). The graph is built again without
    them, and kept only when it installs fewer packages and chooses the same command; the
    warnings say what was left out."""
    first: list[ScanWarning] = []
    g = build_graph(ev, registry, first)
    command, _ = planned_test_command(ev, g)
    unused = untargeted_test_imports(ev, command)
    if unused:
        ids = {id(u) for u in unused}
        narrowed = replace(ev, imports=[u for u in ev.imports if id(u) not in ids])
        again: list[ScanWarning] = []
        g2 = build_graph(narrowed, registry, again)
        left = sorted(_installed_packages(g) - _installed_packages(g2))
        # kept only when it installs less and runs the same tests
        if left and planned_test_command(narrowed, g2)[0] == command:
            # the report points at an import of a package left out
            gone = {f"package:{name}" for name in left}
            mapped = {s for s, d, k in g.edges if k == "mapping" and d in gone}
            first_use = next(
                (u.source for u in unused if f"import:{import_key(u.full or u.module)}" in mapped), unused[0].source
            )
            again.append(
                ScanWarning(
                    first_use.file,
                    first_use.line,
                    f"not installed for the tests: {', '.join(left)}: only code that `{shlex.join(command)}` "
                    f"does not run imports {'them' if len(left) > 1 else 'it'} ({len(unused)} imports: "
                    "test modules it does not collect, functions of an __init__.py above them)",
                )
            )
            warnings.extend(again)
            return g2, narrowed
    warnings.extend(first)
    return g, ev


def _installed_packages(g: DepGraph) -> set[str]:
    return {n.name for n in g.of_type("PACKAGE") if n.action == "pip"}


def _add_stdlib_backports(g: DepGraph, ev: Evidence, removed: list[str], version: str) -> None:
    """The backport distributions for modules the chosen Python no longer ships."""
    ver = tuple(int(x) for x in version.split("."))
    for m in removed:
        since, backport = REMOVED_STDLIB[m]
        if ver >= tuple(int(x) for x in since.split(".")) and backport:
            name = canonicalize_name(backport)
            nid = f"package:{name}"
            n = g.nodes.get(nid) or g.add(
                Node(
                    nid,
                    "PACKAGE",
                    name,
                    "UNKNOWN",
                    action="pip",
                    attrs={"spec": backport, "group": "test", "source": "removed-stdlib"},
                )
            )
            n.action = n.action or "pip"
            imp = g.nodes.get(f"import:{m}") or g.add(Node(f"import:{m}", "IMPORT", m, "UNKNOWN"))
            src = next((u.source for u in ev.imports if u.module == m), None)
            if src:
                imp.add_evidence(src.file, src.line, f"{m} left the standard library in Python {since}")
                n.add_evidence(src.file, src.line, f"{m} left the standard library in Python {since}")
            g.edge(imp.id, nid, "mapping")
            imp.state = "SATISFIED"
            g.edge(nid, "runtime:python")
            if PROJECT in g.nodes:
                g.edge(PROJECT, nid)
            for t in g.of_type("TOOL"):
                g.edge(t.id, nid)


def _set_test_command(g: DepGraph, ev: Evidence) -> None:
    """The test target's command and collect-only command, with the evidence for them."""
    command, cmd_ev = planned_test_command(ev, g)
    tgt = g.target
    tgt.attrs["command"] = command
    # what is collected is what runs: a workspace's member folders, or the tests CI selects
    tgt.attrs["collect_command"] = (
        [*command, "--collect-only", "-q"]
        if command[:3] == ["python", "-m", "pytest"]
        else ["python", "-m", "pytest", "--collect-only", "-q"]
    )
    for e in cmd_ev:
        tgt.add_evidence(*e)
    if not tgt.evidence:
        tgt.add_evidence("setupbot", None, "default: python -m pytest")


def _apply_reused_lock(
    g: DepGraph, pins: dict[str, str], version: str, resolve_timeout: float, index_url: str | None
) -> None:
    """A previous run's lock stands: its pins are the resolution (and sdists still need a compiler)."""
    g.meta["resolution"] = {
        "ok": True,
        "seconds": 0.0,
        "error": "",
        "skipped": "",
        "python": version,
        "dropped": [],
        "from_lock": g.nodes[LOCK_NODE].attrs["file"],
        "pins": dict(sorted(pins.items())),
    }
    for n in g.of_type("PACKAGE") + g.of_type("TOOL"):
        if n.action in ("pip", "tool", "repair-pip") and n.name in pins:
            n.attrs["resolved"] = pins[n.name]
            n.state = "SATISFIED"
    needs_build = sdist_only(pins, version, timeout=resolve_timeout, index_url=index_url)
    g.meta["resolution"]["sdist_only"] = needs_build
    if needs_build:
        _add_compiler(g, ("uv pip compile --only-binary", None, f"{needs_build} has no wheel for Python {version}"))


def _resolve_and_record(
    g: DepGraph, version: str, warnings: list[ScanWarning], resolve_timeout: float, index_url: str | None, cached: bool
) -> None:
    """Resolve with uv on the host and record the outcome on the graph (pins, or what failed)."""
    res, dropped = _resolve(g, version, warnings, resolve_timeout, index_url, use_cache=cached)
    g.meta["resolution"] = {
        "ok": res.ok,
        "seconds": round(res.seconds, 2),
        "error": res.error[-2000:],
        "skipped": res.skipped,
        "python": version,
        "dropped": dropped,
        "not_on_host": [{"requirement": r, "why": w} for r, w in res.refused],
        "unbuilt": res.unbuilt,
    }
    # SECURITY.md S12: these are resolved and built only inside the runner container
    for line, why in res.refused:
        warnings.append(
            ScanWarning(
                ".", None, f"not resolved on the host ({why}): {line[:200]!r}; it is installed in the container"
            )
        )
    if res.unbuilt:
        warnings.append(
            ScanWarning(
                ".",
                None,
                "no wheel, so not resolved on the host (resolution never builds): "
                + ", ".join(res.unbuilt)
                + "; built in the container",
            )
        )
        _add_compiler(g, ("uv pip compile --no-build", None, f"{res.unbuilt[0]} has no wheel for Python {version}"))
    if res.ok and not res.skipped:
        _record_pins(g, res, version, warnings, resolve_timeout, index_url, cached)
    elif res.skipped:
        warnings.append(ScanWarning(".", None, f"resolution skipped: {res.skipped}"))
    else:
        _record_resolution_failure(g, res, version, warnings)


def _record_pins(
    g: DepGraph,
    res: Resolution,
    version: str,
    warnings: list[ScanWarning],
    resolve_timeout: float,
    index_url: str | None,
    cached: bool,
) -> None:
    """A successful resolution: every node's resolved version, the numpy<2 guard, sdist-only pins."""
    for n in g.of_type("PACKAGE") + g.of_type("TOOL"):
        if n.action in ("pip", "tool", "repair-pip") and n.name in res.pins:
            n.attrs["resolved"] = res.pins[n.name]
            n.state = "SATISFIED"
            n.add_evidence("uv pip compile", None, f"resolves to {res.pins[n.name]} on Python {version}")
    if _numpy2_guard(g, res.pins, version, warnings):
        again = uv_compile(
            install_specs(g),
            version,
            timeout=resolve_timeout,
            index_url=index_url,
            constraints=constraint_specs(g),
            use_cache=cached,
        )
        if again.ok:
            res = again
            g.meta["resolution"]["numpy_guard"] = "numpy<2"
            for n in g.of_type("PACKAGE") + g.of_type("TOOL"):
                if n.name in res.pins:
                    n.attrs["resolved"] = res.pins[n.name]
        else:
            g.remove("config:constraint:numpy<2")
    # every pin, transitive ones too: the loop compares them with the repository's era
    g.meta["resolution"]["pins"] = dict(sorted(res.pins.items()))
    # something without a wheel for this Python compiles in the image: it needs a compiler
    needs_build = sdist_only(res.pins, version, timeout=resolve_timeout, index_url=index_url, use_cache=cached)
    g.meta["resolution"]["sdist_only"] = needs_build or (res.unbuilt[0] if res.unbuilt else None)
    if needs_build:
        _add_compiler(g, ("uv pip compile --only-binary", None, f"{needs_build} has no wheel for Python {version}"))


def _record_resolution_failure(g: DepGraph, res: Resolution, version: str, warnings: list[ScanWarning]) -> None:
    """A failed resolution: a warning with uv's last line, and the packages it names marked missing."""
    names = names_in_error(res.error, {n.name for n in g.of_type("PACKAGE")})
    last = res.error.strip().splitlines()[-1] if res.error.strip() else "unknown error"
    warnings.append(ScanWarning(".", None, f"uv could not resolve the dependencies for Python {version}: {last[:300]}"))
    for pkg in names:
        failed = g.nodes.get(f"package:{pkg}")
        if failed is not None:
            failed.state = "MISSING"
            failed.add_evidence("uv pip compile", None, "named in the resolution failure")
