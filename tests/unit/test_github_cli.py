"""`setupbot github`, the command the action runs, end to end against the REST double; the
pipeline is replaced by prepared outputs (the pipeline has its own tests)."""

from __future__ import annotations

from pathlib import Path

import pytest
from doubles.github_api import GitHubDouble

import bot.commands.github as github_command
from bot.cli import main
from bot.outputs import generate_outputs, write_outputs
from bot.report import ReportData

EVENTS = Path(__file__).parents[1] / "fixtures" / "events"


@pytest.fixture
def double():
    with GitHubDouble() as d:
        d.add_repo("octo/app")
        yield d
    assert d.schema_errors == []


@pytest.fixture
def action_env(double, tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_cli_sentinel_token")
    monkeypatch.setenv("SETUPBOT_GITHUB_API_URL", double.base_url)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "output.txt"))
    repo = tmp_path / "repo"
    repo.mkdir()
    calls = []

    def produce(repo_dir, settings, repository):
        calls.append(repository)
        report = ReportData(repository=repository, verdict="Full", replay_ok=True)
        generated = generate_outputs(report, dockerfile_text="FROM python:3.11-slim\n", output_dir=settings.output.dir)
        write_outputs(repo_dir, generated)  # as the pipeline does
        return generated

    monkeypatch.setattr(github_command, "produce_outputs", produce)
    return repo, tmp_path, calls


def test_push_event_opens_the_pr_and_sets_action_outputs(double, action_env, capsys):
    repo, tmp, calls = action_env
    argv = ["github", "--event-name", "push", "--event-path", str(EVENTS / "push.json"), "--repo", str(repo)]
    assert main(argv) == 0
    assert calls == ["octo/app"]
    assert "pull request #1: created" in capsys.readouterr().out
    assert (tmp / "output.txt").read_text().splitlines() == [
        "verdict=Full",
        "pr-number=1",
        "report-path=.devcontainer/setup-report.md",
        "pr-url=https://github.com/octo/app/pull/1",
        "pr-operation=created",
    ]
    assert (repo / ".devcontainer" / "setup-report.md").is_file()  # the report path exists locally
    assert "ghs_cli_sentinel_token" not in (tmp / "summary.md").read_text()
    assert main(argv) == 0
    assert "pull request #1: unchanged" in capsys.readouterr().out


def test_fork_pull_request_event_writes_nothing_to_github(double, action_env):
    repo, tmp, _ = action_env
    assert (
        main(
            [
                "github",
                "--event-name",
                "pull_request",
                "--event-path",
                str(EVENTS / "pull_request_fork.json"),
                "--repo",
                str(repo),
            ]
        )
        == 0
    )
    assert double.write_calls() == []
    assert "from a fork" in (tmp / "summary.md").read_text()


def test_dry_run_reads_but_never_writes(double, action_env, capsys):
    repo, _, _ = action_env
    assert (
        main(
            [
                "github",
                "--event-name",
                "workflow_dispatch",
                "--event-path",
                str(EVENTS / "workflow_dispatch.json"),
                "--repo",
                str(repo),
                "--dry-run",
            ]
        )
        == 0
    )
    assert double.write_calls() == []
    assert "would open pull request setupbot/main -> main" in capsys.readouterr().out


def test_other_branch_push_does_nothing(double, action_env):
    repo, _, calls = action_env
    assert (
        main(["github", "--event-name", "push", "--event-path", str(EVENTS / "push_feature.json"), "--repo", str(repo)])
        == 0
    )
    assert calls == [] and double.calls == []


def test_bad_event_gives_a_clear_message(action_env, capsys, tmp_path):
    repo, _, _ = action_env
    assert (
        main(["github", "--event-name", "push", "--event-path", str(tmp_path / "missing.json"), "--repo", str(repo)])
        == 3
    )
    assert "cannot read the event payload" in capsys.readouterr().err


def test_repository_config_cannot_redirect_the_token(double, action_env, monkeypatch):
    """.github/setupbot.yml is written by the repository (on a PR: by the PR's author); the API
    URL the token is sent to comes from the environment and defaults only."""
    repo, _, _ = action_env
    with GitHubDouble() as evil:
        (repo / ".github").mkdir()
        (repo / ".github" / "setupbot.yml").write_text(f"github:\n  api_url: {evil.base_url}\n  branch_prefix: ''\n")
        monkeypatch.delenv("SETUPBOT_GITHUB_API_URL")
        monkeypatch.setenv("GITHUB_API_URL", double.base_url)
        assert (
            main(["github", "--event-name", "push", "--event-path", str(EVENTS / "push.json"), "--repo", str(repo)])
            == 0
        )
        assert evil.calls == []
    assert double.pulls("octo/app")[0]["head"] == "setupbot/main"
