"""The setup loop: plan → build → run the target → diagnose → repair → … → clean replay.

One ``Workspace`` is an image built from the compiled Dockerfile, the sibling services the plan
and the kept repairs ask for (on a private network), and a runner container on that image with
the target already evaluated. Repairs that can be trialled inside the container (apt/pip installs,
environment, commands) run after ``snapshot()`` and are rolled back unless the error state
improved; repairs that change the image (base image, build-time environment, services) are
trialled by recompiling the graph and rebuilding. Every kept repair is applied to the DepGraph
(``apply_atom``), so the compiled Dockerfile reproduces it; the working container is never the
artifact: only a clean replay (no cache, fresh container, nothing carried over) counts.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bot import progress
from bot.compile import compile_dockerfile
from bot.compile.plan import make_plan
from bot.engine.images import available_pythons
from bot.errors import EngineError, Interrupted, LLMError
from bot.graph.native_lock import drop_stale_lock, native_lock, refused_as_stale
from bot.knowledge import Retriever
from bot.logtext import strip_ansi
from bot.loop.candidates import PROVIDER_KINDS, CandidatesMixin
from bot.loop.diagnose import Signature, api_drift_failures, api_drift_in, assertion_failures, lint_failures
from bot.loop.era import EraMixin
from bot.loop.llm import run_planner_turns
from bot.loop.lock import LockOutcome, PendingLock, PlanLock
from bot.loop.records import KeptRepair, RunRecord, member_results
from bot.loop.repair import Candidate, generic_candidates, knowledge_candidates
from bot.loop.replay import ReplayMixin, _last_lines
from bot.loop.target import TargetMixin, TargetOutcome, compare, finds_no_tests, ran_count, runs_more_tests
from bot.loop.trajectory import Budget, Trajectory
from bot.loop.trials import TrialsMixin
from bot.loop.workspace import Workspace, WorkspaceMixin
from bot.services import ServiceManager

__all__ = [
    "KeptRepair",
    "RunRecord",
    "SetupLoop",
    "TargetOutcome",
    "compare",
    "member_results",
    "ran_count",
    "run_setup",
    "runs_more_tests",
]

log = logging.getLogger(__name__)


def _default_make_plan(repo: Path, settings: Any, available_pythons: Sequence[str]) -> Any:
    return make_plan(repo, settings, available_pythons=list(available_pythons))


def _default_compile(graph: Any) -> Any:
    return compile_dockerfile(graph)


def _default_available_pythons(engine: Any) -> list[str]:
    return list(available_pythons(engine))


def _default_service_manager(engine: Any, network: str) -> Any:
    return ServiceManager(engine, network)


class SetupLoop(WorkspaceMixin, TargetMixin, CandidatesMixin, EraMixin, TrialsMixin, ReplayMixin):
    def __init__(
        self,
        repo: Path,
        settings: Any,
        engine: Any,
        store: Any = None,
        llm: Any = None,
        *,
        retriever: Any = None,
        make_plan: Callable[..., Any] = _default_make_plan,
        compile_dockerfile: Callable[[Any], Any] = _default_compile,
        service_manager: Callable[[Any, str], Any] = _default_service_manager,
        available_pythons: Sequence[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        trajectory_path: Path | None = None,
    ) -> None:
        self.repo = Path(repo)
        self.settings = settings
        self.engine = engine
        self.store = store
        self.llm = llm
        self.retriever = retriever
        if self.retriever is None and store is not None:
            self.retriever = Retriever(store, settings.knowledge)
        self.make_plan = make_plan
        self.compile = compile_dockerfile
        self.service_manager = service_manager
        self.available = (
            list(available_pythons) if available_pythons is not None else _default_available_pythons(engine)
        )
        b = settings.budgets
        self.budget = Budget(b.max_steps, b.wall_clock, settings.engine.command_timeout, clock=clock)
        run_id = getattr(engine, "run_id", None) or uuid.uuid4().hex[:10]
        self.record = RunRecord(repo=str(self.repo), run_id=run_id, trajectory=Trajectory(trajectory_path))
        self.traj = self.record.trajectory
        self.n_builds = 0
        self.tried: dict[tuple[str, str], set] = {}
        # candidates that failed in an error state: not tried again for another of its signatures
        self.failed_in_state: dict[frozenset, set] = {}
        self.llm_repairs: list[KeptRepair] = []
        self.tests_tried: dict[str, str] = {}  # test command -> what it found (latest)
        self.stop_reason = ""  # set when the next trial would not fit the budget
        self._final = False  # the clean replay is running (its own time limits)
        self._era_cache: Any = None  # bot.graph.era.Era, resolved on first use
        self._drift_tried = False  # the era set for failing assertions is tried once per run
        self.providers: dict[str, list[str]] = {}  # module -> installed distributions (runner)
        self._counts_checked = False
        self._prelock: PendingLock | None = None  # a lock drafted for the clean replay to build
        self._prelocked: LockOutcome | None = None  # that lock, proven by the replay
        self._prelock_refused = ""  # why the replay of that lock did not hold (no lock then)
        self._planlock: PlanLock | None = None  # a lock resolved from the plan, which the first image installs
        self._lock_before = None  # the lock file as the run found it, put back if the run fails (_put_back_lock_file)
        self._dev_build = None  # the development stage, built beside the run's first build (bot.loop.devstage)
        self.reoffered: set = set()  # kept candidates a clean replay disproved (offered once more)

    # -- plan facts -------------------------------------------------------------------------
    @property
    def python(self) -> str:
        return str(self.plan.python or "3.11")

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> RunRecord:
        t_start = time.monotonic()
        rec = self.record
        ws: Workspace | None = None
        try:
            self._make_plan(t_start)
            self._lock_from_plan()
            ws = self.open_workspace()
            if self._plan_lock_failed_build(ws.outcome):
                ws.close()
                ws = self.open_workspace()
            elif ws.outcome.stage == "build" and self._drop_refused_lock(ws.outcome.log):
                ws.close()
                ws = self.open_workspace()
            while ws is not None:
                ws = self._step(ws)
        except LLMError as exc:
            rec.status = "unresolved"
            rec.remaining = exc.what
        except Interrupted as exc:
            # SIGTERM/SIGINT: stop here; the caller writes the outputs of the state reached so far
            rec.status = "interrupted"
            left = self._what_remains(ws.outcome) if ws is not None else "the run had not evaluated the target yet"
            rec.remaining = f"{exc.what} after {time.monotonic() - t_start:.0f}s; left undone: {left}"
            self.traj.record("interrupted", outcome="stopped", detail={"remaining": rec.remaining})
        except Exception:
            # an engine failure (or a fault of ours) ends the run with no outputs: the lock file
            # a proof already wrote goes back to what it was, as nothing else was written
            self._put_back_lock_file()
            raise
        finally:
            if ws is not None:
                ws.close()
            if rec.status != "success":
                self._drop_plan_lock("the run did not succeed")  # an unproven lock goes back
            self._join_dev_build()
            self._close_record(t_start)
        if rec.status == "success":
            self._learn()
        return rec

    def _drop_refused_lock(self, log: str) -> bool:
        """The repository's own lock tool refused its lock as out of date (its manifest changed
        since): the plan resolves the ranges instead, and the report says how to refresh the
        lock. True when the lock was dropped."""
        said = refused_as_stale(strip_ansi(log))
        if not said or native_lock(self.graph) is None:
            return False
        finding = drop_stale_lock(self.graph, f"its tool refused it: {said}")
        if finding is None:
            return False
        self.record.warnings.append(f"{finding.file}: {finding.message}")
        self.traj.record("native-lock", outcome="stale", detail={"said": said})
        return True

    def _join_dev_build(self) -> None:
        """A development-stage build still running when the run ends without settling it (no
        success, an interruption) is waited for, bounded by the build timeout: its image and
        the builder's network are the run's, which the caller removes after the run."""
        running, self._dev_build = getattr(self, "_dev_build", None), None
        # the build itself was started with a timeout no longer than this
        bound = float(getattr(self.settings.engine, "build_timeout", 1800) or 1800)
        try:
            if running is not None and running.result(timeout=bound) is None:
                log.warning("the development stage's build was still running when the run ended")
        except EngineError as exc:  # the run is ending already; its own outcome says why
            log.warning("the development stage's build failed in the engine: %s", exc.what)

    def _make_plan(self, t_start: float) -> None:
        progress.current().stage("plan")
        rec = self.record
        self.plan = self.make_plan(self.repo, self.settings, self.available)
        rec.warnings.extend(str(w) for w in getattr(self.plan, "warnings", []) or [])
        runtime = getattr(self.graph, "runtime", None)
        if runtime is not None and getattr(self.engine, "buildkit_available", lambda: False)():
            # the engine proves the Dockerfile under BuildKit: pip and uv keep their downloads
            # in cache mounts between the loop's builds (bot.compile.dockerfile DOWNLOAD_CACHES)
            runtime.attrs["cache_mounts"] = True
        rec.timings["plan_seconds"] = round(time.monotonic() - t_start, 3)
        self.traj.record(
            "plan",
            outcome="ok",
            duration=rec.timings["plan_seconds"],
            detail={"python": self.python, "base_image": getattr(self.plan, "base_image", "")},
        )

    def _step(self, ws: Workspace) -> Workspace | None:
        """One turn of the loop: repair, or replay a state that is ready. Returns the workspace
        to go on in, or None when the run is over (``record.status`` says how)."""
        over = self.budget.exhausted() or self.stop_reason
        # a state that passes goes to its replay: that is what the reserve is for
        if over and not (ws.outcome.passed and self.budget.can_replay()):
            # the budget for trials is spent: replay and keep the best state found so far
            # (the graph holds only repairs that improved things), say what was left undone
            undone = self._what_remains(ws.outcome)
            ws.close()
            self._finish(over_budget=f"{over}; left undone: {undone}")
            return None
        self._note_best(ws.outcome)
        # the LLM gets the setup failures that no unit or rule can repair
        llm_can_try = bool(ws.outcome.setup_failures) and self._llm_available()
        ready = ws.outcome.passed or (self._ran(ws.outcome) and not self._repairable(ws.outcome) and not llm_can_try)
        if ready and self.drift_step(ws):
            return ws
        if not ready:
            progressed, ws = self.repair_step(ws)
            if progressed:
                return ws
            if not self._ran(ws.outcome) and not finds_no_tests(ws.outcome):
                self.record.status = "unresolved"
                ws.close()
                return None
            # the tests collected and ran; what is left cannot be repaired here: replay this
            # state, and the record says what remains
        # a replay failure is new evidence: keep working in the replayed container; the
        # working image, or its container, may be frozen into a lock that the replay builds
        # (``_finish`` closes it once the lock is drafted)
        return self._finish(working=ws)

    def _close_record(self, t_start: float) -> None:
        """What the record holds whatever the ending: the Dockerfile, the plan, timings, usage."""
        rec = self.record
        if getattr(self, "graph", None) is not None:
            graph = self.graph
            if rec.status != "success":
                # an LLM repair no clean replay proved never reaches the published Dockerfile
                first = next((k for k in rec.repairs if k in self.llm_repairs and k.checkpoint), None)
                if first is not None and first.checkpoint is not None:
                    graph = type(self.graph).from_json(first.checkpoint.graph)
                    rec.warnings.append("the LLM's repairs are left out of the Dockerfile: no clean replay proved them")
            rec.dockerfile = self.compile(graph).text
            # protections that do not hold here (open egress, unbounded BuildKit builds)
            notes = getattr(self.engine, "sandbox_notes", None)
            rec.warnings.extend(n for n in (notes() if callable(notes) else []) if n not in rec.warnings)
            rec.plan = _plan_json(self.plan, self.graph)
        rec.timings["total_seconds"] = round(time.monotonic() - t_start, 3)
        if self.llm is not None:
            rec.llm_usage = self.llm.usage()
            rec.degraded = rec.degraded or bool(getattr(self.llm, "degraded", False))

    def _llm_available(self) -> bool:
        llm = self.llm
        return (
            llm is not None
            and not getattr(llm, "degraded", False)
            and (not hasattr(llm, "budget_left") or llm.budget_left())
        )

    @staticmethod
    def _ran(outcome: TargetOutcome) -> bool:
        """Collection succeeded and the test run completed (whatever the tests' own verdicts)."""
        return outcome.collected and outcome.stage == "done"

    def _repairable(self, outcome: TargetOutcome) -> bool:
        return any(self.candidates_for(s, outcome) for s in outcome.setup_failures)

    def repair_step(self, ws: Workspace) -> tuple[bool, Workspace]:
        """One repair: the first setup failure with a candidate that improves things."""
        outcome = ws.outcome
        sigs = outcome.setup_failures
        self.providers = {}
        if ws.session is not None and any(s.kind in PROVIDER_KINDS for s in sigs):
            self.providers = self._installed_providers(ws)
        for sig in sigs:
            cands = self.candidates_for(sig, outcome)
            for i, cand in enumerate(cands):
                if self.budget.exhausted():
                    return True, ws  # the loop head reports the budget
                need = self._trial_estimate(cand)
                if not self.budget.can_start(need):
                    self.stop_reason = (
                        f"the next trial ({cand.describe()}, about {need:.0f}s) would not finish "
                        f"before the {self.budget.reserve:.0f}s kept for the clean replay "
                        f"({self.budget.work_left():.0f}s of trial time left)"
                    )
                    return True, ws
                ok, ws = self.try_candidate(ws, cand, sig, cands[i + 1 :])
                if ok:
                    return True, ws
        if sigs and ws.session is not None:
            ok, ws = self.backtrack(ws, sigs[0])
            if ok:
                return True, ws
        outside = [s for s in outcome.signatures if s.category == "external"]
        if not sigs and outside:
            # a host outside that does not answer, a GPU toolkit no image has: no strategy or
            # model changes that
            self.record.unresolved = [s.to_json() for s in outside]
            self.record.remaining = self._what_remains(outcome)
            return False, ws
        ok, ws = self.generic_step(ws)
        if ok:
            return True, ws
        if self._llm_available():
            ok, ws = self.llm_step(ws)
            if ok:
                return True, ws
        self.record.unresolved = [{**s.to_json(), "message": s.message + self._no_python_note(s)} for s in sigs] or [
            {"kind": "unclassified", "category": "unknown", "key": "", "message": _last_lines(outcome.log, 12)}
        ]
        self.record.remaining = self._what_remains(outcome)
        return False, ws

    def drift_step(self, ws: Workspace) -> bool:
        """The tests ran and most of the failing ones fail on their own assertions, or on a call a
        dependency no longer takes: the values they expect may be what a dependency produced in
        the repository's era (a renderer's markup, a formatter's message), the calls what its API
        took then (a dropped keyword argument). One trial per run of the releases current at the
        reference date, kept only when more tests pass and fewer fail; True when it was kept."""
        out = ws.outcome
        if self._drift_tried or ws.session is None or not out.passed:
            return False
        asserted, api = assertion_failures(out.results), api_drift_failures(out.results)
        linted = lint_failures(out.results)
        failing = asserted + [t for t in [*api, *linted] if t not in asserted]
        if not failing or 2 * len(failing) < out.results.failed:
            return False
        self._drift_tried = True
        how = " or ".join(
            w
            for w, found in (
                ("an assertion", asserted),
                ("a call the dependency no longer takes", api),
                (f"the rules of {', '.join(sorted(set(linted.values())))}", linted),
            )
            if found
        )
        sig = Signature(
            "assertion_drift",
            "test",
            "",
            f"{len(failing)} of {out.results.failed} failing tests fail on {how} (first: {failing[0]})",
        )
        # lint items alone: the linters' releases of the era, not the whole set
        only_lint = not asserted and not api
        whole = self.era_pin_candidate(sorted(set(linted.values()))) if only_lint else self.whole_era_candidate()
        if whole is None or not self.budget.can_start(self._trial_estimate(whole)):
            return False
        # the report says which tests made the trial, beside the releases it pinned
        cand = dataclasses.replace(whole, why=f"{sig.message}; {whole.why}")
        kept, _ = self.try_candidate(ws, cand, sig, [])
        return kept

    def generic_step(self, ws: Workspace) -> tuple[bool, Workspace]:
        """No rule or unit repairs what is left: the generic strategies, each once per run."""
        tried = self.tried.setdefault(("generic", ""), set())
        if ws.outcome.stage != "build" and api_drift_in(ws.outcome.log or ""):
            # the image built and the code stopped on a call a dependency no longer takes (a
            # newer Django's Task without enqueue_on_commit): the releases of the repository's
            # date go first, before installs from the CI and leaving out what the plan guessed
            ok, ws = self._era_strategy(ws, tried)
            if ok:
                return True, ws
        for strategy, cand in generic_candidates(self.repo, self.graph, ws.outcome.log or ""):
            if cand.key() in tried or self.budget.exhausted():
                continue
            ok, ws = self._try_generic(ws, strategy, cand, tried)
            if ok:
                return True, ws
        return self._era_strategy(ws, tried)

    def _try_generic(self, ws: Workspace, strategy: str, cand: Candidate, tried: set[Any]) -> tuple[bool, Workspace]:
        """Trial one generic strategy's candidate; the record and the report say how it went."""
        tried.add(cand.key())
        ok, ws = self.try_candidate(ws, cand, None, [])
        self.record.strategies.append({"strategy": strategy, "repair": cand.describe(), "kept": ok})
        # the report says which generic strategies were tried
        self.record.warnings.append(
            f'no classified repair; generic strategy "{strategy}" '
            f"({cand.describe()}): {'kept' if ok else 'did not help'}"
        )
        return ok, ws

    def _era_strategy(self, ws: Workspace, tried: set[Any]) -> tuple[bool, Workspace]:
        """The last generic strategy: the releases current at the repository's date, the whole
        set, once per run (shared with ``drift_step``). A failure with no classified cause is
        often a dependency that moved on since the commit: a newer Django that ships its own
        ``django.tasks`` with another ``Task`` signature fails at start-up with a TypeError no
        rule reads."""
        if self._drift_tried or self.budget.exhausted():
            return False, ws
        cand = self.whole_era_candidate()
        if cand is None or cand.key() in tried or not self.budget.can_start(self._trial_estimate(cand)):
            return False, ws
        self._drift_tried = True
        return self._try_generic(ws, "the releases current at the repository's date", cand, tried)

    def llm_step(self, ws: Workspace) -> tuple[bool, Workspace]:
        return run_planner_turns(self.llm, self, ws)

    # -- what the LLM planner may ask of the loop (bot.loop.llm.PlannerHost) --------------------
    def planner_context(self, ws: Workspace) -> dict[str, Any]:
        return {
            "python": self.python,
            "base_image": getattr(self.plan, "base_image", ""),
            "stage": ws.outcome.stage,
            "signatures": [f"{s.describe()}: {s.message}" for s in ws.outcome.signatures][:10],
            "kept": [k.candidate.describe() for k in self.record.repairs],
            "log": ws.outcome.log,
        }

    def offered_units(self, log_text: str) -> list[Candidate]:
        return knowledge_candidates(
            self.retriever, log_text, {"python": self.python, "os": "debian"}, self.settings.knowledge.k
        )

    def planner_note(self, what: str, *, degraded: bool = False) -> None:
        self.record.degraded = self.record.degraded or degraded
        self.record.warnings.append(what)

    def record_step(self, action: str, **fields: Any) -> None:
        self.traj.record(action, **fields)

    def can_spend(self) -> bool:
        return not self.budget.exhausted()

    def spend_step(self) -> None:
        self.budget.spend_step()

    def secrets(self) -> list[str]:
        return list(getattr(self.settings, "secrets", lambda: [])())


def _plan_json(plan: Any, graph: Any) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for attr in ("python", "base_image", "collect_command", "test_command", "env", "post_create_command"):
        value = getattr(plan, attr, None)
        if value is not None:
            data[attr] = list(value) if isinstance(value, tuple) else value
    data["services"] = [getattr(s, "name", str(s)) for s in getattr(plan, "services", []) or []]
    try:
        data["graph"] = graph.to_json()
    except (AttributeError, TypeError):
        pass
    return data


def run_setup(repo: Path, settings: Any, engine: Any, store: Any = None, llm: Any = None, **kw: Any) -> RunRecord:
    """Plan, build, repair and replay until the target passes in a clean replay or a budget ends.
    See the module docstring. Keyword arguments are SetupLoop's collaborators (for tests)."""
    return SetupLoop(Path(repo), settings, engine, store, llm, **kw).run()
