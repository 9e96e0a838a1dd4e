"""`setupbot github` with the real pipeline (engine, loop, replay, verification) against the REST
double: a push opens the pull request, the merge lands, and the next push changes nothing: no
container work, no write call, byte-identical files. Prints the time of each push (the target,
under 30 s for the unchanged one, is measured by benchmarks/incremental.py)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from doubles.git import git
from doubles.github_api import GitHubDouble

from bot.cli import main

ROOT = Path(__file__).parents[2]
EVENTS = ROOT / "tests" / "fixtures" / "events"
REPO = "octo/app"


@pytest.mark.slow
def test_push_merge_push_with_the_real_pipeline(docker_available, tmp_path, monkeypatch, capsys):
    if subprocess.run(["docker", "image", "inspect", "python:3.11-slim"], capture_output=True).returncode:
        pytest.fail("python:3.11-slim is missing: run `setupbot images bootstrap` first (CI does)")
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "examples" / "hello-app", checkout)
    git(checkout, "init", "-q", "-b", "main")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-q", "-m", "initial")
    source = {
        str(p.relative_to(checkout)): p.read_text()
        for p in checkout.rglob("*")
        if p.is_file() and ".git" not in p.parts
    }
    with GitHubDouble() as double:
        double.add_repo(REPO, source)
        double.grant("ghs_real_pipeline", contents="write", pull_requests="write")
        monkeypatch.setenv("GITHUB_TOKEN", "ghs_real_pipeline")
        monkeypatch.setenv("SETUPBOT_GITHUB_API_URL", double.base_url)
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
        monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "output.txt"))
        # the pull request's lifecycle, not the lock (test_run_cli and the lock tests have it):
        # the lock's extra build is left out
        monkeypatch.setenv("SETUPBOT_OUTPUT_LOCK", "false")
        argv = ["github", "--event-name", "push", "--event-path", str(EVENTS / "push.json"), "--repo", str(checkout)]

        started = time.monotonic()
        assert main(argv) == 0
        changed = time.monotonic() - started
        pulls = double.pulls(REPO)
        assert len(pulls) == 1 and pulls[0]["title"].startswith("Add a proven development environment"), pulls
        # what the pull request changes: the output folder and the root .dockerignore
        on_main = double.repos[REPO].files_at("main")
        proposed = {
            p: b.decode() for p, b in double.repos[REPO].files_at("setupbot/main").items() if on_main.get(p) != b
        }
        assert {
            ".devcontainer/Dockerfile",
            ".devcontainer/setupbot-plan.json",
            ".devcontainer/setup-report.md",
            ".dockerignore",
        } <= set(proposed)

        # The maintainer merges; the action's next checkout of main has the files.
        double.push(REPO, "main", proposed, "Merge pull request #1")
        double.close_pull(REPO, 1, merged=True)
        git(checkout, "clean", "-q", "-fdx")
        for rel, text in proposed.items():
            (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
            (checkout / rel).write_text(text)
        git(checkout, "add", "-A")
        git(checkout, "commit", "-q", "-m", "Merge pull request #1")
        writes = len(double.write_calls())
        capsys.readouterr()

        started = time.monotonic()
        assert main(argv) == 0
        unchanged = time.monotonic() - started
        assert len(double.write_calls()) == writes, "the merged environment came back"
        assert len(double.pulls(REPO)) == 1
        assert "environment inputs unchanged since" in (tmp_path / "summary.md").read_text()
        assert {rel: (checkout / rel).read_text() for rel in proposed} == proposed
        assert double.schema_errors == []
    print(f"\nsetupbot github, hello-app: changed push {changed:.1f} s, unchanged push {unchanged:.1f} s")
