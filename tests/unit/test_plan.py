"""``setupbot plan`` end to end on fixtures (no container, no resolution)."""

from __future__ import annotations

import json
from pathlib import Path

from bot.cli import main

REPOS = Path(__file__).parents[1] / "fixtures" / "repos"


def test_plan_prints_graph_and_dockerfile_and_writes_json(tmp_path, capsys):
    out = tmp_path / "plan.json"
    rc = main(
        [
            "plan",
            str(REPOS / "plan-ci-services"),
            "--no-resolve",
            "--python",
            "3.11",
            "--python",
            "3.13",
            "--json",
            str(out),
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "DepGraph:" in text and "FROM python:3.11-slim" in text and "services: postgres, redis" in text
    data = json.loads(out.read_text())
    assert data["python"] == "3.11" and data["collect_command"][-2:] == ["--collect-only", "-q"]
    assert {s["kind"] for s in data["services"]} == {"postgres", "redis"}
    assert data["graph"]["nodes"] and data["dockerfile_lines"][0]["node_ids"] == ["runtime:python"]


def test_plan_goes_on_with_malformed_input(capsys):
    rc = main(["plan", str(REPOS / "plan-malformed-pyproject"), "--no-resolve", "--quiet", "--python", "3.12"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "warning: pyproject.toml:4: malformed TOML" in text


def test_plan_on_missing_path_is_an_input_error(tmp_path, capsys):
    assert main(["plan", str(tmp_path / "nope"), "--no-resolve"]) == 3
    assert "not a directory" in capsys.readouterr().err
