"""JUnit XML from pytest --junitxml: every test's outcome."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.junit import read_junit


@dataclass
class TestResults:
    __test__ = False  # not a pytest class

    outcomes: dict[str, str] = field(default_factory=dict)  # test id -> passed/failed/error/skipped
    messages: dict[str, str] = field(default_factory=dict)  # test id -> failure text (trimmed)

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    @property
    def total(self) -> int:
        return len(self.outcomes)

    def summary(self) -> dict[str, int]:
        return {o: self.count(o) for o in ("passed", "failed", "error", "skipped")} | {"total": self.total}

    def failure_text(self) -> str:
        return "\n".join(f"{k}: {v}" for k, v in self.messages.items())

    def to_json(self) -> dict:
        return {"summary": self.summary(), "outcomes": self.outcomes}


def parse_junit(xml_text: str) -> TestResults:
    """Parse pytest's JUnit XML. Malformed XML gives empty results (the caller reports it). A
    failure keeps its message and traceback (the diagnosis reads them)."""
    results = TestResults()
    for case in read_junit(xml_text) or []:
        results.outcomes[case.test_id] = case.outcome
        message = (case.message + "\n" + case.text).strip() if case.outcome in ("failed", "error") else case.message
        if message:
            results.messages[case.test_id] = message[-3000:]
    return results
