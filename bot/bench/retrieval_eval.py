"""Experience-base retrieval measured on real failure logs (issue #19).

The labelled logs under tests/fixtures/failure-logs were written against the seed units' own
patterns, so their precision says little about logs nobody tuned for. This harvests the failure
excerpts that bench runs actually produced (``bench/results/<system>.jsonl``: the build tail of a
failed build, the collection tail of a failed collection), pairs each with a hand label from
``bench/retrieval-labels.json`` (the unit ids that are a right fix, or none when no unit of the
base holds the fix), and reports

- precision@1: the first candidate is a right fix, or, for a log whose fix no unit holds, no
  candidate is offered at all (a wrong first offer costs a trial);
- recall@3: among logs whose fix a unit holds, a right unit is among the first three.

    python -m bot.bench.retrieval_eval [--results bench/results] [--labels bench/retrieval-labels.json]

A log the labels do not know is listed as unlabelled and left out of the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bot.knowledge import Retriever, open_store

ROOT = Path(__file__).resolve().parents[2]
# the part of a bench record that holds the failure, by the record's status
FAILURE_FIELDS = {"build-failed": "build_log_tail", "collect-failed": "collect_tail"}


@dataclass(frozen=True)
class RealLog:
    case: str  # "<owner/name>|<system>|<field>"
    text: str

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:12]


@dataclass
class Scores:
    cases: int = 0
    with_unit: int = 0
    hits1: int = 0
    hits1_with_unit: int = 0
    hits3: int = 0
    unlabelled: list[str] = field(default_factory=list)
    misses: list[tuple[str, list[str], list[str]]] = field(default_factory=list)

    @property
    def precision_at_1(self) -> float:
        return self.hits1 / self.cases if self.cases else 0.0

    @property
    def precision_at_1_with_unit(self) -> float:
        return self.hits1_with_unit / self.with_unit if self.with_unit else 0.0

    @property
    def recall_at_3(self) -> float:
        return self.hits3 / self.with_unit if self.with_unit else 0.0


def harvest(results: Path) -> list[RealLog]:
    """Every distinct failure excerpt in the bench records under ``results``."""
    seen: set[str] = set()
    out: list[RealLog] = []
    for path in sorted(results.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            key = FAILURE_FIELDS.get(str(record.get("status")))
            text = str(record.get(key) or "") if key else ""
            if not text.strip() or text in seen:
                continue
            seen.add(text)
            out.append(RealLog(f"{record.get('repo')}|{record.get('system') or path.stem}|{key}", text))
    return out


def score(logs: Iterable[RealLog], labels: dict[str, Any], retrieve: Callable[..., Sequence[str]]) -> Scores:
    """``retrieve(text[, context])`` gives unit ids best first; ``labels[case]["units"]`` the
    right ones, ``labels[case]["context"]`` (optional) the repository context the loop adds."""
    s = Scores()
    for log in logs:
        label = labels.get(log.case)
        if label is None:
            s.unlabelled.append(log.case)
            continue
        right = list(label.get("units") or [])
        # what the loop reads from the repository beside the log (bot.loop.repair.repo_context:
        # framework; bot.loop.candidates: database, from the plan's client libraries), written
        # into the label by whoever read the repository
        extra = dict(label.get("context") or {})
        got = list(retrieve(log.text, extra) if extra else retrieve(log.text))
        s.cases += 1
        first_ok = (got[:1] and got[0] in right) if right else not got
        s.hits1 += bool(first_ok)
        if right:
            s.with_unit += 1
            s.hits1_with_unit += bool(first_ok)
            s.hits3 += any(u in right for u in got[:3])
        if not first_ok:
            s.misses.append((log.case, right, got[:3]))
    return s


def seed_retriever(tmp: Path) -> Callable[..., list[str]]:
    """Retrieval over a fresh store holding the packaged seed units, as a first run has it, with
    the context the setup loop passes (bot/loop/orchestrator.py ``candidates_for``)."""
    settings = SimpleNamespace(url="", path=str(tmp / "knowledge.sqlite"), k=10, offer=3)
    retriever = Retriever(open_store(settings), settings)
    context = {"python": "3.11", "os": "debian"}
    return lambda text, extra=None: [c.unit.id for c in retriever.retrieve(text, {**context, **(extra or {})})]


def evaluate(results: Path, labels_path: Path) -> tuple[list[RealLog], Scores]:
    """The harvested logs of ``results`` and their scores against the labels at ``labels_path``."""
    logs = harvest(results)
    labels = json.loads(labels_path.read_text())["cases"]
    with tempfile.TemporaryDirectory(prefix="setupbot-retrieval-eval-") as tmp:
        return logs, score(logs, labels, seed_retriever(Path(tmp)))


def summary_lines(results: Path, labels_path: Path) -> list[str]:
    """The SUMMARY.md section: the retrieval figures on the failure logs of these results."""
    logs, s = evaluate(results, labels_path)
    lines = [
        "## Experience-base retrieval on the real failure logs",
        "",
        f"The failure excerpts of these results (every system's failed builds and collections, "
        f"{len(logs)} distinct logs), each labelled by hand in `{labels_path.name}` with the seed "
        "units that hold a right fix (or none), retrieved from a fresh store of the seed units as a "
        "first run has it (`python -m bot.bench.retrieval_eval`).",
        "",
        "| figure | value |",
        "|---|---|",
        f"| labelled logs | {s.cases} ({s.with_unit} whose fix a seed unit holds, {s.cases - s.with_unit} whose fix none holds) |",
        f"| precision@1 (a right first offer; no offer where no unit holds the fix) | {s.precision_at_1:.3f} ({s.hits1}/{s.cases}) |",
        f"| precision@1 where a unit holds the fix | {s.precision_at_1_with_unit:.3f} ({s.hits1_with_unit}/{s.with_unit}) |",
        f"| recall@3 where a unit holds the fix | {s.recall_at_3:.3f} ({s.hits3}/{s.with_unit}) |",
        "",
    ]
    if s.unlabelled:
        lines += [f"Unlabelled, left out: {', '.join(s.unlabelled)}.", ""]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    ap.add_argument("--labels", type=Path, default=ROOT / "bench" / "retrieval-labels.json")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    logs, s = evaluate(args.results, args.labels)
    if args.json:
        print(
            json.dumps(
                {
                    "logs": len(logs),
                    "labelled": s.cases,
                    "with_unit": s.with_unit,
                    "precision_at_1": round(s.precision_at_1, 3),
                    "precision_at_1_with_unit": round(s.precision_at_1_with_unit, 3),
                    "recall_at_3": round(s.recall_at_3, 3),
                    "unlabelled": s.unlabelled,
                    "misses": [{"case": c, "right": r, "got": g} for c, r, g in s.misses],
                },
                indent=1,
            )
        )
        return 0
    print(f"real failure logs:  {len(logs)} harvested from {args.results}")
    print(
        f"labelled:           {s.cases} ({s.with_unit} whose fix a seed unit holds, "
        f"{s.cases - s.with_unit} whose fix none holds)"
    )
    print(f"precision@1:        {s.precision_at_1:.3f}  ({s.hits1}/{s.cases}; target >= 0.90)")
    print(f"  where a unit holds the fix: {s.precision_at_1_with_unit:.3f}  ({s.hits1_with_unit}/{s.with_unit})")
    print(f"recall@3:           {s.recall_at_3:.3f}  ({s.hits3}/{s.with_unit})")
    for case, right, got in s.misses:
        print(f"  miss {case}: right {right or 'none (no unit)'}, got {got or 'nothing'}")
    for case in s.unlabelled:
        print(f"  unlabelled: {case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
