"""JUnit XML from pytest --junitxml: every test's outcome."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field


@dataclass
class TestResults:
    __test__ = False  # not a pytest class

    outcomes: dict[str, str] = field(default_factory=dict)   # test id -> passed/failed/error/skipped
    messages: dict[str, str] = field(default_factory=dict)   # test id -> failure text (trimmed)

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
    """Parse pytest's JUnit XML. Malformed XML gives empty results (the caller reports it)."""
    results = TestResults()
    if not xml_text or not xml_text.strip():
        return results
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError:
        return results
    for case in root.iter("testcase"):
        cls = case.get("classname", "")
        name = case.get("name", "")
        tid = f"{cls}::{name}" if cls else name
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed" if child.tag == "failure" else "error"
                message = ((child.get("message") or "") + "\n" + (child.text or "")).strip()
                break
            if child.tag == "skipped":
                outcome = "skipped"
                message = child.get("message") or ""
        results.outcomes[tid] = outcome
        if message:
            results.messages[tid] = message[-3000:]
    return results
