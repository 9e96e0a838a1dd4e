"""The state the loop's parts share, declared once. ``SetupLoop`` is assembled from one mixin
per seam (workspace, target, candidates, era, trials, replay); each reads and writes only what
is declared here, so the seams stay visible without passing a dozen collaborators around.
The graph is the only state a repair changes; ``undo_to`` (trials.py) is the only way back."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.loop.devstage import DevStageBuild
    from bot.loop.diagnose import Signature
    from bot.loop.lock import LockFile, LockOutcome, PendingLock, PlanLock
    from bot.loop.records import Checkpoint, KeptRepair, RunRecord
    from bot.loop.repair import Candidate
    from bot.loop.target import TargetOutcome
    from bot.loop.trajectory import Budget, Trajectory
    from bot.loop.workspace import Workspace


class LoopBase:
    repo: Path
    settings: Any
    engine: Any
    store: Any
    llm: Any
    retriever: Any
    plan: Any  # a view over the graph (bot.compile.plan.Plan)
    compile: Callable[[Any], Any]
    service_manager: Callable[[Any, str], Any]
    available: list[str]
    budget: Budget
    record: RunRecord
    traj: Trajectory
    n_builds: int
    tried: dict[tuple[str, str], set]
    failed_in_state: dict[frozenset, set]
    llm_repairs: list[KeptRepair]
    tests_tried: dict[str, str]
    stop_reason: str
    _final: bool
    _era_cache: Any
    providers: dict[str, list[str]]
    reoffered: set  # kept candidates a clean replay disproved, offered again
    _counts_checked: bool  # the clean replay was checked once against the repairs kept on counts
    _prelock: PendingLock | None  # a lock drafted from the working image for the replay to build
    _prelocked: LockOutcome | None  # that lock, once the replay proved it
    _prelock_refused: str  # why the replay of that lock did not hold
    _planlock: PlanLock | None  # a lock resolved from the plan, which the first image installs
    _lock_before: tuple[LockFile, str | None] | None  # the lock file as the run found it
    _dev_build: DevStageBuild | None  # the development stage, built beside the run's first build
    _repo_context: dict[str, str] | None  # what units may be conditioned on (repair.repo_context), read once

    if TYPE_CHECKING:
        # what one seam calls on another (defined in the mixin named; SetupLoop has them all)
        @property
        def python(self) -> str: ...  # orchestrator

        def open_workspace(self, *, no_cache: bool = False, purpose: str = "build") -> Workspace: ...  # workspace

        def open_on_image(self, tag: str, *, purpose: str) -> Workspace: ...  # workspace

        def _build_timeout(self) -> int: ...  # workspace

        def _exec(
            self, ws: Workspace, argv: list[str], action: str, env: Mapping[str, str] | None = None
        ) -> Any: ...  # workspace

        def _ensure_forwarding(self, ws: Workspace) -> None: ...  # workspace

        def evaluate(self, ws: Workspace, env: Mapping[str, str] | None = None) -> TargetOutcome: ...  # target

        def era_candidates(self, sig: Signature, log_text: str = "") -> list[Candidate]: ...  # era

        def _ran(self, outcome: TargetOutcome) -> bool: ...  # orchestrator

        def undo_to(self, ws: Workspace, cp: Checkpoint, *, depth: int | None = None) -> list[KeptRepair]: ...  # trials

        def _drop_plan_lock(self, why: str) -> None: ...  # replay

    @property
    def graph(self) -> Any:
        """The loop's only state: the plan's graph. Every fact the loop needs (Python, services,
        test command, environment) is read from it through the plan, never copied."""
        return self.plan.graph

    @graph.setter
    def graph(self, graph: Any) -> None:
        self.plan.graph = graph
