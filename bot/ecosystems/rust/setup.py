"""The Rust setup loop (issue #18): plan -> build -> run the tests -> diagnose -> repair -> ...
-> clean replay, within ``budgets.max_steps`` and ``budgets.wall_clock``.

The shared loop (bot.loop) trials Python's atoms in a running container and collects with
pytest; a Rust plan needs neither. Here every attempt is an image build of the compiled
Dockerfile (the crates are fetched, the crate and its tests compiled in the image) and one test
run in a fresh, hardened container with no network, its two streams merged into one (cargo names
each test binary on stderr and the binary reports on stdout: two streams would file a test under
the wrong binary). A failure is diagnosed (``diagnose``) and repaired only when the diagnosis
names the repair (``repair.decide``); a repair is kept when its signature is gone and the run got
no less far, else the graph is put back. Every kept repair is a graph change, so the final
Dockerfile carries it; only a clean replay (``--no-cache`` build of that Dockerfile, the tests
again) counts, and a replay that ran no test is never a success.

The run's verdict comes from the replay's per-test results (``verdict``).
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot import progress
from bot.ecosystems.base import SetupOutcome
from bot.ecosystems.rust import images
from bot.ecosystems.rust.compile import compile_dockerfile
from bot.ecosystems.rust.diagnose import diagnose
from bot.ecosystems.rust.evidence import RustEvidence
from bot.ecosystems.rust.graph import LOCK, RUNTIME, TARGET
from bot.ecosystems.rust.prove import make_plan
from bot.ecosystems.rust.repair import Decision, apply, decide, repair_key
from bot.ecosystems.rust.results import parse_results
from bot.ecosystems.rust.toolchain import RustChoice
from bot.ecosystems.rust.verdict import isolation, judge
from bot.engine.sources import ImageSource
from bot.errors import Interrupted, NotSupported, SetupbotError
from bot.graph.model import DepGraph
from bot.graph.specs import service_requirements
from bot.junit import TestResults
from bot.loop.diagnose import Signature
from bot.loop.records import KeptRepair, RunRecord
from bot.loop.trajectory import Budget
from bot.loop.workspace import start_services
from bot.services import ServiceManager

log = logging.getLogger(__name__)
TAIL = 2000


def offered_versions(engine: Any, settings: Any) -> list[str]:
    """The rust:X.Y-slim versions this run may use: the engine's own images, and the official
    tags when a registry answers (images.source is not ``standins``)."""
    found = set(images.local_versions(engine.image_tags("rust")))
    try:
        if settings.images.source != "standins" and ImageSource(engine).registry_answers():
            found.update(images.OFFICIAL_RUST)
    except SetupbotError as exc:
        log.info("no registry asked for rust images: %s", exc.what)
    return sorted(found, key=lambda v: tuple(int(p) for p in v.split(".")))


@dataclass
class RustSetupPlan:
    """The Rust plan as the outputs and the report read it (the facts ``bot.compile.plan.Plan``
    gives for Python): a view over the graph, so a kept repair is in it at once."""

    repo: Path
    evidence: RustEvidence
    graph: DepGraph
    choice: RustChoice
    warnings: list[str] = field(default_factory=list)

    ecosystem = "rust"  # the report names the lead ecosystem (its stand-ins, its words)

    @property
    def version(self) -> str:
        return str(self.graph.nodes[RUNTIME].attrs.get("version") or "")

    @property
    def runtime(self) -> str:
        """How the report names the toolchain ("Rust 1.85")."""
        return f"Rust {self.version}"

    @property
    def base_image(self) -> str:
        return str(self.graph.nodes[RUNTIME].attrs.get("base_image") or "")

    @property
    def base_image_digest(self) -> str | None:
        return self.graph.nodes[RUNTIME].attrs.get("base_digest") or None

    @property
    def base_image_origin(self) -> str:
        return self.graph.nodes[RUNTIME].attrs.get("base_origin") or "not resolved"

    @property
    def test_command(self) -> list[str]:
        return list(self.graph.nodes[TARGET].attrs["command"])

    @property
    def collect_command(self) -> list[str]:
        return list(self.graph.nodes[TARGET].attrs["collect_command"])

    @property
    def services(self) -> list[Any]:
        """The services the tests ran beside (CI ``services:`` blocks, compose files)."""
        return service_requirements(self.graph)

    @property
    def env(self) -> dict[str, str]:
        return {}

    @property
    def lock_summary(self) -> dict[str, Any]:
        """Cargo.lock, fetched with --locked: the repository's own lock, used as it is."""
        lock = self.graph.nodes.get(LOCK)
        if lock is None:
            return {}
        count = sum(len(v) for v in self.evidence.lock_packages.values())
        return {
            "native": True,
            "file": lock.name,
            "tool": "cargo fetch --locked",
            "count": count,
            "unit": "crates",
            "refresh": "",
        }

    @property
    def dockerfile(self) -> Any:
        return compile_dockerfile(self.graph)

    def to_json(self) -> dict[str, Any]:
        df = self.dockerfile
        return {
            "ecosystem": "rust",
            "runtime": self.runtime,
            "rust": self.version,
            "base_image": self.base_image,
            "base_image_digest": self.base_image_digest,
            "base_image_origin": self.base_image_origin,
            "toolchain_reason": self.choice.reason,
            "test_command": self.test_command,
            "collect_command": self.collect_command,
            "services": [s.to_json() for s in self.services],
            # the compose file's localhost relay is a Python program, and the rust image has no
            # Python: the tests reach each service by its name (the catalogue's wiring env)
            "localhost_relay": False,
            "env": {},
            "lock_summary": self.lock_summary,
            "warnings": list(self.warnings),
            "dockerfile": df.text,
            "dockerfile_lines": [ln.to_json() for ln in df.lines],
            "graph": self.graph.to_json(),
        }


