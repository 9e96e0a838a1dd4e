"""Incremental runs of a Rust-led repository: the Rust ecosystem names its plan's input files
through the seam (``NamesInputs``), so a changed Cargo.toml, member manifest, Cargo.lock or
rust-toolchain file is a changed input, and `setupbot run` reuses a recorded environment only
when none of them changed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import bot.pipeline
from bot.cli import main
from bot.config import load_settings
from bot.ecosystems import REGISTRY, input_files
from bot.ecosystems.base import NamesInputs, own_input_files
from bot.incremental import changed_inputs, check, environment_inputs
from bot.outputs import generate_outputs, write_outputs
from bot.report import ReportData

REPOS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "repos"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    dest = tmp_path / "rust-workspace"
    shutil.copytree(REPOS / "rust-workspace", dest)
    return dest


def _record(repo: Path) -> None:
    settings = load_settings(repo)
    report = ReportData(repository="ws", verdict="Full", replay_ok=True, runtime="Rust 1.85")
    generated = generate_outputs(
        report,
        dockerfile_text="FROM rust:1.85-slim\n",
        plan_json={"ecosystem": "rust", "rust": "1.85"},
        inputs=environment_inputs(repo, settings, input_files),
    )
    write_outputs(repo, generated)


def test_rust_names_its_manifests_lock_and_toolchain_and_python_names_none(workspace, tmp_path):
    assert isinstance(REGISTRY["rust"], NamesInputs) and not isinstance(REGISTRY["python"], NamesInputs)
    named = input_files(workspace)
    assert {"Cargo.toml", "Cargo.lock"} <= set(named)
    assert any(p.startswith("crates/") and p.endswith("/Cargo.toml") for p in named)
    assert own_input_files(REGISTRY["python"], workspace) == []
    (tmp_path / "py").mkdir()
    (tmp_path / "py" / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert input_files(tmp_path / "py") == []


def test_a_changed_cargo_toml_is_a_changed_input(workspace):
    # what the shared (Python) scan reads leaves the Cargo files out: the seam brings them in
    assert "Cargo.toml" not in environment_inputs(workspace)["files"]
    first = environment_inputs(workspace, None, input_files)
    assert "Cargo.toml" in first["files"] and "Cargo.lock" in first["files"]
    manifest = workspace / "Cargo.toml"
    manifest.write_text(manifest.read_text() + "\n[profile.dev]\nopt-level = 1\n")
    second = environment_inputs(workspace, None, input_files)
    assert second["digest"] != first["digest"] and changed_inputs(first, second) == ["Cargo.toml changed"]
    member = next(p for p in sorted(first["files"]) if p.startswith("crates/") and p.endswith("Cargo.toml"))
    (workspace / member).write_text((workspace / member).read_text() + "\n# edited\n")
    (workspace / "rust-toolchain.toml").write_text('[toolchain]\nchannel = "1.85"\n')
    third = environment_inputs(workspace, None, input_files)
    assert changed_inputs(second, third) == ["rust-toolchain.toml added", f"{member} changed"]


def test_setupbot_run_reuses_a_rust_environment_until_cargo_toml_changes(workspace, monkeypatch, capsys):
    _record(workspace)
    settings = load_settings(workspace)
    assert check(workspace, settings, input_files).unchanged
    calls = []

    def stand_in(*a, **k):
        calls.append(a)
        raise AssertionError("the pipeline ran")

    monkeypatch.setattr(bot.pipeline, "run_pipeline", stand_in)
    assert main(["run", str(workspace)]) == 0
    assert "environment inputs unchanged" in capsys.readouterr().out and calls == []
    lock = workspace / "Cargo.lock"
    lock.write_text(lock.read_text() + "\n")
    state = check(workspace, settings, input_files)
    assert not state.unchanged and state.reason == "inputs changed: Cargo.lock changed"
    assert main(["run", str(workspace)]) == 1  # the work is redone: the stand-in pipeline runs
    assert len(calls) == 1
