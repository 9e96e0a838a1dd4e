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

from bot import progress
from bot.redact import global_redactor

OUTPUT_TAIL = 2000


@dataclass
class Step:
    action: str  # build, collect, test, trial, keep, rollback, replay, llm, ...
    command: list[str] = field(default_factory=list)
    exit_code: int | None = None
    output_tail: str = ""
    duration: float = 0.0
    snapshot: str = ""
    outcome: str = ""  # ok, failed, improved, worse, kept, rolled_back, refused, ...
    detail: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        red = global_redactor()
        return {
            "action": self.action,
            "command": [red(c) for c in self.command],
            "exit_code": self.exit_code,
            "output_tail": red(self.output_tail[-OUTPUT_TAIL:]),
            "duration": round(self.duration, 3),
            "snapshot": self.snapshot,
            "outcome": self.outcome,
            "detail": self.detail,
            "at": round(self.at, 3),
        }


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
    """Steps and wall clock for one run. ``clock`` is injectable so tests need not sleep.

    The wall clock is planned, not just checked: a slice is kept back (``reserve``) for the clean
    replay of the best state and for writing the outputs, trial work may use only what is left
    before it (``work_left``), and no command runs past what its phase may use."""

    # before anything was measured, this share of the wall clock is kept for the replay
    RESERVE_SHARE = 0.3
    # writing outputs and records, removing containers, and the engine's kill-on-timeout path
    # (a container restart) after a command is cut
    FINISH_SECONDS = 20.0

    def __init__(self, max_steps: int, wall_clock: float, command_timeout: int, clock=time.monotonic) -> None:
        self.max_steps = max_steps
        self.wall_clock = wall_clock
        self.command_timeout = command_timeout
        self._clock = clock
        self.started = clock()
        self.steps = 0
        self.build_seconds: float | None = None  # the slowest image build measured so far
        self.target_seconds: float | None = None  # the slowest target evaluation measured so far
        self.command_seconds: float | None = None  # the slowest trial command (an install) so far

    def spend_step(self) -> None:
        self.steps += 1
        progress.current().step(self.steps, self.max_steps)

    def now(self) -> float:
        return self._clock()

    @property
    def elapsed(self) -> float:
        return self._clock() - self.started

    @property
    def left(self) -> float:
        return self.wall_clock - self.elapsed

    def measured(
        self, *, build: float | None = None, target: float | None = None, command: float | None = None
    ) -> None:
        if command is not None:
            self.command_seconds = max(self.command_seconds or 0.0, command)
        if build is not None:
            self.build_seconds = max(self.build_seconds or 0.0, build)
        if target is not None:
            self.target_seconds = max(self.target_seconds or 0.0, target)

    @property
    def reserve(self) -> float:
        """Seconds kept for the clean replay (a no-cache build and one target run) and the end of
        the run. Measured durations once there are any; never more than 80 % of the wall clock, so
        that a slow build still leaves room to try something."""
        if self.build_seconds is None:
            estimate = self.wall_clock * self.RESERVE_SHARE
        else:
            # until a target run was measured (the first one may never end: a suite that sleeps),
            # the replay's tests get a tenth of the run, at least half a minute
            target = self.target_seconds if self.target_seconds is not None else max(30.0, self.wall_clock * 0.1)
            estimate = self.build_seconds * 1.2 + target + self.FINISH_SECONDS
        return min(max(estimate, self.FINISH_SECONDS), self.wall_clock * 0.8)

    def work_left(self) -> float:
        """Seconds trial work may still use before the reserve."""
        return self.left - self.reserve

    def can_start(self, seconds: float) -> bool:
        """Whether work expected to take ``seconds`` finishes before the reserve."""
        return seconds <= self.work_left()

    def can_replay(self) -> bool:
        """Whether a clean replay may still start: its image build as measured so far fits
        before the end of the run. Every command of the replay is cut at that end anyway, so
        starting one that turns out slower than measured costs work, never the budget."""
        return (self.build_seconds or 0.0) + self.FINISH_SECONDS <= self.left

    def exhausted(self) -> str:
        """Why the budget for trial work is spent, or "" while there is some left."""
        if self.steps >= self.max_steps:
            return f"step budget spent ({self.steps}/{self.max_steps} steps)"
        if self.elapsed >= self.wall_clock:
            return f"wall-clock budget spent ({self.elapsed:.0f}s of {self.wall_clock:.0f}s)"
        if self.work_left() <= 0:
            return (
                f"wall-clock budget spent for trials ({self.elapsed:.0f}s of {self.wall_clock:.0f}s; "
                f"the last {self.reserve:.0f}s are kept for the clean replay and the outputs)"
            )
        return ""

    def timeout_for_command(self, *, final: bool = False) -> int:
        """A command never runs past what its phase may use: trial work stops at the reserve,
        the clean replay (``final``) at the run's wall clock less the time to finish."""
        return max(1, min(self.command_timeout, int(self.room(final=final))))

    def room(self, *, final: bool = False) -> float:
        """Seconds the current phase may still use: trial work up to the reserve, the clean
        replay up to the end of the run less the time to write outputs and clean up."""
        return self.left - (self.FINISH_SECONDS if final else self.reserve)