@dataclass
class Attempt:
    """One build of the compiled Dockerfile and, when it built, one test run on it."""

    tag: str
    built: bool
    log: str
    signatures: list[Signature] = field(default_factory=list)
    results: TestResults | None = None
    exit_code: int | None = None
    timed_out: bool = False
    seconds: float = 0.0

    @property
    def ran(self) -> int:
        """Tests that ran (passed or failed; skipped ones prove nothing)."""
        return 0 if self.results is None else self.results.passed + self.results.failed

    @property
    def rank(self) -> tuple[int, int]:
        stage = 0 if not self.built else (2 if self.ran else 1)
        return (stage, self.results.passed if self.results else 0)

    @property
    def setup_signatures(self) -> list[Signature]:
        return [s for s in self.signatures if s.kind != "test_failed"]


def _tail(text: str, n: int = 8) -> str:
    return "\n".join((text or "").strip().splitlines()[-n:])


class RustSetup:
    """One Rust run. ``available``: the rust versions offered (None: ask the engine);
    ``clock``: injectable so tests need not sleep."""

    def __init__(
        self,
        repo: Path,
        settings: Any,
        engine: Any,
        *,
        available: Sequence[str] | None = None,
        verify: bool = True,
        clock: Callable[[], float] = time.monotonic,
        service_manager: Callable[[Any, str], Any] | None = None,
    ) -> None:
        self.repo = Path(repo)
        self.service_manager = service_manager or ServiceManager
        self.settings = settings
        self.engine = engine
        self.verify = verify
        self.offered = list(available) if available is not None else offered_versions(engine, settings)
        b = settings.budgets
        self.budget = Budget(b.max_steps, b.wall_clock, settings.engine.command_timeout, clock=clock)
        run_id = getattr(engine, "run_id", None) or uuid.uuid4().hex[:10]
        self.record = RunRecord(repo=str(self.repo), run_id=run_id)
        self.traj = self.record.trajectory
        self.tried: set[tuple] = set()
        self.n_builds = 0
        self.plan: RustSetupPlan | None = None
        self.replayed: Attempt | None = None

    @property
    def graph(self) -> DepGraph:
        assert self.plan is not None
        return self.plan.graph

    # -- the run ----------------------------------------------------------------------------
    def run(self) -> SetupOutcome:
        t0 = time.monotonic()
        try:
            if self._make_plan():
                self._loop()
        except Interrupted as exc:
            # SIGTERM/SIGINT: the caller writes the outputs of the state reached so far
            self.record.status = "interrupted"
            self.record.remaining = f"{exc.what} after {time.monotonic() - t0:.0f}s"
            self.traj.record("interrupted", outcome="stopped", detail={"remaining": self.record.remaining})
        finally:
            self._close(t0)
        verification = None
        if self.verify and self.plan is not None and self.replayed is not None and self.replayed.built:
            verification = judge(self.plan, self.record, self.replayed.results, self.replayed.tag)
        return SetupOutcome(self.plan, self.record, verification)

    def _make_plan(self) -> bool:
        """Plan; False when there is nothing to build (no image offered, or none meets the floor)."""
        progress.current().stage("plan")
        t0 = time.monotonic()
        try:
            first = make_plan(self.repo, self.offered)
        except ValueError as exc:  # Cargo.toml only below the root: no crate or workspace to build
            raise NotSupported(
                f"{self.repo.name}: no Cargo.toml at the root, only below it",
                "The Rust loop sets up a crate or workspace whose Cargo.toml is at the repository root.",
                markers=["Cargo.toml"],
            ) from exc
        choice = first.choice
        warnings = [str(w) for w in first.evidence.warnings] + list(choice.warnings)
        self.record.warnings.extend(warnings)
        self.record.timings["plan_seconds"] = round(time.monotonic() - t0, 3)
        self.traj.record(
            "plan",
            outcome="ok" if choice.satisfied else "failed",
            duration=self.record.timings["plan_seconds"],
            detail={"rust": choice.version, "base_image": choice.image, "reason": choice.reason},
        )
        if choice.version is None:
            self._stop("unresolved", choice.reason, "rust_image")
            return False  # nothing to compile: no plan to write either
        self.plan = RustSetupPlan(first.repo, first.evidence, first.graph, choice, warnings)
        if getattr(self.engine, "buildkit_available", lambda: False)():
            # the engine proves the Dockerfile under BuildKit: the fetch and the compile keep
            # their downloads and target/ in cache mounts between the loop's builds
            self.graph.nodes[RUNTIME].attrs["cache_mounts"] = True
        if not choice.satisfied:
            self._stop("unresolved", choice.reason, "rust_floor")
            return False
        return True

    def _loop(self) -> None:
        if not self._pin_base():
            return
        state = self._attempt()
        decision = decide(state.signatures, self.graph, self.offered, self.tried)
        while decision.repair is not None:
            over = self.budget.exhausted() or self._no_room()
            if over:
                self._stop("over_budget", f"{over}; left undone: {self._remains(state, decision)}")
                return
            state = self._trial(state, decision)
            decision = decide(state.signatures, self.graph, self.offered, self.tried)
        if state.ran:
            self._replay()
        else:
            self._stopped(state, decision)

    # -- one attempt ------------------------------------------------------------------------
    def _attempt(self, *, final: bool = False) -> Attempt:
        """Build the compiled Dockerfile (from scratch when ``final``) and run the tests on it."""
        progress.current().stage("replay" if final else "build")
        self.budget.spend_step()
        self.n_builds += 1
        tag = f"setupbot-rust-{self.record.run_id}:{'replay' if final else f'work-{self.n_builds}'}".lower()
        t0 = time.monotonic()
        text = compile_dockerfile(self.graph).text
        build = self.engine.build(self.repo, text, tag, no_cache=final, timeout=self._build_timeout(final))
        self.budget.measured(build=build.seconds)
        self.record.timings["build_seconds"] = self.record.timings.get("build_seconds", 0.0) + build.seconds
        note = getattr(build, "limits_note", "")
        if note and note not in self.record.warnings:
            self.record.warnings.append(note)
        sigs = diagnose(build.log) if not build.ok else []
        self.traj.record(
            "replay" if final else "build",
            command=["build", tag] + (["--no-cache"] if final else []),
            exit_code=0 if build.ok else 1,
            output_tail=build.log[-TAIL:],
            duration=time.monotonic() - t0,
            outcome="ok" if build.ok else "failed",
            detail={"signatures": [s.to_json() for s in sigs]},
        )
        if not build.ok:
            return Attempt(tag, False, build.log, sigs, seconds=time.monotonic() - t0)
        return self._test(tag, final, t0)

    def _test(self, tag: str, final: bool, t0: float) -> Attempt:
        command = self.plan.test_command if self.plan else []
        argv = ["sh", "-c", 'exec "$@" 2>&1', "sh", *command]
        with contextlib.ExitStack() as stack:
            env, network = self._start_services(stack)
            timeout = self.budget.timeout_for_command(final=final)
            run = self.engine.run_once(tag, argv, timeout=timeout, env=env or None, network=network)
        self.budget.measured(target=run.duration)
        self.record.timings["test_seconds"] = self.record.timings.get("test_seconds", 0.0) + run.duration
        results = parse_results(run.output, exit_code=run.exit_code)
        results.timed_out = run.timed_out
        sigs = diagnose(run.output) if run.exit_code != 0 else []
        self.traj.record(
            "test",
            command=list(command),
            exit_code=run.exit_code,
            output_tail=run.output[-TAIL:],
            duration=run.duration,
            outcome="timeout" if run.timed_out else ("ok" if run.exit_code == 0 else "failed"),
            detail={"tests": results.counts(), "network": network},
        )
        return Attempt(
            tag, True, run.output, sigs, results, run.exit_code, run.timed_out, seconds=time.monotonic() - t0
        )

    def _start_services(self, stack: contextlib.ExitStack) -> tuple[dict[str, str], str]:
        """The graph's services on a private network of their own (closed with ``stack``), and the
        env that wires the tests to them; with none, the tests get no network at all."""
        reqs = service_requirements(self.graph) if self.plan is not None else []
        if not reqs:
            return {}, "none"
        network = stack.enter_context(self.engine.network())
        manager = stack.enter_context(self.service_manager(self.engine, network))
        started = start_services(manager, reqs, {}, self.traj, self.record.warnings)
        return dict(started.env), network

    def _build_timeout(self, final: bool) -> int:
        limit = int(getattr(self.settings.engine, "build_timeout", 1800) or 1800)
        return max(1, min(limit, int(self.budget.room(final=final))))

    def _no_room(self) -> str:
        need = (self.budget.build_seconds or 0.0) + (self.budget.target_seconds or 0.0)
        if self.budget.can_start(need):
            return ""
        return (
            f"the next trial (a build and a test run, about {need:.0f}s) would not finish before the "
            f"{self.budget.reserve:.0f}s kept for the clean replay"
        )

    # -- repairs ----------------------------------------------------------------------------
    def _trial(self, state: Attempt, decision: Decision) -> Attempt:
        """Apply the repair to the graph and build again; keep it when its signature is gone and
        the run got no less far, else put the graph back."""
        repair, sig = decision.repair, decision.signature
        assert repair is not None and sig is not None and self.plan is not None
        self.tried.add(repair_key(repair))
        before = self.graph.to_json()
        apply(repair, self.graph, sig.message)
        new = self._attempt() if self._pin_base() else state
        improved = new is not state and sig.ident not in {s.ident for s in new.signatures} and new.rank >= state.rank
        self.traj.record(
            "keep" if improved else "rollback",
            command=[repair.describe()],
            outcome="kept" if improved else "rolled_back",
            detail={"signature": sig.to_json(), "repair": repair.to_json()},
        )
        if improved:
            self.record.repairs.append(KeptRepair(sig, repair, sig.message))
            return new
        self.plan.graph = DepGraph.from_json(before)
        self.record.warnings.append(f"{repair.describe()} did not help ({sig.describe()}): taken back")
        return state

    def _pin_base(self) -> bool:
        """Make the base image present through the image source and note where it came from
        (a registry image's digest pins the FROM; a stand-in has none)."""
        rt = self.graph.nodes[RUNTIME]
        image = rt.attrs.get("base_image")
        resolve = getattr(self.engine, "resolve_image", None)
        if not image or resolve is None or rt.attrs.get("base_resolved") == image:
            return True
        try:
            resolved = resolve(image)
        except SetupbotError as exc:
            hint = "`setupbot images bootstrap --ecosystem rust` builds the offline stand-ins"
            self._stop("unresolved", f"{image}: {exc.what} ({hint})", "rust_image")
            return False
        rt.attrs.update(base_digest=resolved.digest, base_origin=resolved.origin, base_resolved=image)
        return True

    # -- the end ----------------------------------------------------------------------------
    def _replay(self) -> None:
        """The clean replay: a --no-cache build of the final Dockerfile, the tests again."""
        if not self.budget.can_replay():
            self._stop("over_budget", f"no time left for the clean replay ({self.budget.left:.0f}s left)")
            return
        t0 = time.monotonic()
        state = self._attempt(final=True)
        self.replayed = state
        results = state.results or TestResults()
        self.record.replay = {
            "ok": state.built and (state.ran > 0 or state.exit_code == 0),
            "tests_ran": state.ran,
            "test_exit": state.exit_code,
            "tests": results.counts() if state.built else {},
            "note": "the test run timed out" if state.timed_out else "",
            "signatures": [s.to_json() for s in state.signatures],
            "seconds": round(time.monotonic() - t0, 3),
            "tag": state.tag,
            "detail": self._replay_detail(state),
        }
        self.record.tests = TestResults(dict(results.outcomes), dict(results.messages))
        self.traj.record(
            "replay-result", outcome="ok" if self.record.replay["ok"] else "failed", detail=self.record.replay
        )
        if not state.built:
            why = decide(state.signatures, self.graph, self.offered, self.tried).reason
            self._stop("unresolved", f"the clean replay's build failed: {why or _tail(state.log, 5)}")
        elif state.ran == 0:
            self._stop("no_tests", self._no_tests(state), "no_tests")
        else:
            self.record.status = "success"
            self.record.unresolved = [s.to_json() for s in state.setup_signatures]

    def _replay_detail(self, state: Attempt) -> str:
        base = self.plan.base_image if self.plan else "?"
        if not state.built:
            return f"the --no-cache build from {base} failed"
        r = state.results or TestResults()
        return (
            f"built from scratch (--no-cache) from {base}; `{' '.join(self.plan.test_command if self.plan else [])}` "
            f"in a fresh container {isolation(self.plan)}: {r.passed} passed, {r.failed} failed, {r.skipped} skipped"
        )

    def _stopped(self, state: Attempt, decision: Decision) -> None:
        """The loop ends without a state whose tests ran: say what stopped it."""
        if state.built and state.exit_code == 0 and not state.timed_out:
            self._stop("no_tests", self._no_tests(state), "no_tests")
            return
        self._stop("unresolved", self._remains(state, decision))
        self.record.unresolved = [s.to_json() for s in state.setup_signatures] or [
            {"kind": "unclassified", "category": "unknown", "key": "", "message": _tail(state.log, 12)}
        ]

    def _remains(self, state: Attempt, decision: Decision) -> str:
        if decision.repair is not None and decision.signature is not None:
            return f"{decision.repair.describe()} (for {decision.signature.describe()}) was not tried"
        if decision.reason:
            return f"unresolved: {decision.reason}"
        if state.timed_out:
            return f"the test run timed out: {_tail(state.log, 3)}"
        where = "the image build" if not state.built else "the test run"
        return f"{where} failed with no classified cause: {_tail(state.log, 5)}"

    def _no_tests(self, state: Attempt) -> str:
        skipped = state.results.skipped if state.results else 0
        command = " ".join(self.plan.test_command) if self.plan else "cargo test"
        return (
            f"`{command}` ran no test" + (f" ({skipped} skipped)" if skipped else "") + ": an environment that runs "
            "no test is not proven. Name the test command in .github/setupbot.yml (target.test_command) "
            "if the tests need other flags"
        )

    def _stop(self, status: str, remaining: str, kind: str = "") -> None:
        self.record.status = status
        self.record.remaining = remaining
        if kind:
            category = "verification" if kind == "no_tests" else "toolchain"
            self.record.unresolved = [{"kind": kind, "category": category, "key": "", "message": remaining}]

    def _close(self, t0: float) -> None:
        """What the record holds whatever the ending: the Dockerfile, the plan, timings."""
        rec = self.record
        if rec.status == "running":
            rec.status = "error"
        if self.plan is not None:
            rec.dockerfile = compile_dockerfile(self.graph).text
            rec.plan = self.plan.to_json()
        notes = getattr(self.engine, "sandbox_notes", None)
        rec.warnings.extend(n for n in (notes() if callable(notes) else []) if n not in rec.warnings)
        rec.timings["total_seconds"] = round(time.monotonic() - t0, 3)


def run_rust_setup(repo: Path, settings: Any, engine: Any, *, verify: bool = True, **kw: Any) -> SetupOutcome:
    """Plan, build, repair and replay a Rust-led repository (see the module docstring)."""
    return RustSetup(Path(repo), settings, engine, verify=verify, **kw).run()
