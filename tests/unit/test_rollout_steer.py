"""`setupbot rollout` you can steer, against the REST double: filters, the dry run that is the
default above --confirm-over, --yes, the staggered schedule, and `rollout status`."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from doubles.github_api import GitHubDouble

from bot.cli import main
from bot.github.rollout import stagger_cron

SHA = "3" * 40
SCHEMAS = Path(__file__).parents[2] / "schemas" / "output"


def validate(doc: dict, kind: str) -> None:
    jsonschema.validate(doc, json.loads((SCHEMAS / f"{kind}.schema.json").read_text()))


@pytest.fixture
def org(monkeypatch):
    with GitHubDouble() as d:
        for name, lang, topics in [
            ("api", "Python", ["backend"]),
            ("web", "TypeScript", ["frontend"]),
            ("ml", "Jupyter Notebook", ["backend", "research"]),
            ("cli", "Python", []),
            ("docs", "Python", ["docs"]),
            ("etl", "Python", ["backend"]),
            ("tools", "Python", ["backend"]),
            ("old-fork", "Python", ["backend"]),
        ]:
            d.add_repo(f"acme/{name}", org=True)
            d.set_repo_meta(f"acme/{name}", topics=topics, language=lang, fork=name == "old-fork")
        monkeypatch.setenv("GITHUB_TOKEN", "ghs_rollout_test_token")
        monkeypatch.setenv("SETUPBOT_GITHUB_API_URL", d.base_url)
        yield d
    assert d.schema_errors == []


def _roll(capsys, *extra: str) -> tuple[int, dict]:
    rc = main(
        ["rollout", "--org", "acme", "--ref", SHA, "--setupbot-repository", "acme/setupbot", "--json", "-", *extra]
    )
    return rc, json.loads(capsys.readouterr().out)


def test_filters_select_the_repositories(org, capsys):
    rc, doc = _roll(capsys, "--only-ecosystem", "python", "--topic", "backend", "--exclude", "tool*", "--dry-run")
    validate(doc, "rollout")
    assert rc == 0 and doc["dry_run"] is True
    # Python incl. notebooks, with the topic, not the fork, not the excluded one
    assert [r["repo"] for r in doc["repos"]] == ["acme/api", "acme/etl", "acme/ml"]
    rc, doc = _roll(capsys, "--only-ecosystem", "python", "--limit", "2", "--dry-run")
    assert [r["repo"] for r in doc["repos"]] == ["acme/api", "acme/cli"]
    assert org.write_calls() == []


def test_more_than_confirm_over_is_a_dry_run_until_yes(org, capsys):
    rc, doc = _roll(capsys, "--confirm-over", "3")
    assert rc == 0 and doc["dry_run"] is True and doc["matched"] == 7
    assert doc["would"] and org.write_calls() == []
    rc, doc = _roll(
        capsys, "--only-ecosystem", "python", "--topic", "backend", "--exclude", "tools", "--confirm-over", "3"
    )
    assert doc["dry_run"] is False and doc["matched"] == 3  # at most N: no confirmation needed
    assert {r["action"] for r in doc["repos"]} == {"created"}
    rc, doc = _roll(capsys, "--confirm-over", "3", "--yes")
    validate(doc, "rollout")
    assert doc["dry_run"] is False
    created = {r["repo"] for r in doc["repos"] if r["action"] == "created"}
    assert created == {"acme/web", "acme/cli", "acme/docs", "acme/tools"}
    assert all(len(org.pulls(f"acme/{n}")) == 1 for n in ("api", "web", "ml", "cli", "docs", "etl", "tools"))


def test_each_repository_gets_its_own_stable_schedule(org, capsys):
    rc, doc = _roll(capsys, "--only-ecosystem", "python", "--topic", "backend")
    crons = {r["repo"]: r["cron"] for r in doc["repos"]}
    assert crons == {r: stagger_cron(r) for r in crons}
    for repo, cron in crons.items():
        text = org.repos[repo].files_at("setupbot/rollout")[".github/workflows/setupbot.yml"].decode()
        assert yaml.safe_load(text)[True]["schedule"] == [{"cron": cron}]
    assert stagger_cron("acme/api") == stagger_cron("ACME/api")  # stable, case-insensitive
    schedules = {stagger_cron(f"acme/repo-{i}") for i in range(200)}
    assert len(schedules) > 150  # spread, not one minute for all
    for cron in schedules:
        minute, hour, *_ = cron.split()
        assert 0 <= int(minute) < 60 and 0 <= int(hour) < 24
    rc, doc = _roll(capsys, "--only-ecosystem", "python", "--topic", "research", "--cron", "0 5 * * 2")
    assert doc["repos"][0]["cron"] == "0 5 * * 2"


def test_status_table(org, capsys):
    _roll(capsys, "--only-ecosystem", "python", "--topic", "backend")
    org.add_workflow_run(
        "acme/api", ".github/workflows/setupbot.yml", created_at="2026-11-30T04:17:00Z", conclusion="failure"
    )
    # the environment pull request setupbot/main of one repository, with its report
    report = "# Setup report\n\n## 🟢 Verdict: **Mostly**\n"
    org.push(
        "acme/api",
        "main",
        {
            ".github/workflows/setupbot.yml": org.repos["acme/api"]
            .files_at("setupbot/rollout")[".github/workflows/setupbot.yml"]
            .decode()
        },
    )
    org.add_repo("acme/lone", {".devcontainer/setup-report.md": report}, org=True)
    assert (
        main(
            [
                "rollout",
                "status",
                "--org",
                "acme",
                "--setupbot-repository",
                "acme/setupbot",
                "--only-ecosystem",
                "python",
                "--json",
                "-",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    validate(doc, "rollout-status")
    rows = {r["repo"]: r for r in doc["repos"]}
    assert rows["acme/api"]["caller"] == ".github/workflows/setupbot.yml"
    assert rows["acme/api"]["last_run"] == "2026-11-30T04:17:00Z failure"
    assert rows["acme/cli"] == {
        "repo": "acme/cli",
        "caller": None,
        "last_verdict": None,
        "open_pr": None,
        "last_run": None,
    }
    assert "acme/lone" not in rows  # no language: not of the python ecosystem
    assert "repository" in captured.err and "last verdict" in captured.err
    assert org.write_calls() == [c for c in org.write_calls()]  # status reads only
    writes = len(org.write_calls())
    assert (
        main(
            [
                "rollout",
                "status",
                "--org",
                "acme",
                "--setupbot-repository",
                "acme/setupbot",
                "--exclude",
                "web",
                "--exclude",
                "ml",
                "--exclude",
                "docs",
                "--exclude",
                "etl",
                "--exclude",
                "tools",
                "--exclude",
                "cli",
                "--exclude",
                "api",
            ]
        )
        == 0
    )
    table = capsys.readouterr().out
    assert "acme/lone" in table and "Mostly" in table
    assert len(org.write_calls()) == writes


def test_rollout_needs_a_sha_and_a_positive_limit(org, capsys):
    assert main(["rollout", "--org", "acme"]) == 3
    assert main(["rollout", "--org", "acme", "--ref", "main"]) == 3
    assert main(["rollout", "--org", "acme", "--ref", SHA, "--limit", "0"]) == 3


def test_a_repository_that_fails_is_a_github_error_exit_code(org, capsys):
    org.inject("POST", r"/repos/acme/cli/pulls$", 422, message="Validation Failed", times=5)
    rc, doc = _roll(capsys, "--exclude", "web", "--exclude", "docs", "--exclude", "tools", "--exclude", "etl")
    assert rc == 10  # the table's "GitHub error", not 1
    actions = {r["repo"]: r["action"] for r in doc["repos"]}
    assert actions["acme/cli"] == "failed" and actions["acme/api"] == "created"  # the others go on
