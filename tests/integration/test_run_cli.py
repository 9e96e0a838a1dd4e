"""`setupbot run` through the CLI on the real engine (the pipeline, no stand-in), on the README's
example with the README's command (CI's check that the first screen's command works): the files it
writes into the checkout are the environment it proved, each marked, consistent with each other
and with the plan; a second run with unchanged inputs starts no container and changes nothing.
One full pipeline run (a few minutes)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from bot.compile.devcontainer import parse_devcontainer
from bot.engine.dockerfile import base_images
from bot.markers import has_marker

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "hello-app"
OUT = ".devcontainer"


def _setupbot() -> list[str]:
    """The README's command: the installed `setupbot` (CI installs it), else the module."""
    found = shutil.which("setupbot")
    if found is None and os.environ.get("CI") == "true":
        pytest.fail("the setupbot command is not installed (pip install -e .)")
    return [found] if found else [sys.executable, "-m", "bot"]


def setupbot_run(repo: Path, answer: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [*_setupbot(), "run", str(repo), "--no-knowledge", "--json", str(answer)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )


@pytest.mark.timeout(1800)
@pytest.mark.slow
def test_run_writes_the_environment_it_proved(docker_available, tmp_path):
    repo = tmp_path / "hello-app"
    shutil.copytree(EXAMPLE, repo)
    answer = tmp_path / "answer.json"
    proc = setupbot_run(repo, answer)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    result = json.loads(answer.read_text())
    assert (result["status"], result["verdict"], result["exit_code"]) == ("success", "Full", 0), result

    # every file the answer names is in the checkout and carries setupbot's marker
    written = set(result["written"])
    assert {
        f"{OUT}/Dockerfile",
        f"{OUT}/devcontainer.json",
        f"{OUT}/setupbot-plan.json",
        f"{OUT}/setup-report.md",
        ".dockerignore",
    } <= written, written
    files = {rel: (repo / rel).read_text(encoding="utf-8") for rel in written}
    assert all(has_marker(text) for text in files.values()), [r for r, t in files.items() if not has_marker(t)]

    # the plan JSON records the proof the answer reports, and the environment's inputs
    plan = json.loads(files[f"{OUT}/setupbot-plan.json"])
    assert plan["verified"]["verdict"] == "Full" and plan["verified"]["replay_ok"] is True
    assert plan["verified"]["tests"]["passed"] == 2 and plan["verified"]["tests"]["failed"] == 0
    assert set(plan["inputs"]["files"]) == {"pyproject.toml", "README.md"}
    assert set(plan["outputs"]) <= written

    # the Dockerfile builds FROM the planned image and installs the lock it ships with
    parser = DockerfileParser(fileobj=io.BytesIO(files[f"{OUT}/Dockerfile"].encode()))
    assert base_images(parser.content) == [plan["plan"]["base_image"]]
    assert f"{OUT}/requirements.lock" in written
    assert "--require-hashes" in parser.content and "--hash=sha256:" in files[f"{OUT}/requirements.lock"]
    [cmd] = [i["value"] for i in parser.structure if i["instruction"] == "CMD"]
    assert json.loads(cmd) == plan["plan"]["test_command"]
    # git and the user in the development stage on top of the tested one, git pinned to the
    # version that stage's build installed (read in its image)
    froms = [i["value"] for i in parser.structure if i["instruction"] == "FROM"]
    assert froms == [f"{plan['plan']['base_image']} AS env", "env AS dev"], froms
    dev_stage = parser.content.split("FROM env AS dev")[1]
    assert "useradd --create-home dev" in dev_stage

    # the devcontainer builds that Dockerfile from the repository root and runs the same tests
    devcontainer = parse_devcontainer(files[f"{OUT}/devcontainer.json"])
    assert devcontainer["build"] == {"context": "..", "dockerfile": "Dockerfile"}
    assert devcontainer["customizations"]["setupbot"]["testCommand"] == plan["plan"]["test_command"]

    report = files[f"{OUT}/setup-report.md"]
    assert "Verdict: **Full**" in report and "hello-app" in report

    # the run's records, outside the output folder
    record = json.loads((repo / ".setupbot" / "run.json").read_text())
    assert record["status"] == "success" and record["replay"]["ok"] is True
    assert record["run_id"] == result["run_id"]
    steps = [json.loads(line) for line in (repo / ".setupbot" / "trajectory.jsonl").read_text().splitlines()]
    builds = [s["action"] for s in steps if s["action"] in ("build", "replay")]
    lock = record["replay"]["lock"]
    if record["replay"].get("first_build"):
        # the first image ran every build step (none from the engine's cache, which another
        # test may have filled) and needed no repair: it was the clean replay and its tests ran
        # once. It installed the lock resolved from the plan, or the locked Dockerfile was
        # built after it and installs the same set (not a replay either way)
        assert builds == ["build"], steps
        assert "--no-cache" not in steps[[s["action"] for s in steps].index("build")]["command"]
        assert "as the run's first image" in report
    else:
        # the clean replay built the locked Dockerfile: one no-cache build proved the
        # environment and its lock, with no third build after it
        assert builds == ["build", "replay"], steps
    assert (lock["status"], lock["tag"]) == ("locked", record["replay"]["tag"]), lock
    dev = record["replay"]["dev_stage"]
    assert dev["ok"] is True and dev["versions"]["git"], dev
    assert f"git={dev['versions']['git']}" in dev_stage

    # unchanged inputs: the recorded environment is the answer, and no file changes
    before = {rel: (repo / rel).read_bytes() for rel in written}
    again = setupbot_run(repo, tmp_path / "again.json")
    assert again.returncode == 0, (again.stdout[-3000:], again.stderr[-3000:])
    assert "environment inputs unchanged" in again.stdout, again.stdout[-2000:]
    assert {rel: (repo / rel).read_bytes() for rel in written} == before
