"""The verdict of a Rust run, and what its report says was proven and what was not.

The tiers are the shared ones (``bot.verify.verdict.decide``, docs/verdicts.md), decided from
the clean replay's per-test results alone, because the prosecutor and judge are Python's
(imports, console scripts, ``pip check``, the mutation check):

- every failing test of the replay counts against the environment (an upheld ``tests_failed``
  charge): no judge sorts the repository's own failures out for Rust yet, so the pass rate is
  passed / (passed + failed) and under 80 % the verdict is Partial;
- no test passed, or none ran: Shallow;
- otherwise Mostly, at most: Full means no charge stands after the independent checks, and for
  Rust those checks (entry points, the mutation check) do not run. A Rust run meets the default
  ``publish.min_verdict`` (Mostly) when its tests pass; a gate of Full is not met by Rust yet.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from bot.junit import ERROR, FAILED, TestResults
from bot.verify.judge import UPHELD, Ruling
from bot.verify.prosecutor import Charge
from bot.verify.verdict import FULL, MOSTLY, decide

CEILING = MOSTLY
CEILING_REASON = (
    "Mostly is the highest verdict a Rust run gets: the prosecutor and judge (entry points, the "
    "mutation check) do not run for Rust yet"
)
NOT_PROVEN = (
    (
        "mutation check",
        "not run for Rust: whether the tests fail with the crate broken is not known",
    ),
    (
        "prosecutor and judge",
        "not run for Rust: binaries' --help and documented commands were not tried; every failing "
        "test counts against the environment",
    ),
)


@dataclass
class RustVerification:
    """The verification record of a Rust run, in the shape the report and the run records read
    (``verdict``, ``charges``, ``rulings``, ``proven``, ``warnings``, ``to_json()``)."""

    image: str
    verdict: dict[str, Any] = field(default_factory=dict)
    charges: list[dict[str, Any]] = field(default_factory=list)
    rulings: list[dict[str, Any]] = field(default_factory=list)
    proven: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"version": 1, "ecosystem": "rust", **asdict(self)}

    @property
    def tier(self) -> str:
        return str(self.verdict.get("tier", ""))


def rust_verdict(results: TestResults | None) -> tuple[dict[str, Any], list[Charge], list[Ruling]]:
    """The verdict dict (``tier``, ``reasons``, ``environment_pass_rate``) and the charge and
    ruling behind it."""
    failing = sorted(t for t, o in (results.outcomes if results else {}).items() if o in (FAILED, ERROR))
    charges: list[Charge] = []
    rulings: list[Ruling] = []
    if failing:
        charges.append(Charge("rust-tests", "tests_failed", f"{len(failing)} failing tests", "\n".join(failing[:20])))
        rulings.append(
            Ruling(
                "rust-tests",
                "tests_failed",
                UPHELD,
                "rust-no-judge",
                "no judge for Rust yet: every failing test counts against the environment",
                upheld_tests=failing,
            )
        )
    verdict = decide(charges, rulings, results)
    if verdict.tier == FULL:
        verdict.tier = CEILING
        verdict.reasons = [*verdict.reasons, CEILING_REASON]
    return verdict.to_json(), charges, rulings


def isolation(plan: Any) -> str:
    """Where the tests ran: with no network, or on a private one shared only with the services."""
    names = [s.name for s in getattr(plan, "services", None) or []]
    return f"on a private network with only {', '.join(names)}" if names else "with no network"


def proof_items(plan: Any, record: Any, results: TestResults | None) -> list[dict[str, Any]]:
    """The report's first screen for a Rust run: the toolchain and why, the test run without a
    network, each kept repair with the log line that caused it, and what was not checked."""
    items: list[dict[str, Any]] = []
    rt = plan.graph.nodes["runtime:rust"].attrs
    items.append(
        {
            "claim": f"toolchain {rt.get('base_image')} (Rust {rt.get('version')})",
            "proven": bool(record.replay.get("ok")),
            "reason": str(rt.get("reason", "")),
        }
    )
    if results is not None:
        ran = results.passed + results.failed
        items.append(
            {
                "claim": f"{results.passed} tests passed, {results.failed} failed, {results.skipped} skipped: "
                f"`{' '.join(plan.test_command)}` in a fresh container {isolation(plan)}",
                "proven": ran > 0 and results.failed == 0,
                "reason": "every crate came from the image's fetch layer; the build compiled the tests first"
                if ran
                else "no test ran",
            }
        )
    for kept in record.repairs:
        sig = kept.signature
        items.append(
            {
                "claim": f"repair kept: {kept.candidate.describe()}",
                "proven": bool(record.replay.get("ok")),
                "reason": f"for {sig.describe()}: the log said `{kept.log_excerpt[:200]}`" if sig else "",
            }
        )
    items += [{"claim": claim, "proven": False, "reason": why} for claim, why in NOT_PROVEN]
    return items


def judge(plan: Any, record: Any, results: TestResults | None, image: str) -> RustVerification:
    verdict, charges, rulings = rust_verdict(results)
    return RustVerification(
        image=image,
        verdict=verdict,
        charges=[c.to_json() for c in charges],
        rulings=[r.to_json() for r in rulings],
        proven=proof_items(plan, record, results),
    )
