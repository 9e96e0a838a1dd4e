"""What a new user copies: one version pin, the action from the workflow's own commit, a
licence and a changelog that match pyproject."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from bot.github.rollout import render_caller

ROOT = Path(__file__).resolve().parents[2]


def test_readme_first_screen_has_a_uses_snippet_with_one_version_pin():
    first_screen = "\n".join((ROOT / "README.md").read_text().splitlines()[:45])
    pins = re.findall(r"uses: (\S+/\.github/workflows/setupbot\.yml)@(\S+)", first_screen)
    assert pins == [("setupbot/setupbot/.github/workflows/setupbot.yml", "v1")]
    assert "setupbot-ref" not in first_screen


def test_reusable_workflow_takes_the_action_from_its_own_commit():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "setupbot.yml").read_text())
    inputs = workflow[True]["workflow_call"]["inputs"]  # YAML 1.1 reads `on:` as True
    assert not inputs["setupbot-ref"].get("required") and inputs["setupbot-ref"]["default"] == ""
    checkouts = [
        step
        for job in workflow["jobs"].values()
        for step in job["steps"]
        if step.get("with", {}).get("path") == "setupbot"
    ]
    assert len(checkouts) == len(workflow["jobs"])  # one per job: verify, verify-fork, publish
    for step in checkouts:
        assert "job.workflow_sha" in step["with"]["ref"]
        assert "job.workflow_repository" in step["with"]["repository"]


def test_rolled_out_callers_name_the_ref_once():
    sha = "1" * 40
    text = render_caller(default_branch="main", setupbot_repository="acme/setupbot", ref=sha)
    assert text.count(sha) == 1
    assert (
        'uses: "acme/setupbot/.github/workflows/setupbot.yml@' + sha + '"' in text
        or f"uses: acme/setupbot/.github/workflows/setupbot.yml@{sha}" in text
    )


def test_license_and_changelog_match_pyproject():
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'license = { text = "MIT" }' in pyproject
    version = re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1)
    assert f"## {version}" in (ROOT / "CHANGELOG.md").read_text()
