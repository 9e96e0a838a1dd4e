"""The stage timeline of a run as a small SVG: one lane per stage (plan, build, tests, repair,
replay, verify), one bar per trajectory step, coloured by its outcome. People look at it to see
where the time went; the report links the file (GitHub renders SVG files, not inline <svg>).

Input is the trajectory (``Step.to_json()`` dicts): ``at`` is when a step was recorded (its
end) and ``duration`` how long it took.

What reaches the SVG: lane names and step actions from the tables below (setupbot's own words; a
step whose action is not in them is left out), outcomes that are plain words (anything else is
shown as "other"), numbers computed here, and the title. Every text node and attribute is
XML-escaped by the template, and characters XML cannot carry are dropped, so the file parses
whatever the trajectory or the title holds (issue 20, item 7)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bot.report.render import REPORT_MARKER, environment

TIMELINE_FILE = "setup-timeline.svg"  # next to the setup report in the output folder
# characters XML 1.0 cannot carry even escaped (control characters, lone surrogates, U+FFFE/F)
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_WORD = re.compile(r"[a-z][a-z_-]{0,23}")
# A bar narrower than a pixel shows nothing; past this many, the shortest steps are left out so a
# runaway trajectory cannot make a huge file.
MAX_BARS = 1000

LANES = ("plan", "build", "tests", "repair", "replay", "verify")
LANE_OF = {
    "plan": "plan",
    "era": "plan",
    "build": "build",
    "trial-build": "build",
    "start": "build",
    "services": "build",
    "collect": "tests",
    "test": "tests",
    "target": "tests",
    "trial": "repair",
    "keep": "repair",
    "rollback": "repair",
    "snapshot": "repair",
    "llm": "repair",
    "replay": "replay",
    "replay-result": "replay",
    "dev-stage": "replay",
    "verify": "verify",
    "prosecute": "verify",
    "judge": "verify",
}
GOOD = {"ok", "kept", "improved", "passed"}
BAD = {"failed", "worse", "refused", "abandoned", "error"}


@dataclass
class Bar:
    lane: str
    start: float  # seconds from the start of the run
    seconds: float
    outcome: str  # good | bad | neutral
    label: str


def xml_text(value: object, limit: int = 200) -> str:
    """``value`` as text XML can hold (escaping is the template's job): no control characters,
    one line, at most ``limit`` characters."""
    return " ".join(_NOT_XML.sub("", str(value)).split())[:limit]


def _number(value: Any) -> float:
    """A finite number of seconds (0 for anything else: a missing, NaN or infinite value)."""
    try:
        number = float(value or 0)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def bars_from_steps(steps: Iterable[dict[str, Any]]) -> list[Bar]:
    steps = [s for s in steps if isinstance(s, dict) and isinstance(s.get("action"), str) and s["action"] in LANE_OF]
    if not steps:
        return []
    t0 = min(_number(s.get("at")) - max(_number(s.get("duration")), 0.0) for s in steps)
    bars = []
    for s in steps:
        seconds = max(_number(s.get("duration")), 0.0)
        outcome = str(s.get("outcome") or "")
        kind = "good" if outcome in GOOD else "bad" if outcome in BAD else "neutral"
        # the label is built from setupbot's own words: the action is a key of LANE_OF, the
        # outcome a plain word or "other"
        shown = outcome if _WORD.fullmatch(outcome) else ("other" if outcome else "done")
        label = f"{s['action']}: {shown} ({seconds:.0f}s)"
        bars.append(Bar(LANE_OF[s["action"]], max(_number(s.get("at")) - seconds - t0, 0.0), seconds, kind, label))
    if len(bars) > MAX_BARS:
        keep = set(map(id, sorted(bars, key=lambda b: -b.seconds)[:MAX_BARS]))
        bars = [b for b in bars if id(b) in keep]
    return bars


def _ticks(total: float) -> list[int]:
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600):
        if total / step <= 8:
            return list(range(0, int(total) + 1, step))
    return [0, int(total)]


def render_timeline_svg(steps: Iterable[dict[str, Any]], *, width: int = 640, title: str = "stage timeline") -> str:
    """The SVG text (templates/report/_timeline.svg.j2); an empty trajectory gives an empty chart.
    Its first line is setupbot's marker, as an XML comment: a person who removes it keeps the file."""
    bars = bars_from_steps(steps)
    lanes = [lane for lane in LANES if any(b.lane == lane for b in bars)] or list(LANES[:1])
    total = max([b.start + b.seconds for b in bars] + [1.0])
    left, right, top, lane_h = 64, 16, 28, 22
    scale = (width - left - right) / total
    shapes = [
        {
            "x": round(left + b.start * scale, 1),
            "y": top + lanes.index(b.lane) * lane_h + 4,
            "w": round(max(b.seconds * scale, 1.5), 1),
            "h": lane_h - 8,
            "kind": b.outcome,
            "label": b.label,
        }
        for b in bars
    ]
    height = top + len(lanes) * lane_h + 22
    ticks = [
        {"x": round(left + t * scale, 1), "label": f"{t // 60}m" if t >= 120 and t % 60 == 0 else f"{t}s"}
        for t in _ticks(total)
    ]
    return (
        environment()
        .get_template("report/_timeline.svg.j2")
        .render(
            marker=REPORT_MARKER,
            width=width,
            height=height,
            title=xml_text(title),
            lanes=[{"name": n, "y": top + i * lane_h} for i, n in enumerate(lanes)],
            lane_h=lane_h,
            left=left,
            right=right,
            bars=shapes,
            ticks=ticks,
            axis_y=top + len(lanes) * lane_h,
            total=f"{total:.0f}s",
        )
    )
