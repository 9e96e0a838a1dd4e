"""Failures grouped by class (issue #19): what kind of failure stopped each repository, with
counts per system, from hand labels beside the results.

``failure-classes.json`` in the results folder (its rows name that folder's systems) holds

- ``classes``: id -> ``{"title": ..., "status": one of STATUS_WORDS, "how": ...}``, where
  ``how`` says what fixed the class (the rule and its commit) or why it is left;
- ``rows``: ``"<owner/name>|<system>"`` -> class id, one per failed record.

A failed record the file does not classify is listed as unclassified, never left out.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

STATUS_WORDS = {
    "fixed": "fix added (the after-run shows it holds)",
    "fixed-later": "fix added after the after-run's code (unit and engine tests; no bench run yet)",
    "left": "left for later",
    "metric": "the metric, not the setup",
    "input": "no snapshot here",
    "offline": "needs the internet, which no setup gives an air-gapped sandbox",
    "harness": "the benchmark's, fixed",
}


def load(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text()) if path.is_file() else {}
    return {"classes": dict(data.get("classes") or {}), "rows": dict(data.get("rows") or {})}


def failed(records: list[dict]) -> list[dict]:
    """The records that count as failures (no EBSR), skipped pairs aside."""
    return [r for r in records if not r.get("ebsr") and r.get("status") != "skipped"]


def summary_lines(records: list[dict], path: Path) -> list[str]:
    """The SUMMARY.md section: for each class, how many repositories each system lost to it."""
    labels = load(path)
    classes, rows = labels["classes"], labels["rows"]
    systems = sorted({str(r.get("system")) for r in records})
    per: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for r in failed(records):
        key = f"{r.get('repo')}|{r.get('system')}"
        per[rows.get(key, "unclassified")][str(r.get("system"))].append(str(r.get("repo")))
    if not per:
        return []
    lines = [
        "## Failures by class",
        "",
        f"Each failed row, classified by hand in `{path.name}` by reading its log and its repository "
        "(a class is a kind of failure, never one repository).",
        "",
        "| class | " + " | ".join(systems) + " | status | how |",
        "|---|" + "---|" * len(systems) + "---|---|",
    ]
    order = sorted(per, key=lambda c: (c == "unclassified", -sum(len(v) for v in per[c].values()), c))
    for cid in order:
        info = classes.get(cid, {})
        counts = [
            (f"{len(per[cid][s])}: " + ", ".join(sorted(per[cid][s]))) if per[cid].get(s) else "0" for s in systems
        ]
        status = STATUS_WORDS.get(str(info.get("status")), "not classified" if cid == "unclassified" else "")
        title = str(info.get("title") or ("unclassified" if cid == "unclassified" else cid))
        lines.append(f"| {title} | " + " | ".join(counts) + f" | {status} | {info.get('how', '')} |")
    lines.append("")
    return lines
