"""Failures by class in the benchmark summary (bot/bench/classes.py, issue #19)."""

from __future__ import annotations

import json
from pathlib import Path

from bot.bench.classes import failed, summary_lines

ROOT = Path(__file__).resolve().parents[2]


def test_each_class_counts_the_failed_rows_per_system_and_an_unlabelled_failure_shows(tmp_path):
    records = [
        {"repo": "a/x", "system": "before", "ebsr": False, "status": "build-failed"},
        {"repo": "b/y", "system": "before", "ebsr": False, "status": "collect-failed"},
        {"repo": "c/z", "system": "before", "ebsr": False, "status": "build-failed"},
        {"repo": "a/x", "system": "after", "ebsr": True, "status": "ok"},
        {"repo": "b/y", "system": "after", "ebsr": False, "status": "collect-failed"},
    ]
    path = tmp_path / "absent.json"
    labels = {
        "classes": {"wheel": {"title": "no wheel", "status": "fixed", "how": "older Python (abc1234)"}},
        "rows": {"a/x|before": "wheel", "b/y|before": "wheel", "b/y|after": "wheel"},
    }
    tmp = tmp_path / "failure-classes.json"
    tmp.write_text(json.dumps(labels))
    lines = summary_lines(records, tmp)
    table = [line for line in lines if line.startswith("| ")]
    assert table[0] == "| class | after | before | status | how |"
    assert (
        table[1]
        == "| no wheel | 1: b/y | 2: a/x, b/y | fix added (the after-run shows it holds) | older Python (abc1234) |"
    )
    assert table[2] == "| unclassified | 0 | 1: c/z | not classified |  |"
    assert summary_lines([r for r in records if r["ebsr"]], path) == []


def test_every_failed_row_of_the_fresh_sample_is_classified():
    from bot.bench.results import load_records

    out = ROOT / "bench" / "results-fresh"
    labels = json.loads((out / "failure-classes.json").read_text())
    rows = failed(load_records(out))
    assert rows and all(f"{r['repo']}|{r['system']}" in labels["rows"] for r in rows)
    assert set(labels["rows"].values()) <= set(labels["classes"])
