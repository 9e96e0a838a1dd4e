"""Trajectory record and budgets.

The trajectory is one JSON object per line: what the loop did, the command, its exit code, the
tail of its output, how long it took, the snapshot it ran on and the outcome. The report and the
learning step read it; it never holds secrets (output passes through the redactor).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.redact import global_redactor

OUTPUT_TAIL = 2000


@dataclass
class Step:
    action: str                     # build, collect, test, trial, keep, rollback, replay, llm, ...
    command: list[str] = field(default_factory=list)
    exit_code: int | None = None
    output_tail: str = ""
    duration: float = 0.0
    snapshot: str = ""
    outcome: str = ""               # ok, failed, improved, worse, kept, rolled_back, refused, ...
    detail: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        red = global_redactor()
        return {"action": self.action, "command": [red(c) for c in self.command],
                "exit_code": self.exit_code, "output_tail": red(self.output_tail[-OUTPUT_TAIL:]),
                "duration": round(self.duration, 3), "snapshot": self.snapshot,
                "outcome": self.outcome, "detail": self.detail, "at": round(self.at, 3)}


class Trajectory:
    """An append-only list of steps, mirrored to a JSON-lines file when a path is given."""

    def __init__(self, path: Path | None = None) -> None:
        self.steps: list[Step] = []
        self.path = path
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")

    def add(self, step: Step) -> Step:
        self.steps.append(step)
        if self.path is not None:
            with self.path.open("a") as fh:
                fh.write(json.dumps(step.to_json()) + "\n")
        return step

    def record(self, action: str, **kw: Any) -> Step:
        return self.add(Step(action, **kw))

    def to_jsonl(self) -> str:
        return "".join(json.dumps(s.to_json()) + "\n" for s in self.steps)

    def __len__(self) -> int:
        return len(self.steps)


class Budget:
    """Steps and wall clock for one run. ``clock`` is injectable so tests need not sleep."""

    def __init__(self, max_steps: int, wall_clock: float, command_timeout: int, clock=time.monotonic) -> None:
        self.max_steps = max_steps
        self.wall_clock = wall_clock
        self.command_timeout = command_timeout
        self._clock = clock
        self.started = clock()
        self.steps = 0

    def spend_step(self) -> None:
        self.steps += 1
        from bot import progress

        progress.current().step(self.steps, self.max_steps)

    @property
    def elapsed(self) -> float:
        return self._clock() - self.started

    def exhausted(self) -> str:
        """Why the budget is spent, or "" while there is budget left."""
        if self.steps >= self.max_steps:
            return f"step budget spent ({self.steps}/{self.max_steps} steps)"
        if self.elapsed >= self.wall_clock:
            return f"wall-clock budget spent ({self.elapsed:.0f}s of {self.wall_clock:.0f}s)"
        return ""

    def timeout_for_command(self) -> int:
        """A command never runs past the run's wall clock."""
        left = max(30, int(self.wall_clock - self.elapsed))
        return min(self.command_timeout, left)
