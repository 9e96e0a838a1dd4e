"""The stage timeline of a run as a small SVG: one lane per stage (plan, build, tests, repair,
replay, verify), one bar per trajectory step, coloured by its outcome. People look at it to see
where the time went; the report links the file (GitHub renders SVG files, not inline <svg>).

Input is the trajectory (``Step.to_json()`` dicts): ``at`` is when a step was recorded (its
end) and ``duration`` how long it took."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bot.report.render import environment

LANES = ("plan", "build", "tests", "repair", "replay", "verify")
LANE_OF = {"plan": "plan", "era": "plan", "build": "build", "trial-build": "build", "start": "build",
           "services": "build", "collect": "tests", "test": "tests", "target": "tests", "trial": "repair",
           "keep": "repair", "rollback": "repair", "snapshot": "repair", "llm": "repair",
           "replay": "replay", "replay-result": "replay", "verify": "verify", "prosecute": "verify",
           "judge": "verify"}
GOOD = {"ok", "kept", "improved", "passed"}
BAD = {"failed", "worse", "refused", "abandoned", "error"}


@dataclass
class Bar:
    lane: str
    start: float      # seconds from the start of the run
    seconds: float
    outcome: str      # good | bad | neutral
    label: str


def bars_from_steps(steps: Iterable[dict[str, Any]]) -> list[Bar]:
    steps = [s for s in steps if s.get("action") in LANE_OF]
    if not steps:
        return []
    t0 = min(float(s.get("at", 0)) - float(s.get("duration") or 0) for s in steps)
    bars = []
    for s in steps:
        seconds = max(float(s.get("duration") or 0), 0.0)
        outcome = str(s.get("outcome") or "")
        kind = "good" if outcome in GOOD else "bad" if outcome in BAD else "neutral"
        label = f"{s['action']}: {outcome or 'done'} ({seconds:.0f}s)"
        bars.append(Bar(LANE_OF[s["action"]], float(s.get("at", 0)) - seconds - t0, seconds, kind, label))
    return bars


def _ticks(total: float) -> list[int]:
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600):
        if total / step <= 8:
            return list(range(0, int(total) + 1, step))
    return [0, int(total)]


def render_timeline_svg(steps: Iterable[dict[str, Any]], *, width: int = 640, title: str = "stage timeline") -> str:
    """The SVG text (templates/report/_timeline.svg.j2); an empty trajectory gives an empty chart."""
    bars = bars_from_steps(steps)
    lanes = [lane for lane in LANES if any(b.lane == lane for b in bars)] or list(LANES[:1])
    total = max([b.start + b.seconds for b in bars] + [1.0])
    left, right, top, lane_h = 64, 16, 28, 22
    scale = (width - left - right) / total
    shapes = [{"x": round(left + b.start * scale, 1), "y": top + lanes.index(b.lane) * lane_h + 4,
               "w": round(max(b.seconds * scale, 1.5), 1), "h": lane_h - 8, "kind": b.outcome, "label": b.label}
              for b in bars]
    height = top + len(lanes) * lane_h + 22
    ticks = [{"x": round(left + t * scale, 1), "label": f"{t // 60}m" if t >= 120 and t % 60 == 0 else f"{t}s"}
             for t in _ticks(total)]
    return environment().get_template("report/_timeline.svg.j2").render(
        width=width, height=height, title=title, lanes=[{"name": n, "y": top + i * lane_h} for i, n in enumerate(lanes)],
        lane_h=lane_h, left=left, right=right, bars=shapes, ticks=ticks, axis_y=top + len(lanes) * lane_h,
        total=f"{total:.0f}s")
