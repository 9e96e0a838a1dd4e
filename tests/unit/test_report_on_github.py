"""The job summary, the PR body and the setup report as GitHub shows them (issue 20, item 7):
the verdict first, every list capped so a huge run stays under GitHub's limits, long lists
folded into <details>, and the stage timeline as an SVG file next to the report."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest
from markdown_it import MarkdownIt

from bot.outputs import fingerprint_files, generate_outputs, has_marker, outputs_from_pipeline
from bot.report import ReportData, RequirementRow, TestCounts, from_pipeline
from bot.report.render import (
    GITHUB_BODY_LIMIT,
    TRUNCATION_NOTE,
    BodyContext,
    render_comment,
    render_job_summary,
    render_pr_body,
    render_report,
)
from bot.report.timeline import TIMELINE_FILE, render_timeline_svg

STEP_SUMMARY_LIMIT = 1024 * 1024  # bytes per step (GitHub's $GITHUB_STEP_SUMMARY cap)
SVG = "{http://www.w3.org/2000/svg}"


def html(markdown: str) -> str:
    """GitHub-flavoured enough: CommonMark with tables and raw HTML blocks (<details>)."""
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def first_lines(text: str, n: int = 2) -> list[str]:
    """The first ``n`` lines a reader sees: blank lines and HTML comments (markers) left out."""
    return [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("<!--")][:n]


def report(**kw) -> ReportData:
    base = dict(
        repository="octo/app",
        verdict="Mostly",
        replay_ok=True,
        tests=TestCounts(collected=10, passed=9, failed=1),
        test_command=["python", "-m", "pytest"],
    )
    base.update(kw)
    return ReportData(**base)


# ------------------------------------------------------------------ verdict first


@pytest.mark.parametrize(
    "verdict, replay_ok, meaning, gate",
    [
        ("Full", True, "no charge stands", "setupbot proved this environment"),
        ("Mostly", None, "the environment works", "no clean replay ran: not proven"),
        ("Partial", True, "the environment works in part", "below the `Mostly` gate"),
        ("Shallow", False, "nothing was really tested", "below the `Mostly` gate"),
        ("Failed", False, "could not build an environment", "below the `Mostly` gate"),
        ("Weird", True, "does not know this verdict", "below the `Mostly` gate"),
    ],
)
def test_every_rendering_starts_with_the_verdict_and_what_it_means(verdict, replay_ok, meaning, gate):
    r = report(verdict=verdict, replay_ok=replay_ok, warnings=["w"] * 3)
    for name, text in (
        ("report", render_report(r)),
        ("body", render_pr_body(r, "a" * 32)),
        ("summary", render_job_summary(r, event="push", note="pull request #3: updated")),
        ("comment", render_comment(r)),
    ):
        title, means = first_lines(text)
        assert re.match(r"#+ \S+ Verdict: \*\*" + verdict + r"\*\*", title), (name, title)
        assert means.startswith(f"**{verdict}** means ") and meaning in means and gate in means, (name, means)
    assert "· setup report for octo/app" in first_lines(render_report(r))[0]
    assert first_lines(render_job_summary(r, event="push"))[0].endswith("· setupbot (push)")


def test_a_run_nobody_judged_says_so_instead_of_nothing_was_tested():
    """setupbot run --no-verify on hotpdf: 38 tests passed in the clean replay, and the report
    said Shallow means "nothing was really tested … or no test passed". Without the judge the
    verdict stays at its floor; the report says that, and the table still gives the counts."""
    from bot.report.model import from_pipeline

    data = from_pipeline(None, None, None, repository="octo/app")
    assert data.judged is False and data.verdict == "Shallow"
    data.tests = TestCounts(collected=82, passed=38, failed=40)
    text = render_report(data)
    _, means = first_lines(text)
    assert means.startswith("**Shallow** means not judged: no prosecutor and judge ran (`--no-verify`")
    assert "nothing was really tested" not in text and "| 82 | 38 | 40 |" in text
    # judged and Shallow: the tier's own meaning
    assert "nothing was really tested" in render_report(report(verdict="Shallow", replay_ok=False))


def test_the_title_escapes_what_the_repository_and_event_names_carry():
    r = report(repository="<img src=x> @team")
    title = first_lines(render_report(r))[0]
    assert "<img" not in title and "&lt;img" in title and "@\u200dteam" in title


# ------------------------------------------------------------------ a huge run stays under the limits


def huge_run():
    """A synthetic run record far beyond any real one: every list the renderings show is long."""
    n = 6000
    plan = {
        "python": "3.12",
        "base_image": "python:3.12-slim",
        "test_command": ["python", "-m", "pytest"],
        "graph": {
            "nodes": [
                {
                    "id": f"n{i}",
                    "type": "PACKAGE",
                    "name": f"package-{i}-" + "x" * 40,
                    "state": "SATISFIED",
                    "evidence": [[f"requirements/part{i}.txt", i + 1]],
                }
                for i in range(n)
            ]
        },
        "dockerfile_lines": [
            {"text": f"RUN pip install package-{i}==1.0 " + "--flag " * 20, "node_ids": [f"n{i}"]} for i in range(n)
        ],
        "warnings": [f"requirements/part{i}.txt:1: unpinned requirement " + "y" * 80 for i in range(n)],
        "services": [{"name": f"svc{i}", "image": f"postgres:{i}"} for i in range(300)],
    }
    run = {
        "replay": {"ok": True, "collect_exit": 0, "test_exit": 1, "seconds": 30.0},
        "tests": {"collected": 90000, "passed": 80000, "failed": 9000, "skipped": 1000},
        "repairs": [
            {"description": f"install libthing{i}-dev " + "z" * 60, "unit_ids": [f"xpu-{i}"]} for i in range(2000)
        ],
        "warnings": ["loop: " + "w" * 100] * 3000,
        "llm_usage": {"tokens": 10, "refusals": [{"reason": "edits .github/workflows", "reply": "r" * 300}] * 800},
        "members": [{"name": f"m{i}", "path": f"pkgs/m{i}", "tests": {"passed": 1}} for i in range(1500)],
        "unresolved": [
            {"message": f"no candidate for error {i} " + "u" * 80, "category": "unknown"} for i in range(3000)
        ],
        "timings": {"total_seconds": 2000.0},
    }
    verification = {
        "verdict": {"tier": "Partial", "reasons": ["r" * 100] * 50},
        "charges": [{"id": str(i), "kind": "console_script", "subject": f"tool-{i} " + "c" * 60} for i in range(3000)],
        "rulings": [{"charge_id": str(i), "decision": "upheld", "reason": "exit 1 " + "q" * 80} for i in range(3000)],
        "services": [{"name": f"svc{i}", "image": f"postgres:{i}", "healthy": True} for i in range(300)],
        "attribution": {"needed": {f"svc{i}": [f"tests/test_{j}.py::test_x" for j in range(500)] for i in range(300)}},
    }
    data = from_pipeline(plan, run, verification, repository="octo/huge")
    data.pending_changes = {f".devcontainer/file{i}": "".join(f"+line {j}\n" for j in range(3000)) for i in range(20)}
    data.timeline = TIMELINE_FILE
    return data


def test_a_huge_run_stays_under_the_summary_and_body_limits_without_being_cut():
    data = huge_run()
    # the run's 3,000 identical warnings are said once beside the plan's 6,000
    assert len(data.requirements) == 6000 and len(data.charges) == 3000 and len(data.warnings) == 6001
    comparison = SimpleNamespace(
        regression=True,
        summary="tests lost",
        details=[f"lost test {i}" for i in range(5000)],
        diff=[f"+ package {i}" for i in range(20000)],
    )
    summary = render_job_summary(data, event="pull_request", note="n", comparison=comparison, base="main")
    ctx = BodyContext(changes=[f"+ package {i}" for i in range(20000)], inputs_changed=["x"] * 500)
    body = render_pr_body(data, "f" * 32, ctx)
    comment = render_comment(data, comparison, "main")
    for name, text in (("summary", summary), ("body", body), ("comment", comment)):
        assert len(text) <= GITHUB_BODY_LIMIT, (name, len(text))
        # the caps did it: the text was not cut off at the end, so nothing after a list is lost
        assert TRUNCATION_NOTE.strip() not in text, name
        assert text.count("```") % 2 == 0 and text.count("<details") == text.count("</details>"), name
        assert "Verdict: **Partial**" in first_lines(text)[0], name
    assert len(summary.encode("utf-8")) <= STEP_SUMMARY_LIMIT
    assert "### Reproduce locally" in summary and "### How to stop setupbot" in body
    assert "… and 5970 more (see `.devcontainer/setup-report.md`)" in body  # 6000 requirements, 30 shown
    assert "… and 5970 more (see `.devcontainer/setup-report.md`)" in summary  # 30 shown
    assert "… and 2970 more (see `.devcontainer/setup-report.md`)" in summary  # charges
    # the committed report is the reference: every requirement, every charge
    full = render_report(data)
    assert all(f"package-{i}-" in full for i in (0, 2999, 5999)) and "tool-2999" in full
    assert "more (see" not in full


# ------------------------------------------------------------------ collapsible long lists


def _rows(n: int) -> list[RequirementRow]:
    return [RequirementRow("PACKAGE", f"pkg{i}", "SATISFIED", f"requirements.txt:{i + 1}") for i in range(n)]


def test_a_long_requirement_list_is_folded_and_its_table_still_renders():
    text = render_report(report(requirements=_rows(25), warnings=[f"warning {i}" for i in range(12)]))
    page = html(text)
    folded = re.search(r"<details><summary>25 requirements[^<]*</summary>(.*?)</details>", page, re.S)
    assert folded, page
    # the Markdown inside <details> is still a table (a blank line after <summary> makes GitHub parse it)
    assert "<table>" in folded.group(1) and folded.group(1).count("<tr>") == 26
    assert "<td>pkg24</td>" in folded.group(1)
    warnings = re.search(r"<details><summary>12 warnings</summary>(.*?)</details>", page, re.S)
    assert warnings and warnings.group(1).count("<li>") == 12


def test_a_short_requirement_list_stays_open():
    page = html(render_report(report(requirements=_rows(3))))
    assert "<details>" not in page and page.count("<tr>") >= 4


def test_a_capped_list_in_a_fold_is_closed_and_points_at_the_report():
    body = render_pr_body(report(requirements=_rows(100)), "a" * 32)
    page = html(body)
    folded = re.search(r"<details><summary>100 requirements[^<]*</summary>(.*?)</details>", page, re.S)
    assert folded and folded.group(1).count("<tr>") == 31  # the header and 30 rows
    assert "… and 70 more (see <code>.devcontainer/setup-report.md</code>)" in folded.group(1)


# ------------------------------------------------------------------ the stage timeline

STEPS = [
    {"action": "plan", "duration": 2.0, "at": 1002.0, "outcome": "ok"},
    {"action": "build", "duration": 60.0, "at": 1062.0, "outcome": "ok"},
    {"action": "test", "duration": 30.0, "at": 1092.0, "outcome": "failed"},
    {"action": "replay", "duration": 90.0, "at": 1182.0, "outcome": "ok"},
]


def _generate(steps=STEPS, existing=None, repository="octo/app"):
    r = ReportData(repository=repository, verdict="Full", replay_ok=True, test_command=["python", "-m", "pytest"])
    return generate_outputs(
        r, dockerfile_text="FROM python:3.12-slim\n", plan_json={"nodes": []}, existing=existing, timeline_steps=steps
    )


def test_the_timeline_is_written_next_to_the_report_and_linked_from_it():
    out = _generate()
    svg = out.files[f".devcontainer/{TIMELINE_FILE}"]
    assert has_marker(svg)  # setupbot may rewrite it; a person can take it over
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    titles = [t.text for t in root.iter(f"{SVG}title")]
    assert "replay: ok (90s)" in titles and "stage timeline: octo/app" in titles
    report_text = out.files[out.report_path]
    # a relative image link, not turned into a plain link by neutralise(), which defuses the
    # repository's images
    assert f"![The stage timeline of the run: where the time went]({TIMELINE_FILE})" in report_text
    assert re.search(r"<img src=\"setup-timeline.svg\"", html(report_text))
    body = render_pr_body(out.report, out.fingerprint)
    assert f"`.devcontainer/{TIMELINE_FILE}`" in body and "](setup-timeline.svg)" not in body
    assert out.volatile == [f".devcontainer/{TIMELINE_FILE}"]


def test_the_timeline_changes_with_every_run_but_not_the_fingerprint():
    first = _generate()
    slower = _generate([{**s, "duration": s["duration"] * 2, "at": s["at"] * 2} for s in STEPS])
    path = f".devcontainer/{TIMELINE_FILE}"
    assert first.files[path] != slower.files[path]
    assert first.fingerprint == slower.fingerprint
    assert first.fingerprint == fingerprint_files({p: t for p, t in first.files.items() if p != path})
    assert first.files[first.report_path] == slower.files[slower.report_path]


def test_without_a_trajectory_there_is_no_timeline_and_no_link():
    out = _generate(steps=[])
    assert not any(p.endswith(".svg") for p in out.files)
    assert "setup-timeline" not in out.files[out.report_path] and out.report.timeline == ""


def test_a_hand_written_timeline_is_left_alone():
    mine = '<svg xmlns="http://www.w3.org/2000/svg"><text>ours</text></svg>\n'
    out = _generate(existing=lambda p: mine if p.endswith(TIMELINE_FILE) else None)
    assert f".devcontainer/{TIMELINE_FILE}" not in out.files and f".devcontainer/{TIMELINE_FILE}" in out.kept
    assert "![" not in out.files[out.report_path]


HOSTILE = (
    'x"/><script>alert(1)</script><text y="1">]]>&amp;&#0;\x00\x01\x1b\ud800\ufffe'
    '<!-- --><?xml-stylesheet href="http://evil/"?><foreignObject><a href="javascript:1">'
)


def test_a_hostile_step_cannot_reach_the_svg_unescaped():
    steps = [
        *STEPS,
        {
            "action": "test",
            "duration": 5.0,
            "at": 1190.0,
            "outcome": HOSTILE,
            "command": [HOSTILE],
            "detail": {"label": HOSTILE},
        },
        {"action": HOSTILE, "duration": 5.0, "at": 1195.0, "outcome": "ok"},
        {"action": "build", "duration": "nan", "at": float("inf"), "outcome": "ok"},
        {"action": "build", "duration": {"x": 1}, "at": None, "outcome": ["ok"]},
    ]
    svg = render_timeline_svg(steps, title=HOSTILE)
    root = ET.fromstring(svg)  # well-formed whatever the input held
    assert {el.tag.removeprefix(SVG) for el in root.iter()} <= {"svg", "title", "rect", "text", "line"}
    assert not any(k.startswith("on") or "href" in k for el in root.iter() for k in el.attrib)
    for needle in ("<script", "<foreignObject", "<?xml-stylesheet", '<text y="1">', "\x00", "\x1b"):
        assert needle not in svg, needle
    titles = [t.text or "" for t in root.iter(f"{SVG}title")]
    # the step's own text never becomes its label: only setupbot's words and numbers do
    assert "test: other (5s)" in titles and not any("alert" in t for t in titles[1:])
    # the title keeps the characters XML can carry, escaped in the file and intact once parsed
    assert titles[0].startswith('x"/><script>alert(1)</script>')
    for rect in root.iter(f"{SVG}rect"):
        assert all(re.fullmatch(r"[0-9.]+%?", rect.get(k, "0")) for k in ("x", "y", "width", "height"))


def test_outputs_from_a_run_record_carry_the_timeline(tmp_path):
    from bot.loop.records import RunRecord
    from bot.loop.trajectory import Step, Trajectory

    trajectory = Trajectory()
    for s in STEPS:
        trajectory.add(Step(s["action"], duration=s["duration"], at=s["at"], outcome=s["outcome"]))
    record = RunRecord(repo=str(tmp_path), run_id="r1", trajectory=trajectory)
    plan = {
        "python": "3.12",
        "base_image": "python:3.12-slim",
        "graph": {"nodes": []},
        "dockerfile": "FROM python:3.12-slim\n",
    }
    out = outputs_from_pipeline(tmp_path, plan=plan, run_record=record, repository="octo/app")
    root = ET.fromstring(out.files[f".devcontainer/{TIMELINE_FILE}"])
    assert len([r for r in root.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]) == 4
    assert f"]({TIMELINE_FILE})" in out.files[out.report_path]
