"""Per-test outcomes from cargo's text output (libtest), and from cargo-nextest's status lines.

``cargo test -- --format json`` needs nightly (``-Z unstable-options``), so the stable text is
parsed. cargo runs one test binary after another and announces each:

    Running unittests src/lib.rs (target/debug/deps/rust_crate-f8f6a0d1cefdae74)
    test tests::sums_digits ... ok
    test tests::slow_sum ... ignored, slow on purpose
    test tests::panics ... FAILED
    test result: FAILED. 2 passed; 3 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.33s
    Doc-tests rust_crate
    test src/lib.rs - add (line 7) ... FAILED

A test id is ``<binary>:<target>::<test path>`` (``rust_crate:src/lib.rs::tests::sums_digits``;
doc tests ``doc:rust_crate::src/lib.rs - add (line 7)``): two crates of a workspace may both
have ``tests::it_works``. A failure's message is the first panic line of its ``---- name
stdout ----`` block. The summary lines are kept as a cross-check (``summaries``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.junit import FAILED, PASSED, SKIPPED, TestResults

MAX_TEXT = 8_000_000  # the head and tail of a larger log are parsed
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_RUNNING = re.compile(r"^\s*Running (?:(unittests) )?(\S+) \(([^)]*)\)\s*$")
_DOCTESTS = re.compile(r"^\s*Doc-tests (\S+)\s*$")
_TEST = re.compile(r"^test (.+?)(?: - should panic)? \.\.\. (ok|FAILED|ignored(?:, .*)?)\s*$")
_RESULT = re.compile(r"^test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured")
_STDOUT_HEAD = re.compile(r"^---- (.+?) stdout ----\s*$")
_PANIC = re.compile(r"^thread '[^']*'(?: \(\d+\))? panicked at [^\n]*:\s*$")
_OLD_PANIC = re.compile(r"^thread '[^']*' panicked at '(.*)', \S+:\d+:\d+\s*$")
_NEXTEST = re.compile(
    r"^\s*(PASS|FAIL|SIGSEGV|SIGABRT|SIGKILL|TIMEOUT|ABORT|SKIP|LEAK|FLAKY)\s+\[\s*[\d.]+s\]\s+"
    r"(?:\(\s*\d+/\d+\)\s+)?(\S+)\s+(\S.*?)\s*$"
)


@dataclass(frozen=True)
class Summary:
    suite: str
    passed: int
    failed: int
    ignored: int


def _binary(path: str) -> str:
    """``target/debug/deps/rust_crate-f8f6a0d1cefdae74`` -> ``rust_crate``."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return re.sub(r"-[0-9a-f]{8,}(?:\.exe)?$", "", name)


def _bounded(text: str) -> str:
    text = _ANSI.sub("", text or "")
    if len(text) > MAX_TEXT:
        text = text[: MAX_TEXT // 2] + "\n" + text[-MAX_TEXT // 2 :]
    return text.replace("\r\n", "\n")


def parse_libtest(text: str, *, exit_code: int | None = None) -> TestResults:
    """Outcomes of every ``test ... ok|FAILED|ignored`` line, grouped by the test binary that
    printed it. Text with no test line gives empty results (``junit_found`` False: nothing
    structured was found), never an exception."""
    results = TestResults(exit_code=exit_code)
    suite = ""
    pending: dict[str, str] = {}  # libtest name -> test id, for the message lookup
    block: str | None = None
    after_panic = False
    for line in _bounded(text).split("\n"):
        m = _RUNNING.match(line)
        if m:
            suite = f"{_binary(m.group(3))}:{m.group(2)}"
            block = None
            continue
        m = _DOCTESTS.match(line)
        if m:
            suite, block = f"doc:{m.group(1)}", None
            continue
        m = _TEST.match(line)
        if m:
            name, status = m.group(1), m.group(2)
            test_id = f"{suite}::{name}" if suite else name
            outcome = PASSED if status == "ok" else FAILED if status == "FAILED" else SKIPPED
            results.outcomes[test_id] = outcome
            pending[name] = test_id
            if outcome == SKIPPED and ", " in status:
                results.messages[test_id] = status.split(", ", 1)[1][:300]
            continue
        if _RESULT.match(line):
            block = None
            continue
        m = _STDOUT_HEAD.match(line)
        if m:
            block, after_panic = pending.get(m.group(1)), False
            continue
        if block is None or block in results.messages:
            continue
        if _PANIC.match(line):
            after_panic = True  # the message is the next line (rustc >= 1.73)
            continue
        old = _OLD_PANIC.match(line)  # older rustc: "panicked at 'message', file:line:col"
        if old:
            results.messages[block] = old.group(1)[:300]
        elif after_panic and line.strip():
            results.messages[block] = line.strip()[:300]
    results.junit_found = bool(results.outcomes)
    return results


def libtest_summaries(text: str) -> list[Summary]:
    """Every ``test result:`` line with the suite that printed it (a cross-check of the counts)."""
    out: list[Summary] = []
    suite = ""
    for line in _bounded(text).split("\n"):
        if m := _RUNNING.match(line):
            suite = f"{_binary(m.group(3))}:{m.group(2)}"
        elif m := _DOCTESTS.match(line):
            suite = f"doc:{m.group(1)}"
        elif m := _RESULT.match(line):
            out.append(Summary(suite, int(m.group(2)), int(m.group(3)), int(m.group(4))))
    return out


def parse_nextest(text: str, *, exit_code: int | None = None) -> TestResults:
    """Outcomes of cargo-nextest's ``PASS [0.004s] crate::binary test_name`` status lines."""
    results = TestResults(exit_code=exit_code)
    for line in _bounded(text).split("\n"):
        m = _NEXTEST.match(line)
        if not m:
            continue
        status, binary, name = m.groups()
        test_id = f"{binary}::{name}"
        outcome = PASSED if status in ("PASS", "LEAK", "FLAKY") else SKIPPED if status == "SKIP" else FAILED
        if results.outcomes.get(test_id) == PASSED and outcome == FAILED:
            continue  # a retry line after a pass does not undo it
        results.outcomes[test_id] = outcome
    results.junit_found = bool(results.outcomes)
    return results


def parse_results(text: str, *, exit_code: int | None = None) -> TestResults:
    """libtest text, or nextest's lines when the output holds no libtest test line."""
    found = parse_libtest(text, exit_code=exit_code)
    if found.outcomes:
        return found
    return parse_nextest(text, exit_code=exit_code)
