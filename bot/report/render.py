"""Render the setup report, the PR body, the PR comment and the job summary from ``ReportData``.

All text lives in ``templates/report/``; this module only supplies the Jinja environment and the
filters that keep repository-controlled strings from breaking the Markdown around them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from bot import __version__
from bot.markers import MARKER_TEXT
from bot.redact import global_redactor
from bot.report.model import ReportData
from bot.report.neutralise import neutralise
from bot.templating import make_environment

# GitHub rejects PR bodies and comments over 65,536 characters.
GITHUB_BODY_LIMIT = 65536
REPORT_MARKER = f"<!-- {MARKER_TEXT}: remove this line to keep your own version -->"
COMMENT_MARKER = "<!-- setupbot:comment -->"
HANDBACK_MARKER = "<!-- setupbot:handback -->"
HANDBACK_COMMENT_MARKER = "<!-- setupbot:handback-comment -->"
HANDBACK_TICKED_RE = re.compile(r"^\s*[-*]\s*\[[xX]\][^\n]*" + re.escape(HANDBACK_MARKER), re.M)
FINGERPRINT_RE = re.compile(r"<!-- setupbot:fingerprint=([0-9a-f]{16,64}) -->")
# The stage timeline image in the committed report. neutralise() turns every Markdown image into
# a link (a repository must not make a reviewer's browser load anything); this one is setupbot's
# own file next to the report, so it goes in after that pass, by a name setupbot chose.
TIMELINE_PLACEHOLDER = "<!-- setupbot:timeline -->"
TIMELINE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\.svg")
TRUNCATION_NOTE = "\n\n…(shortened to fit GitHub's limit; the full report is in the pull request's files)\n"


def _inline(value: object) -> str:
    """One line of Markdown text: no newlines, no raw HTML, no stray backticks."""
    text = " ".join(str(value if value is not None else "").split())
    return neutralise(text.replace("<", "&lt;").replace(">", "&gt;").replace("`", "'"))


def _cell(value: object) -> str:
    return _inline(value).replace("|", "\\|")


def _code(value: object) -> str:
    """The inside of a `code span`: one line, no backticks. Not HTML-escaped, because Markdown
    shows entities inside code spans literally (`pytest&gt;=8`)."""
    return " ".join(str(value if value is not None else "").split()).replace("`", "'")


def _codecell(value: object) -> str:
    return _code(value).replace("|", "\\|")


def _nofence(value: object) -> str:
    """Text inside a fenced block must not be able to close the fence."""
    return str(value if value is not None else "").replace("```", "ʼʼʼ")


def _clip(value: object, width: int) -> str:
    """At most ``width`` characters, ending in "…" when cut. Applied before the escaping filters,
    so an escape is never cut in half."""
    text = str(value if value is not None else "")
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _yamlstr(value: object) -> str:
    """A YAML scalar that stays data whatever it holds (a JSON string is valid YAML)."""
    return json.dumps(str(value))


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """One shared environment: templates are parsed once per process."""
    return make_environment(
        filters={
            "clip": _clip,
            "yamlstr": _yamlstr,
            "inline": _inline,
            "cell": _cell,
            "code": _code,
            "codecell": _codecell,
            "nofence": _nofence,
            "filesize": lambda n: jinja2.filters.do_filesizeformat(n, binary=True),
        }
    )


def _tidy(text: str) -> str:
    # Optional sections leave blank runs behind; collapse them so the Markdown reads cleanly.
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def _render(name: str, **context: object) -> str:
    # neutralise() once more over the whole text: whatever reached it from the repository by a
    # path the filters missed still notifies nobody, closes nothing and loads no image
    return neutralise(global_redactor()(_tidy(environment().get_template(name).render(**context))))


def render_report(report: ReportData) -> str:
    text = _render(
        "report/setup-report.md.j2", r=report, marker=REPORT_MARKER, timeline_placeholder=TIMELINE_PLACEHOLDER
    )
    image = ""
    if report.timeline and TIMELINE_NAME_RE.fullmatch(report.timeline):
        # a relative link: GitHub shows the file next to the report (not an inline <svg>, which it strips)
        image = f"![The stage timeline of the run: where the time went]({report.timeline})"
    if not image:
        return text.replace(TIMELINE_PLACEHOLDER + "\n\n", "", 1).replace(TIMELINE_PLACEHOLDER, "", 1)
    return text.replace(TIMELINE_PLACEHOLDER, image, 1)


def fingerprint_marker(fingerprint: str) -> str:
    return f"<!-- setupbot:fingerprint={fingerprint} -->"


def read_fingerprint(body: str | None) -> str | None:
    match = FINGERPRINT_RE.search(body or "")
    return match.group(1) if match else None


def truncate_body(text: str, limit: int = GITHUB_BODY_LIMIT) -> str:
    """Cut at a line boundary, close an open code fence or <details>, add a note; the result is
    never longer than ``limit``. Markers live at the top, so they survive the cut."""
    if len(text) <= limit:
        return text
    budget = limit - len(TRUNCATION_NOTE) - len("\n```\n</details>\n")
    cut = text[:budget]
    if "\n" in cut:
        cut = cut[: cut.rfind("\n")]
    if cut.count("```") % 2:
        cut += "\n```"
    if cut.count("<details>") > cut.count("</details>"):
        cut += "\n</details>"
    return cut + TRUNCATION_NOTE


@dataclass
class BodyContext:
    """What the PR body says beyond the report: what changed since the last update, which
    setupbot made it and the workflow run that did."""

    changes: list[str] = field(default_factory=list)  # "+ package lxml" / "- ..."
    inputs_changed: list[str] = field(default_factory=list)
    previous: str = ""  # e.g. an earlier proposal was declined
    first: bool = True
    run_url: str = ""
    version: str = ""


def run_url(environ: Mapping[str, str] | None = None) -> str:
    """``$GITHUB_SERVER_URL/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID``, or "" outside Actions."""
    env = os.environ if environ is None else environ
    server, repo, run_id = (env.get(k, "") for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if not (
        server
        and repo
        and run_id.isdigit()
        and re.fullmatch(r"[\w.-]+/[\w.-]+", repo)
        and re.fullmatch(r"https?://[\w.:-]+", server)
    ):
        return ""
    return f"{server}/{repo}/actions/runs/{run_id}"


def _version() -> str:
    return __version__


def render_pr_body(report: ReportData, fingerprint: str, ctx: BodyContext | None = None) -> str:
    ctx = ctx or BodyContext()
    ctx.version = ctx.version or _version()
    text = _render(
        "report/pr-body.md.j2",
        r=report,
        fingerprint_marker=fingerprint_marker(fingerprint),
        ctx=ctx,
        handback_marker=HANDBACK_MARKER,
    )
    return truncate_body(text)


def handback_ticked(body: str | None) -> bool:
    """The maintainer ticked "Let setupbot update this branch again" in the PR body."""
    return bool(HANDBACK_TICKED_RE.search(body or ""))


def render_comment(report: ReportData, comparison: Any = None, base: str = "") -> str:
    return truncate_body(
        _render("report/pr-comment.md.j2", r=report, comment_marker=COMMENT_MARKER, comparison=comparison, base=base)
    )


def render_job_summary(
    report: ReportData, event: str = "", note: str = "", *, comparison: Any = None, base: str = "", url: str = ""
) -> str:
    # The step summary has a 1 MiB cap; the PR body limit is far below it and keeps it readable.
    return truncate_body(
        _render(
            "report/job-summary.md.j2",
            r=report,
            event=event,
            note=note,
            comparison=comparison,
            base=base,
            run_url=url,
            version=_version(),
        )
    )


def write_job_summary(text: str, environ: dict[str, str] | None = None) -> Path | None:
    """Append to ``$GITHUB_STEP_SUMMARY`` when the workflow provides it."""
    env = os.environ if environ is None else environ
    target = env.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text)
    return path
