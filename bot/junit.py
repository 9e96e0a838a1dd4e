"""One reader of JUnit XML (pytest's --junitxml, and any runner that writes the format), and the
one type of a test run's results.

The XML is walked here only, so a test's outcome is decided by one rule everywhere. The loop
(bot.loop.target), the verification (bot.verify.run), the Rust setup and the benchmark read a run
as ``TestResults``; ``TestCounts`` is the counts alone, as the report and the benchmark keep them.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

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


@dataclass
class TestResults:
    """Outcomes of one test run. ``outcomes`` maps a test id (classname::name) to passed / failed /
    error / skipped; ``messages`` keeps each failure's text (its first line, or the message and
    traceback the diagnosis reads, as the parser was asked)."""

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
        """Failures and errors together."""
        return self.count(FAILED) + self.count(ERROR)

    @property
    def skipped(self) -> int:
        return self.count(SKIPPED)

    @property
    def pass_rate(self) -> float:
        """Passed over tests that ran (skips excluded); 0.0 when none ran."""
        ran = self.total - self.skipped
        return self.passed / ran if ran else 0.0

    def counts(self) -> dict[str, int]:
        """Tests per outcome, errors apart from failures, and the total: the run record's form
        (``replay.tests``, a workspace member's ``tests``), which the report and the bench read."""
        return {o: self.count(o) for o in (PASSED, FAILED, ERROR, SKIPPED)} | {"total": self.total}

    def failure_text(self) -> str:
        return "\n".join(f"{k}: {v}" for k, v in self.messages.items())

    def record_json(self) -> dict[str, Any]:
        """The run record's ``tests``: the counts and every test's outcome."""
        return {"summary": self.counts(), "outcomes": self.outcomes}

    def summary(self) -> dict[str, Any]:
        """The verification record's summary: failures and errors together, and how the run ended."""
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


def parse_junit(xml_text: str, *, tracebacks: bool = False) -> TestResults:
    """A run's results from its JUnit XML; unreadable XML gives ``junit_found=False``. A test
    reported twice (a teardown error after a pass) keeps its failure. ``tracebacks`` keeps each
    failure's message and traceback (the last 3,000 characters: what the diagnosis reads);
    otherwise its first line (300 characters: what a report shows)."""
    results = TestResults()
    cases = read_junit(xml_text)
    if cases is None:
        results.junit_found = False
        return results
    for case in cases:
        if case.test_id in results.outcomes and results.outcomes[case.test_id] != PASSED:
            continue
        if case.outcome in (FAILED, ERROR):
            if tracebacks:
                message = (case.message + "\n" + case.text).strip()[-3000:]
            else:
                first = (case.message or case.text).strip().splitlines()[:1]
                message = first[0][:300] if first else ""
        else:
            message = case.message[-3000:] if tracebacks else case.message[:300]
        results.outcomes[case.test_id] = case.outcome
        if message:
            results.messages[case.test_id] = message
    return results


# unittest's (and Django's test runner's) verbose lines: "test_x (pkg.mod.Class.test_x) ... ok",
# Python 3.10 and older "test_x (pkg.mod.Class) ... ok"; a docstring's first line may stand
# between the name and the verdict
_UNITTEST_LINE = re.compile(
    r"^(?P<name>\w+) \((?P<where>[\w.]+)\)(?:\n[^\n]*?)? \.\.\. "
    r"(?P<verdict>ok|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)\s*$",
    re.M,
)
_UNITTEST_SECTION = re.compile(
    r"^={20,}\n(?P<kind>FAIL|ERROR): (?P<name>\w+) \((?P<where>[\w.]+)\)[^\n]*\n(?:[^\n]*\n)?-{20,}\n(?P<body>.*?)(?=^={20,}$|^-{20,}\nRan |\Z)",
    re.M | re.S,
)
_UNITTEST_VERDICT = {
    "ok": PASSED,
    "FAIL": FAILED,
    "ERROR": ERROR,
    "expected failure": PASSED,
    "unexpected success": FAILED,
}


def is_unittest(argv: Sequence[str]) -> bool:
    """``python -m unittest ...``: the standard library's runner, which writes no JUnit."""
    return list(argv[1:3]) == ["-m", "unittest"]


# where every test run inside a container writes its JUnit report (one path, so a reader in the
# loop, the verification or the replay finds any of them)
JUNIT_PATH = "/tmp/setupbot-junit.xml"


def runs_pytest(argv: Sequence[str]) -> bool:
    """Whether the command is pytest itself (``pytest``, ``python -m pytest``, a path to it), so
    that options appended to it reach pytest. A wrapper (``make test``, ``tox``, ``sh -c
    '... pytest'``) is not: an option appended to it goes to the wrapper."""
    if len(argv) > 1 and Path(argv[0]).name in _SHELLS and "-c" in argv[1:]:
        return False  # sh -c 'pytest': an appended option would be the script's $0
    return any(part == "pytest" or part.endswith("/pytest") or part == "py.test" for part in argv)


_SHELLS = frozenset({"sh", "bash", "dash", "zsh"})


def junit_env(argv: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
    """The variables a test run needs for its JUnit report. pytest reads PYTEST_ADDOPTS however
    it was started, so a wrapper that runs pytest somewhere inside (``make test``, a shell
    script, tox when it passes the variable on) writes the report too; the repository's own
    PYTEST_ADDOPTS is kept, before ours. pytest itself gets the option on its command line."""
    own = env.get("PYTEST_ADDOPTS", "")
    if runs_pytest(argv) or is_unittest(argv) or _django_test(argv) or "--junitxml" in own:
        return {}
    return {"PYTEST_ADDOPTS": f"{own} --junitxml={JUNIT_PATH}".strip()}


def verbose_argv(argv: Sequence[str]) -> list[str]:
    """The command with the verbosity that prints one line per test, for the runners built on
    unittest that write no JUnit: ``python -m unittest`` (``-v``) and Django's ``manage.py
    test`` (``-v 2``). Other commands, and those that set a verbosity, are left as they are."""
    out = list(argv)
    if any(a in ("-v", "--verbose") or a.startswith(("--verbosity", "-v")) for a in out[1:]):
        return out
    if is_unittest(out):
        return [*out, "-v"]
    if _django_test(out):
        return [*out, "-v", "2"]
    return out


def _django_test(argv: Sequence[str]) -> bool:
    """Django's test command: ``python manage.py test``, ``python -m manage test`` (as CI
    workflows write it) or ``django-admin test``."""
    for i, word in enumerate(argv[:-1]):
        runs = (
            word.endswith("manage.py")
            or (word == "manage" and i > 0 and argv[i - 1] == "-m")
            or (i == 0 and Path(word).name == "django-admin")
        )
        if runs and argv[i + 1] == "test":
            return True
    return False


def _unittest_id(name: str, where: str) -> str:
    classname = where[: -len(name) - 1] if where.endswith("." + name) else where
    return f"{classname}::{name}"


def parse_unittest(output: str, *, tracebacks: bool = False) -> TestResults:
    """A run's results from unittest's verbose output (``-v``; Django's ``-v 2`` prints the
    same lines), with each failure's traceback from the sections after the run. No test line
    gives empty results with ``junit_found`` False; ``junit_found`` means per-test results
    were read, as for libtest's text."""
    results = TestResults()
    for m in _UNITTEST_LINE.finditer(output or ""):
        verdict = m.group("verdict")
        outcome = SKIPPED if verdict.startswith("skipped") else _UNITTEST_VERDICT[verdict]
        test_id = _unittest_id(m.group("name"), m.group("where"))
        results.outcomes[test_id] = outcome
        if outcome == SKIPPED:
            reason = verdict[len("skipped") :].strip().strip("'\"")
            if reason:
                results.messages[test_id] = reason[:300]
    for m in _UNITTEST_SECTION.finditer(output or ""):
        test_id = _unittest_id(m.group("name"), m.group("where"))
        body = m.group("body").strip()
        if test_id in results.outcomes and body:
            lines = body.splitlines()
            results.messages[test_id] = body[-3000:] if tracebacks else lines[-1][:300]
    results.junit_found = bool(results.outcomes)
    return results


@dataclass
class TestCounts:
    """How many tests ended each way (``collected`` where a collection counted them)."""

    __test__ = False  # a data record, not a pytest test class

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    collected: int = 0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors + self.skipped

    def to_json(self) -> dict[str, int]:
        """The counts and their total; ``collected`` only where a collection counted the tests."""
        data = asdict(self)
        if not self.collected:
            del data["collected"]
        return {**data, "total": self.total}
