"""Each event does what it should, end to end against the REST double, with payload fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest
from doubles.github_api import GitHubDouble

from bot.errors import InputError
from bot.github.events import decide, handle_event, load_event, write_action_outputs
from bot.github.provider import GitHubProvider, RetryPolicy
from bot.outputs import generate_outputs
from bot.report import ProofItem, ReportData
from bot.report.render import COMMENT_MARKER

EVENTS = Path(__file__).parents[1] / "fixtures" / "events"
REPO = "octo/app"


def produce(dockerfile: str = "FROM python:3.11-slim\n", build_seconds: float | None = None):
    steps = (
        []
        if build_seconds is None
        else [{"action": "build", "duration": build_seconds, "at": 100.0 + build_seconds, "outcome": "ok"}]
    )

    def run():
        report = ReportData(
            repository=REPO,
            verdict="Mostly",
            replay_ok=True,
            proven=[ProofItem("clean replay", True, "built from scratch")],
        )
        return generate_outputs(report, dockerfile_text=dockerfile, timeline_steps=steps)

    return run


@pytest.fixture
def double():
    with GitHubDouble() as d:
        d.add_repo(REPO)
        yield d
    assert d.schema_errors == []


@pytest.fixture
def provider(double):
    return GitHubProvider("t", double.base_url, policy=RetryPolicy(sleep=lambda s: None))


@pytest.fixture
def env(tmp_path):
    return {
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "out.txt"),
        "GITHUB_REPOSITORY": REPO,
    }


def event(name: str, file: str, env: dict):
    return load_event(name, EVENTS / file, env)


@pytest.mark.parametrize(
    "name,file,kind",
    [
        ("push", "push.json", "publish"),
        ("push", "push_feature.json", "skip"),
        ("push", "push_bot_branch.json", "skip"),
        ("pull_request", "pull_request.json", "verify"),
        ("pull_request", "pull_request_fork.json", "summary"),
        ("workflow_dispatch", "workflow_dispatch.json", "publish"),
        ("schedule", "schedule.json", "drift"),
        ("issue_comment", "push.json", "skip"),
    ],
)
def test_decisions(name, file, kind, env):
    assert decide(event(name, file, env)).kind == kind


def test_push_to_default_branch_opens_the_pr_and_writes_summary_and_outputs(double, provider, env):
    outcome = handle_event(event("push", "push.json", env), provider, produce(), environ=env)
    assert outcome.publish.action == "created" and outcome.pr_number == 1
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    assert "Verdict: **Mostly**" in summary and "#1: created" in summary
    write_action_outputs(outcome, env)
    lines = Path(env["GITHUB_OUTPUT"]).read_text().splitlines()
    assert lines == [
        "verdict=Mostly",
        "pr-number=1",
        "report-path=.devcontainer/setup-report.md",
        "pr-url=https://github.com/octo/app/pull/1",
        "pr-operation=created",
    ]


def test_fork_pull_request_makes_no_write_call_at_all(double, provider, env):
    outcome = handle_event(event("pull_request", "pull_request_fork.json", env), provider, produce(), environ=env)
    assert double.write_calls() == []
    assert outcome.publish is None and provider.read_only
    assert "from a fork" in Path(env["GITHUB_STEP_SUMMARY"]).read_text()


def test_same_repo_pull_request_keeps_one_comment_updated_in_place(double, provider, env):
    double.push(REPO, "main", {"x": "1"})
    double.repos[REPO].refs["heads/bump-numpy"] = double.repos[REPO].refs["heads/main"]
    double.repos[REPO].pulls[7] = {
        "id": 7007,
        "number": 7,
        "state": "open",
        "title": "Bump numpy",
        "body": "",
        "head": "bump-numpy",
        "base": "main",
        "merged": False,
        "merged_at": None,
        "maintainer_can_modify": True,
    }
    ev = event("pull_request", "pull_request.json", env)
    handle_event(ev, provider, produce(), environ=env)
    handle_event(ev, provider, produce(), environ=env)
    comments = [c for c in double.repos[REPO].comments.values() if c["issue"] == 7]
    assert len(comments) == 1 and COMMENT_MARKER in comments[0]["body"]
    assert double.pulls(REPO) == [double.repos[REPO].pulls[7]]  # no environment PR from a PR event


def test_a_users_comment_carrying_the_marker_is_not_taken_over(double, provider, env):
    double.repos[REPO].pulls[7] = {
        "id": 7007,
        "number": 7,
        "state": "open",
        "title": "t",
        "body": "",
        "head": "main",
        "base": "main",
        "merged": False,
        "merged_at": None,
        "maintainer_can_modify": True,
    }
    double.repos[REPO].comments[5] = {"issue": 7, "body": f"{COMMENT_MARKER} mine", "user": "mallory"}
    handle_event(event("pull_request", "pull_request.json", env), provider, produce(), environ=env)
    assert double.repos[REPO].comments[5]["body"] == f"{COMMENT_MARKER} mine"
    assert len([c for c in double.repos[REPO].comments.values() if c["issue"] == 7]) == 2


def test_comment_refused_by_token_still_writes_summary(double, provider, env):
    double.repos[REPO].pulls[7] = {
        "id": 7007,
        "number": 7,
        "state": "open",
        "title": "t",
        "body": "",
        "head": "main",
        "base": "main",
        "merged": False,
        "merged_at": None,
        "maintainer_can_modify": True,
    }
    double.inject("POST", r"/issues/7/comments$", 403, message="Resource not accessible by integration")
    outcome = handle_event(event("pull_request", "pull_request.json", env), provider, produce(), environ=env)
    assert "no comment posted" in outcome.summary


def test_schedule_drift_check(double, provider, env):
    ev = event("schedule", "schedule.json", env)
    first = handle_event(ev, provider, produce(), environ=env)
    assert first.drift and first.publish.action == "created"
    # the PR is merged: the default branch now holds the environment
    files = double.repos[REPO].files_at("setupbot/main")
    double.push(REPO, "main", {p: b.decode() for p, b in files.items()})
    double.close_pull(REPO, 1, merged=True)
    writes = len(double.write_calls())
    second = handle_event(ev, provider, produce(), environ=env)
    assert second.drift == [] and second.publish is None
    assert len(double.write_calls()) == writes
    third = handle_event(ev, provider, produce("FROM python:3.13-slim\n"), environ=env)
    assert third.drift == [".devcontainer/Dockerfile"]
    assert third.publish.action == "created"


def test_a_run_whose_timeline_alone_differs_is_no_drift(double, provider, env):
    ev = event("schedule", "schedule.json", env)
    first = handle_event(ev, provider, produce(build_seconds=10.0), environ=env)
    assert ".devcontainer/setup-timeline.svg" in double.repos[REPO].files_at("setupbot/main")
    files = double.repos[REPO].files_at("setupbot/main")
    double.push(REPO, "main", {p: b.decode() for p, b in files.items()})
    double.close_pull(REPO, first.pr_number, merged=True)
    writes = len(double.write_calls())
    second = handle_event(ev, provider, produce(build_seconds=25.0), environ=env)
    assert second.drift == [] and second.publish is None
    assert len(double.write_calls()) == writes


def test_bad_payload_is_a_clear_error(tmp_path):
    bad = tmp_path / "e.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="cannot read the event payload"):
        load_event("push", bad, {})
    with pytest.raises(InputError, match="which repository"):
        load_event("schedule", EVENTS / "schedule.json", {})


def test_action_outputs_cannot_inject_extra_lines(tmp_path):
    from bot.github.events import Decision, Outcome

    out = tmp_path / "o"
    write_action_outputs(
        Outcome(Decision("publish", "", True), verdict="Full\npr-number=666", report_path="r.md"),
        {"GITHUB_OUTPUT": str(out)},
    )
    assert [ln.split("=")[0] for ln in out.read_text().splitlines()] == [
        "verdict",
        "pr-number",
        "report-path",
        "pr-url",
        "pr-operation",
    ]
