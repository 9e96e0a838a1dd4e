"""Test results: JUnit XML → per-test outcomes, and the comparison of a run without sibling
services against a run with them (which tests needed which service)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.junit import ERROR, FAILED, PASSED, SKIPPED, read_junit


@dataclass
class TestResults:
    """Outcomes of one test run. ``outcomes`` maps a test id (classname::name) to passed /
    failed / error / skipped; ``messages`` keeps the first line of each failure."""

    __test__ = False  # not a pytest test class

    outcomes: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    junit_found: bool = True
    exit_code: int | None = 0
    timed_out: bool = False
    output_tail: str = ""

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    @property
    def total(self) -> int:
        return len(self.outcomes)

    @property
    def passed(self) -> int:
        return self.count(PASSED)

    @property
    def failed(self) -> int:
        return self.count(FAILED) + self.count(ERROR)

    @property
    def skipped(self) -> int:
        return self.count(SKIPPED)

    @property
    def pass_rate(self) -> float:
        """Passed over tests that ran (skips excluded); 0.0 when none ran."""
        ran = self.total - self.skipped
        return self.passed / ran if ran else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "passed": self.passed,
            "failed": self.failed,
            "skipped": self.skipped,
            "junit_found": self.junit_found,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "tests": dict(sorted(self.outcomes.items())),
            "messages": dict(sorted(self.messages.items())),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TestResults:
        return cls(
            outcomes=dict(data.get("tests") or {}),
            messages=dict(data.get("messages") or {}),
            junit_found=bool(data.get("junit_found", True)),
            exit_code=data.get("exit_code"),
            timed_out=bool(data.get("timed_out", False)),
        )


def parse_junit(xml_text: str) -> TestResults:
    """Parse pytest's (or any runner's) JUnit XML. Malformed XML yields junit_found=False."""
    results = TestResults()
    cases = read_junit(xml_text)
    if cases is None:
        results.junit_found = False
        return results
    for case in cases:
        if case.test_id in results.outcomes and results.outcomes[case.test_id] != PASSED:
            continue  # a test reported twice (teardown error): keep the failure
        if case.outcome in (FAILED, ERROR):
            first = (case.message or case.text).strip().splitlines()[:1]
            message = first[0][:300] if first else ""
        else:
            message = case.message[:300]
        results.outcomes[case.test_id] = case.outcome
        if message:
            results.messages[case.test_id] = message
    return results


@dataclass(frozen=True)
class Attribution:
    """Tests that fail without the siblings and pass with them, by sibling name."""

    needed: Mapping[str, tuple[str, ...]]  # sibling name -> tests
    unattributed: tuple[str, ...]  # fixed by the siblings together, not by one
    fixed: tuple[str, ...]  # all tests fixed by the siblings

    def to_json(self) -> dict[str, Any]:
        return {
            "needed": {k: list(v) for k, v in self.needed.items()},
            "unattributed": list(self.unattributed),
            "fixed": list(self.fixed),
        }


def fixed_by(without: TestResults, with_: TestResults) -> list[str]:
    """Tests that did not pass without and passed with."""
    return sorted(t for t, o in with_.outcomes.items() if o == PASSED and without.outcomes.get(t) != PASSED)


def attribute(
    without: TestResults,
    with_all: TestResults,
    leave_one_out: Mapping[str, TestResults] | None = None,
    names: Iterable[str] = (),
) -> Attribution:
    """Which tests needed which sibling. With one sibling every fixed test is its; with several,
    a run with each sibling left out (``leave_one_out[name]``) tells: a fixed test that fails
    when ``name`` is missing needed ``name``."""
    fixed = fixed_by(without, with_all)
    names = list(names) or list((leave_one_out or {}).keys())
    needed: dict[str, list[str]] = {n: [] for n in names}
    if len(names) == 1:
        needed[names[0]] = list(fixed)
        return Attribution({k: tuple(v) for k, v in needed.items()}, (), tuple(fixed))
    claimed: set[str] = set()
    for name in names:
        run = (leave_one_out or {}).get(name)
        if run is None:
            continue
        for t in fixed:
            if run.outcomes.get(t) != PASSED:
                needed[name].append(t)
                claimed.add(t)
    return Attribution(
        {k: tuple(v) for k, v in needed.items()}, tuple(t for t in fixed if t not in claimed), tuple(fixed)
    )
