"""What a run leaves behind: the kept repairs and the run record the outputs are written from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.junit import TestResults
from bot.loop.diagnose import Signature
from bot.loop.repair import Candidate
from bot.loop.trajectory import Trajectory


@dataclass(frozen=True)
class Checkpoint:
    """The loop's state at one moment, enough to return to it (``SetupLoop.undo_to``): the graph
    (the only state the outputs come from), the runner container's snapshot depth in the
    workspace it was taken in, and the kept repairs made so far."""

    graph: dict[str, Any]  # graph JSON
    workspace: str = ""  # the workspace's image tag
    depth: int | None = None  # snapshot depth; None: no container to roll back
    target_env: dict[str, str] = field(default_factory=dict)
    kept: int = 0  # len(record.repairs)


@dataclass
class ReplayRun:
    """The clean replay's test run as it happened: the image, the command and variables, and
    what the run printed and reported. The verification takes it instead of running the same
    command on the same image again (``bot.pipeline``). Never serialised: ``env`` may hold
    credentials."""

    tag: str
    argv: list[str]
    env: dict[str, str]
    output: str
    junit_xml: str | None  # the JUnit report pytest wrote; None for other runners
    exit_code: int | None
    timed_out: bool


@dataclass
class KeptRepair:
    signature: Signature | None
    candidate: Candidate
    log_excerpt: str
    checkpoint: Checkpoint | None = None  # the state before the repair: undo_to returns there
    alternatives: list[Candidate] = field(default_factory=list)
    before_idents: set = field(default_factory=set)
    # tests that passed in the state before the trial: a repair kept on counts alone (the era set
    # for failing assertions) is checked against the clean replay's
    before_passed: int | None = None

    @property
    def in_container(self) -> bool:
        """Trialled in a runner container (a snapshot can take it back)."""
        return self.checkpoint is not None and self.checkpoint.depth is not None

    def to_json(self) -> dict[str, Any]:
        return {"signature": self.signature.to_json() if self.signature else None, "repair": self.candidate.to_json()}


@dataclass
class RunRecord:
    repo: str
    run_id: str
    status: str = "running"  # success | no_tests | unresolved | over_budget | interrupted | error
    degraded: bool = False
    plan: dict[str, Any] = field(default_factory=dict)
    dockerfile: str = ""
    trajectory: Trajectory = field(default_factory=Trajectory)
    repairs: list[KeptRepair] = field(default_factory=list)
    replay: dict[str, Any] = field(default_factory=dict)
    tests: TestResults = field(default_factory=TestResults)
    timings: dict[str, float] = field(default_factory=dict)
    unresolved: list[dict[str, Any]] = field(default_factory=list)
    remaining: str = ""
    llm_usage: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    best: dict[str, Any] = field(default_factory=dict)
    members: list[dict[str, Any]] = field(default_factory=list)  # a workspace: each member's results
    strategies: list[dict[str, Any]] = field(default_factory=list)  # generic strategies tried
    lock_text: str = ""  # the requirements lock the clean replay proved
    replay_run: ReplayRun | None = None  # the passing clean replay's test run (not in to_json)

    @property
    def succeeded(self) -> bool:
        return self.status == "success"

    def to_json(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "run_id": self.run_id,
            "status": self.status,
            "degraded": self.degraded,
            "repairs": [r.to_json() for r in self.repairs],
            "replay": self.replay,
            "tests": self.tests.record_json(),
            "timings": self.timings,
            "unresolved": self.unresolved,
            "remaining": self.remaining,
            "llm_usage": self.llm_usage,
            "warnings": self.warnings,
            "best": self.best,
            "members": self.members,
            "strategies": self.strategies,
            "steps": len(self.trajectory),
        }


def member_results(graph: Any, results: TestResults) -> list[dict[str, Any]]:
    """A workspace's members, each with the results of its own tests (JUnit class names start
    with the member's folder, dotted: packages/core-lib -> packages.core-lib.)."""
    nodes = getattr(graph, "nodes", None)
    if not isinstance(nodes, dict):
        return []
    members = sorted((n for n in nodes.values() if n.attrs.get("member")), key=lambda n: n.attrs.get("order", 0))
    out = []
    for n in members:
        prefix = n.attrs["path"].replace("/", ".") + "."
        own = TestResults({t: o for t, o in results.outcomes.items() if t.startswith(prefix)})
        out.append(
            {"name": n.name, "path": n.attrs["path"], "tested_by_ci": bool(n.attrs.get("ci")), "tests": own.counts()}
        )
    return out
