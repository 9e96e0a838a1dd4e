"""Result records: one JSON line per repository and system, in ``<out>/<system>.jsonl``.

Appending is the only write, so an interrupted run loses at most the pair in progress; when a
pair appears more than once (a ``--force`` rerun) the last line wins. Pairs that ended in an
infrastructure error (the engine failed, not the Dockerfile) do not count as done.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

RETRY_STATUSES = {"infra-error"}
META_FILE = "run.json"

_lock = threading.Lock()


def results_file(out: Path, system: str) -> Path:
    return out / f"{system}.jsonl"


def pair_key(record: dict) -> tuple[str, str, str]:
    return (str(record.get("repo", "")).lower(), str(record.get("sha", "")).lower(), str(record.get("system", "")))


def load_records(out: Path) -> list[dict]:
    """Every record under ``out`` (last one per pair wins); unreadable lines are skipped."""
    latest: dict[tuple[str, str, str], dict] = {}
    if not out.is_dir():
        return []
    for path in sorted(out.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and record.get("repo") and record.get("system"):
                latest[pair_key(record)] = record
    return list(latest.values())


def done_pairs(out: Path) -> set[tuple[str, str, str]]:
    return {pair_key(r) for r in load_records(out) if r.get("status") not in RETRY_STATUSES}


def append_record(out: Path, record: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, sort_keys=True, ensure_ascii=False)
    with _lock, results_file(out, record["system"]).open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def write_meta(out: Path, meta: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def read_meta(out: Path) -> dict:
    try:
        return json.loads((out / META_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return {}
