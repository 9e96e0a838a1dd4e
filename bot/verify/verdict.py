"""Verdict tiers, from the judge's rulings and the test results. The rules are written here and
in docs/verdicts.md; keep both in step.

  Shallow  nothing was really tested: no test results, no tests, all skipped, the run did not
           finish (upheld lifecycle charge), the project itself does not import, or no test passed.
  Partial  the environment works in part: an upheld core-import charge, or fewer than 80% of the
           tests that could pass do (passed / (passed + failures the judge upheld)), or the
           mutation check survived (the tests pass with the project's main module broken).
  Mostly   every test the environment can be blamed for passes except a few (at least 80%), or
           only minor charges stand (a console script that does not launch, pip check).
  Full     no charge stands, and the mutation check (when run) killed the tests.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bot.junit import TestResults
from bot.verify.judge import Ruling
from bot.verify.prosecutor import Charge

FULL, MOSTLY, PARTIAL, SHALLOW = "Full", "Mostly", "Partial", "Shallow"
TIERS = (FULL, MOSTLY, PARTIAL, SHALLOW)
PARTIAL_BELOW = 0.8  # environment pass rate under which the verdict is Partial
SHALLOW_KINDS = ("lifecycle_incomplete", "no_tests", "all_skipped")


@dataclass
class Verdict:
    tier: str
    reasons: list[str] = field(default_factory=list)
    environment_pass_rate: float | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def decide(
    charges: Iterable[Charge],
    rulings: Iterable[Ruling],
    results: TestResults | None,
    mutation: dict[str, Any] | None = None,
) -> Verdict:
    by_id = {c.id: c for c in charges}
    upheld = [r for r in rulings if r.upheld]

    if results is None or results.total == 0:
        return Verdict(SHALLOW, ["no test results"])
    shallow = _shallow_reasons(by_id, upheld, results)
    if shallow:
        return Verdict(SHALLOW, shallow, 0.0 if results.passed == 0 else None)

    env_failed = sum(len(r.upheld_tests) for r in upheld if r.kind == "tests_failed")
    rate = results.passed / (results.passed + env_failed)
    partial = _partial_reasons(by_id, upheld, rate, env_failed, mutation)
    if partial:
        return Verdict(PARTIAL, partial, round(rate, 4))

    if upheld:
        return Verdict(
            MOSTLY,
            [
                f"upheld: {r.kind} ({by_id[r.charge_id].subject if r.charge_id in by_id else r.charge_id}) - {r.reason}"
                for r in upheld
            ],
            round(rate, 4),
        )
    reasons = [f"{results.passed} tests pass; no charge stands"]
    if mutation and mutation.get("killed"):
        reasons.append("mutation check killed the tests")
    return Verdict(FULL, reasons, round(rate, 4))


def _shallow_reasons(by_id: dict[str, Charge], upheld: list[Ruling], results: TestResults) -> list[str]:
    """Why nothing was really tested: an upheld lifecycle, no-tests or all-skipped charge, the
    project itself not importing, or no test passing. Empty when the tests did test something."""
    shallow = [
        f"upheld: {by_id[r.charge_id].kind} ({by_id[r.charge_id].subject})"
        for r in upheld
        if r.kind in SHALLOW_KINDS and r.charge_id in by_id
    ]
    own_import = [
        r
        for r in upheld
        if r.kind == "import_failed" and by_id.get(r.charge_id) is not None and by_id[r.charge_id].details.get("own")
    ]
    if own_import:
        shallow.append(
            "the project itself does not import: " + ", ".join(by_id[r.charge_id].subject for r in own_import)
        )
    if results.passed == 0:
        shallow.append("no test passed")
    return shallow


def _partial_reasons(
    by_id: dict[str, Charge], upheld: list[Ruling], rate: float, env_failed: int, mutation: dict[str, Any] | None
) -> list[str]:
    """Why the environment works only in part: an upheld core-import charge, a pass rate below
    PARTIAL_BELOW, or a surviving mutation check. Empty when none holds."""
    kinds = {r.kind for r in upheld}
    partial = []
    if "import_failed" in kinds:
        partial.append(
            "core dependencies do not import: "
            + ", ".join(
                by_id[r.charge_id].subject for r in upheld if r.kind == "import_failed" and r.charge_id in by_id
            )
        )
    if rate < PARTIAL_BELOW:
        partial.append(f"only {rate:.0%} of the tests the environment decides pass ({env_failed} fail because of it)")
    if mutation and mutation.get("ran") and not mutation.get("killed"):
        partial.append("mutation check survived: the tests pass with the main module broken")
    return partial
