"""The stage timeline SVG: well-formed, one lane per stage that ran, bars where the time went,
and labels escaped (step names can come from the repository)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from bot.report.timeline import bars_from_steps, render_timeline_svg

NS = {"s": "http://www.w3.org/2000/svg"}

STEPS = [
    {"action": "plan", "duration": 2.0, "at": 1002.0, "outcome": "ok"},
    {"action": "build", "duration": 60.0, "at": 1062.0, "outcome": "ok"},
    {"action": "collect", "duration": 8.0, "at": 1070.0, "outcome": "failed"},
    {"action": "trial", "duration": 20.0, "at": 1090.0, "outcome": ""},
    {
        "action": "keep",
        "duration": 0.0,
        "at": 1090.0,
        "outcome": "kept",
        "command": ["pip_install <script>alert(1)</script>"],
    },
    {"action": "replay", "duration": 90.0, "at": 1180.0, "outcome": "ok"},
    {"action": "something-new", "duration": 5.0, "at": 1185.0, "outcome": "ok"},
]


def test_bars_start_where_the_step_began():
    bars = bars_from_steps(STEPS)
    assert [b.lane for b in bars] == ["plan", "build", "tests", "repair", "repair", "replay"]
    assert bars[0].start == 0 and bars[1].start == 2 and bars[-1].start == 90
    assert [b.outcome for b in bars[:3]] == ["good", "good", "bad"]


def test_svg_is_well_formed_with_a_lane_per_stage_that_ran():
    svg = render_timeline_svg(STEPS, title="run <acme/app>")
    root = ET.fromstring(svg)
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert ["plan", "build", "tests", "repair", "replay"] == [
        t for t in texts if t in ("plan", "build", "tests", "repair", "replay", "verify")
    ]
    assert "run <acme/app> (180s)" in texts  # escaped in the file, intact when parsed
    assert "<acme" not in svg
    bars = [r for r in root.findall("s:rect", NS) if r.find("s:title", NS) is not None]
    assert len(bars) == 6
    widths = {r.find("s:title", NS).text: float(r.get("width")) for r in bars}
    # the replay took 1.5x the build: the bars say so
    assert abs(widths["replay: ok (90s)"] / widths["build: ok (60s)"] - 1.5) < 0.05
    assert float(max(float(r.get("x")) + float(r.get("width")) for r in bars)) <= 640


def test_an_empty_trajectory_still_renders():
    root = ET.fromstring(render_timeline_svg([]))
    assert root.get("width") == "640"
