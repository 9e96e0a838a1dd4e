"""The code's own rules, checked like any test (issue 17 items 5 and 6): the layers contract
(import-linter, [tool.importlinter] in pyproject.toml) and the lint rules ([tool.ruff])."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if not found:
        pytest.fail(f"{name} is not installed: pip install -e '.[dev]'")
    return found


def test_no_import_runs_up_the_layers():
    res = subprocess.run([_tool("lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "1 kept, 0 broken" in res.stdout


def test_ruff_finds_nothing():
    res = subprocess.run(
        [_tool("ruff"), "check", "--no-cache", "bot", "tests"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


def test_ruff_format_changes_nothing():
    res = subprocess.run(
        [_tool("ruff"), "format", "--check", "--no-cache", "bot", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


def test_mypy_finds_nothing():
    # [tool.mypy] in pyproject.toml names what is checked; about 30 s on a cold cache
    res = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
