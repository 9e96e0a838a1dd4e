"""One reader of JUnit XML (pytest's --junitxml, and any runner that writes the format).

The loop (bot.loop.junit), the verification (bot.verify.results) and the benchmark
(bot.bench.score) keep their own result types, each with what it needs of a failure; the XML is
walked here only, so a test's outcome is decided by one rule everywhere.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"


@dataclass(frozen=True)
class JUnitCase:
    test_id: str  # classname::name (name alone without a class)
    outcome: str  # passed / failed / error / skipped
    message: str = ""  # the failure's or skip's message attribute
    text: str = ""  # the failure's body (the traceback)
    tags: frozenset[str] = frozenset()  # the child elements the case has


def read_junit(xml_text: str) -> list[JUnitCase] | None:
    """Every test case in document order; None when the text is not readable XML. The first
    failure or error child decides; a skip counts unless one follows."""
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError:
        return None
    cases = []
    for case in root.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        outcome, message, text = PASSED, "", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = FAILED if child.tag == "failure" else ERROR
                message, text = child.get("message") or "", child.text or ""
                break
            if child.tag == "skipped":
                outcome, message = SKIPPED, child.get("message") or ""
        cases.append(
            JUnitCase(
                f"{classname}::{name}" if classname else name,
                outcome,
                message,
                text,
                frozenset(child.tag for child in case),
            )
        )
    return cases
