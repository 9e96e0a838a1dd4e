"""Plain result records returned by the engine."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ExecResult:
    argv: list[str]
    exit_code: int
    output: str  # stdout and stderr interleaved
    duration: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class BuildResult:
    ok: bool
    tag: str
    log: str
    seconds: float
    ca_bases: dict[str, str] = field(default_factory=dict)  # base image -> transient CA derivative
    # Set when a configured limit did not hold for this build (BuildKit: no per-build memory or
    # CPU limits); the report repeats it.
    limits_note: str = ""
    # How many RUN, COPY and ADD steps came from the engine's layer cache (count_cached_steps);
    # None when not known. 0: every such step ran in this build, as in a --no-cache build.
    cached_steps: int | None = None
