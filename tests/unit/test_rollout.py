"""`setupbot rollout` against the REST double: one PR per repository, idempotent, and a
hand-written workflow keeps its comments and layout."""

from __future__ import annotations

import pytest
import yaml
from doubles.github_api import GitHubDouble

from bot.errors import InputError
from bot.github.provider import GitHubProvider, RetryPolicy
from bot.github.rollout import read_repo_list, rollout, update_workflow_text

SHA1 = "1" * 40
SHA2 = "2" * 40
SETUPBOT = "acme/setupbot"

HAND_WRITTEN = """\
# Our environment bot. Ask @ops before changing this file!
name: env-bot   # shown in the checks list

on:
  push:
    branches: [ trunk ]      # we still call it trunk
  workflow_dispatch: {}

permissions:
  contents: read

jobs:
  # the job that calls setupbot
  env:
    permissions:
      contents: write
      pull-requests: write
    uses: acme/setupbot/.github/workflows/setupbot.yml@1111111111111111111111111111111111111111
    with:
      setupbot-ref: "1111111111111111111111111111111111111111"   # keep in sync with uses
      output-dir: .devcontainer

  lint:
    runs-on: ubuntu-latest
    steps:
      - run: echo "lint"     # placeholder
"""


def test_round_trip_keeps_comments_and_layout():
    out = update_workflow_text(HAND_WRITTEN, setupbot_repository=SETUPBOT, ref=SHA2)
    assert out is not None
    expected = HAND_WRITTEN.replace("1" * 40, SHA2)
    assert out == expected
    assert update_workflow_text(out, setupbot_repository=SETUPBOT, ref=SHA2) == out
    assert (
        update_workflow_text("on: push\njobs:\n  a:\n    runs-on: x\n", setupbot_repository=SETUPBOT, ref=SHA2) is None
    )


@pytest.fixture
def double():
    with GitHubDouble() as d:
        d.add_repo("acme/fresh", org=True)
        d.add_repo(
            "acme/trunky",
            {"README.md": "x\n", ".github/workflows/env.yml": HAND_WRITTEN},
            default_branch="trunk",
            org=True,
        )
        d.add_repo("acme/own", {".github/workflows/setupbot.yml": "name: ours\non: push\njobs: {}\n"}, org=True)
        yield d
    assert d.schema_errors == []


@pytest.fixture
def provider(double):
    return GitHubProvider("t", double.base_url, policy=RetryPolicy(sleep=lambda s: None))


def test_rollout_opens_one_pr_per_repository_and_is_idempotent(double, provider):
    repos = ["acme/fresh", "acme/trunky", "acme/own"]
    results = {r.repo: r for r in rollout(provider, repos, setupbot_repository=SETUPBOT, ref=SHA2)}
    assert {r.action for r in results.values()} == {"created"}
    fresh = double.repos["acme/fresh"].files_at("setupbot/rollout")[".github/workflows/setupbot.yml"].decode()
    doc = yaml.safe_load(fresh)
    assert doc["jobs"]["setupbot"]["uses"] == f"{SETUPBOT}/.github/workflows/setupbot.yml@{SHA2}"
    assert doc[True]["push"]["branches"] == ["main"]
    # the edited file is the hand-written one, comments intact
    edited = double.repos["acme/trunky"].files_at("setupbot/rollout")[".github/workflows/env.yml"].decode()
    assert edited == HAND_WRITTEN.replace("1" * 40, SHA2)
    assert double.pulls("acme/trunky")[0]["base"] == "trunk"
    # someone's own setupbot.yml without the marker is left alone; the caller goes next to it
    own = double.repos["acme/own"].files_at("setupbot/rollout")
    assert own[".github/workflows/setupbot.yml"] == b"name: ours\non: push\njobs: {}\n"
    assert ".github/workflows/setupbot-environment.yml" in own
    writes = len(double.write_calls())
    again = rollout(provider, repos, setupbot_repository=SETUPBOT, ref=SHA2)
    assert {r.action for r in again} == {"unchanged"}
    assert len(double.write_calls()) == writes
    assert all(len(double.pulls(r)) == 1 for r in repos)


def test_a_new_ref_updates_the_same_pr(double, provider):
    first = rollout(provider, ["acme/fresh"], setupbot_repository=SETUPBOT, ref=SHA1)[0]
    second = rollout(provider, ["acme/fresh"], setupbot_repository=SETUPBOT, ref=SHA2)[0]
    assert second.action == "updated" and second.number == first.number
    assert SHA2 in double.pulls("acme/fresh")[0]["body"]


def test_already_current_workflow_needs_no_pr(double, provider):
    rollout(provider, ["acme/trunky"], setupbot_repository=SETUPBOT, ref=SHA2)
    files = double.repos["acme/trunky"].files_at("setupbot/rollout")
    double.push("acme/trunky", "trunk", {p: b.decode() for p, b in files.items()})
    double.close_pull("acme/trunky", 1, merged=True)
    writes = len(double.write_calls())
    assert rollout(provider, ["acme/trunky"], setupbot_repository=SETUPBOT, ref=SHA2)[0].action == "unchanged"
    assert len(double.write_calls()) == writes


def test_org_listing_and_failures_do_not_stop_the_rest(double, provider):
    repos = [r.full_name for r in provider.list_org_repos("acme")]
    assert repos == ["acme/fresh", "acme/trunky", "acme/own"]
    results = rollout(provider, ["acme/missing", "acme/fresh"], setupbot_repository=SETUPBOT, ref=SHA2)
    assert [r.action for r in results] == ["failed", "created"]


def test_ref_must_be_a_full_sha(provider):
    with pytest.raises(InputError, match="40-character"):
        rollout(provider, ["acme/fresh"], setupbot_repository=SETUPBOT, ref="v1")


def test_repo_list_file(tmp_path):
    f = tmp_path / "repos.txt"
    f.write_text("# ours\nacme/a\n\nacme/b  # second\nnot a repo\nacme/a\n")
    assert read_repo_list(f) == ["acme/a", "acme/b"]


def test_cli_against_the_double(double, tmp_path, monkeypatch, capsys):
    from bot.cli import main

    f = tmp_path / "repos.txt"
    f.write_text("acme/fresh\n")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_cli_test_token")
    monkeypatch.setenv("SETUPBOT_GITHUB_API_URL", double.base_url)
    assert main(["rollout", "--repos", str(f), "--ref", SHA2, "--setupbot-repository", SETUPBOT]) == 0
    assert "acme/fresh: created #1" in capsys.readouterr().out
    writes = len(double.write_calls())
    assert main(["rollout", "--org", "acme", "--ref", SHA2, "--setupbot-repository", SETUPBOT, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "acme/fresh: unchanged" in out and "would open pull request" in out
    assert len(double.write_calls()) == writes


def test_structural_edit_still_keeps_comments():
    text = HAND_WRITTEN.replace("      pull-requests: write\n", "")
    out = update_workflow_text(text, setupbot_repository=SETUPBOT, ref=SHA2)
    assert "# Our environment bot. Ask @ops before changing this file!" in out
    assert "# keep in sync with uses" in out and "# placeholder" in out
    job = yaml.safe_load(out)["jobs"]["env"]
    assert job["permissions"] == {"contents": "write", "pull-requests": "write"}
    assert job["uses"].endswith(SHA2)
