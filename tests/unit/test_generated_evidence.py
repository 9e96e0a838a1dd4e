"""setupbot's own outputs are never evidence: a second run over a checkout the first run wrote
into plans from the repository's files only (issue: outputs never evidence)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bot.compile.plan import make_plan
from bot.evidence import scan_repository
from bot.evidence.generated import generated_reason
from bot.markers import MARKER_TEXT
from bot.outputs import outputs_from_pipeline, stable_plan_json, write_outputs

ROOT = Path(__file__).parents[2]
REPOS = ROOT / "tests" / "fixtures" / "repos"
PYTHONS = ["3.11", "3.12", "3.13"]

# one fixture of every kind: plain, services (CI services and a compose file), lock files,
# a maintainer's hand-written devcontainer
KINDS = {
    "plain": ROOT / "examples" / "hello-app",
    "plain-setup-py": REPOS / "plan-setup-py-only",
    "services-ci": REPOS / "plan-ci-services",
    "services-compose": REPOS / "plan-compose",
    "lock-uv": REPOS / "plan-uv-groups",
    "lock-poetry": REPOS / "plan-poetry-only",
    "handwritten-devcontainer": REPOS / "plan-handwritten-devcontainer",
}


def cited(plan) -> set[str]:
    return {e[0] for n in plan.graph.nodes.values() for e in n.evidence}


def first_run(src: Path, tmp_path: Path) -> tuple[Path, object, set[str]]:
    """Plan, write the outputs as `setupbot run` does, plus run records and the caller workflow
    `setupbot rollout` commits; return the checkout, the plan and every file setupbot wrote."""
    repo = tmp_path / src.name
    shutil.copytree(src, repo)
    plan = make_plan(repo, None, available_pythons=PYTHONS, resolve=False)
    generated = outputs_from_pipeline(repo, plan=plan, repository=src.name)
    written = write_outputs(repo, generated)
    records = repo / ".setupbot"
    records.mkdir()
    (records / "run.json").write_text(json.dumps({"plan": {"python": "3.9", "test_command": ["nose"]}}))
    (records / "trajectory.jsonl").write_text("{}\n")
    workflow = repo / ".github" / "workflows" / "setupbot.yml"
    workflow.parent.mkdir(parents=True, exist_ok=True)
    workflow.write_text(
        f"# {MARKER_TEXT}: remove this line to keep your own version\n"
        "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    services:\n"
        "      redis:\n        image: redis:7\n    steps:\n      - run: python -m nose2\n"
    )
    ours = set(written.written) | {".setupbot/run.json", ".setupbot/trajectory.jsonl", ".github/workflows/setupbot.yml"}
    return repo, plan, ours


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_second_plan_cites_no_generated_file(kind, tmp_path):
    repo, first, ours = first_run(KINDS[kind], tmp_path)
    assert any(p.endswith("/Dockerfile") for p in ours) or kind == "handwritten-devcontainer"
    second = make_plan(repo, None, available_pythons=PYTHONS, resolve=False)
    assert not cited(second) & ours, f"{kind}: the second plan cites setupbot's own files"
    ev = scan_repository(repo)
    assert not set(ev.files_seen) & ours
    assert set(ev.generated) >= ours - {p for p in ours if p.startswith(".setupbot/")} | {".setupbot/run.json"}
    # the same repository gives the same plan: nothing setupbot wrote changed it
    assert stable_plan_json(second) == stable_plan_json(first)


def test_handwritten_devcontainer_stays_evidence(tmp_path):
    repo, first, ours = first_run(KINDS["handwritten-devcontainer"], tmp_path)
    # setupbot keeps the maintainers' Dockerfile (no marker) and writes nothing over it
    assert ".devcontainer/Dockerfile" not in ours
    assert "3.12" in (repo / ".devcontainer" / "Dockerfile").read_text()
    for plan in (first, make_plan(repo, None, available_pythons=PYTHONS, resolve=False)):
        assert plan.python == "3.12"
        assert ".devcontainer/Dockerfile" in cited(plan)
        assert "libyaml-dev" in plan.dockerfile.text


def test_output_dir_elsewhere(tmp_path):
    """With output.dir set, the outputs there are setupbot's just the same."""
    repo = tmp_path / "hello-app"
    shutil.copytree(KINDS["plain"], repo)
    plan = make_plan(repo, None, available_pythons=PYTHONS, resolve=False)
    write_outputs(repo, outputs_from_pipeline(repo, plan=plan, output_dir="ops/dev", repository="x"))
    assert (repo / "ops" / "dev" / "Dockerfile").is_file()
    ev = scan_repository(repo, output_dir="ops/dev")
    assert "ops/dev/Dockerfile" in ev.generated
    assert not any(p.startswith("ops/") for p in ev.files_seen)


def test_generated_reason_rule(tmp_path):
    marker = f"# {MARKER_TEXT}: remove this line to keep your own version\n"
    assert generated_reason(".setupbot/run.json")
    assert generated_reason("sub/dir/setupbot-plan.json")
    assert generated_reason("docker/Dockerfile", marker + "FROM python:3.11\n")
    assert generated_reason(".devcontainer/devcontainer.json", "// " + MARKER_TEXT + "\n{}\n")
    # a marker quoted deep in a person's file does not hand the file to setupbot
    assert not generated_reason("docker/Dockerfile", "FROM python:3.11\n" * 10 + marker)
    assert not generated_reason(".devcontainer/Dockerfile", "FROM python:3.11\n")
    assert not generated_reason("setupbot_notes/Dockerfile", "FROM python:3.11\n")
    # while listing, the head of an owned name is read from disk
    (tmp_path / ".devcontainer").mkdir()
    (tmp_path / ".devcontainer" / "Dockerfile").write_text(marker + "FROM python:3.13-slim\n")
    assert generated_reason(".devcontainer/Dockerfile", root=tmp_path)
    (tmp_path / ".devcontainer" / "Dockerfile").write_text("FROM python:3.13-slim\n" * 8 + marker)
    assert not generated_reason(".devcontainer/Dockerfile", root=tmp_path)
