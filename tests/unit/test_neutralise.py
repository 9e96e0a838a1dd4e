"""Text from the repository reaches GitHub defused: it mentions nobody, closes nothing and loads
no remote image, in the PR body, the comment, the job summary and the committed report alike."""

from __future__ import annotations

import pytest

from bot.report import ProofItem, ReportData, RequirementRow
from bot.report.neutralise import ZWJ, neutralise
from bot.report.render import BodyContext, render_comment, render_job_summary, render_pr_body, render_report


@pytest.mark.parametrize(
    "text,gone",
    [
        ("ping @alice please", "@alice"),
        ("cc @octo-org/security-team", "@octo-org"),
        ("This fixes #12", "fixes #12"),
        ("Closes octo/app#3", "Closes octo/app#3"),
        ("resolved: https://github.com/octo/app/issues/4", "resolved: https"),
        ("FIX #5", "FIX #5"),
        ("![pixel](https://evil.example/p.png)", "![pixel]"),
        ('<img src="https://evil.example/p.png">', "<img"),
        ("<picture><source srcset=https://e/x></picture>", "<source"),
    ],
)
def test_each_trigger_is_defused(text, gone):
    out = neutralise(text)
    assert gone not in out
    # the words stay readable: only a zero-width joiner or an escape was added
    assert out.replace(ZWJ, "").replace("&lt;", "<").replace("[pixel]", "![pixel]") == text


@pytest.mark.parametrize(
    "text",
    [
        "mail me at dev@example.com",
        "pip install 'pkg @ https://x/y.whl'",
        "issue #12 is related",
        "see [the docs](https://example.com)",
        "prefix fixes",
        "`@alice fixes #1`",
        "```\n@bob closes #2\n![x](https://e/p.png)\n```",
    ],
)
def test_harmless_text_and_code_are_left_alone(text):
    assert neutralise(text) == text


def _hostile() -> ReportData:
    evil = "@alice fixes #1 ![x](https://evil.example/t.png) <img src=https://evil.example/t.png>"
    return ReportData(
        repository="octo/app",
        verdict="Full",
        replay_ok=True,
        tier_reason=evil,
        proven=[ProofItem(evil, True, evil)],
        warnings=[evil],
        requirements=[RequirementRow("PACKAGE", evil, "SATISFIED", "requirements.txt:1")],
    )


@pytest.mark.parametrize(
    "render",
    [
        lambda r: render_pr_body(r, "a" * 32),
        render_comment,
        render_job_summary,
        render_report,
    ],
)
def test_every_rendering_neutralises_repository_text(render):
    text = render(_hostile())
    assert "@alice" not in text and "fixes #1" not in text
    assert "![x](https" not in text and "<img" not in text


def test_pr_body_says_where_it_came_from_and_how_to_stop():
    body = render_pr_body(
        _hostile(),
        "a" * 32,
        BodyContext(
            changes=["+ package lxml", "- package six"],
            first=False,
            run_url="https://github.com/octo/app/actions/runs/9",
            version="9.9.9",
        ),
    )
    assert "```diff\n+ package lxml\n- package six\n```" in body
    assert "setupbot 9.9.9" in body and "(https://github.com/octo/app/actions/runs/9)" in body
    assert "### Reproduce locally" in body and "### How to stop setupbot" in body
    assert "- [ ] Let setupbot update this branch again <!-- setupbot:handback -->" in body


def test_run_url_only_from_well_formed_variables():
    from bot.report.render import run_url

    env = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "octo/app", "GITHUB_RUN_ID": "12"}
    assert run_url(env) == "https://github.com/octo/app/actions/runs/12"
    assert run_url({**env, "GITHUB_RUN_ID": "12) ![x](https://e"}) == ""
    assert run_url({}) == ""
