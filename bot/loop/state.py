"""The state the loop's parts share, declared once. ``SetupLoop`` is assembled from one mixin
per seam (workspace, target, candidates, era, trials, replay); each reads and writes only what
is declared here, so the seams stay visible without passing a dozen collaborators around."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from bot.loop.records import KeptRepair, RunRecord
    from bot.loop.trajectory import Budget, Trajectory


class LoopBase:
    repo: Path
    settings: Any
    engine: Any
    store: Any
    llm: Any
    retriever: Any
    plan: Any
    graph: Any
    compile: Callable[[Any], Any]
    service_manager: Callable[[Any, str], Any]
    available: list[str]
    budget: "Budget"
    record: "RunRecord"
    traj: "Trajectory"
    n_builds: int
    tried: dict[tuple[str, str], set]
    failed_in_state: dict[frozenset, set]
    llm_repairs: list["KeptRepair"]
    tests_tried: dict[str, str]
    stop_reason: str
    _final: bool
    _era_cache: Any
    providers: dict[str, list[str]]
