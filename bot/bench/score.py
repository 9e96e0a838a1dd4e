"""Scoring one Dockerfile: a fresh build without cache, the repository at the pinned commit as
context, then test collection (EBSR) and the test run (JUnit counts) inside the built image,
through the engine's hardened sessions with timeouts.

A Rust repository is scored the Rust way (``run_cargo_tests_in_image``): EBSR is
``cargo test --no-run`` (the test binaries build) exiting 0, and the counts come from libtest's
text output (``bot.ecosystems.rust.results``) of ``cargo test`` in the same container.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bot.ecosystems.rust.results import parse_results
from bot.junit import TestCounts, read_junit

COLLECT_COMMAND = ["python", "-m", "pytest", "--collect-only", "-q"]
JUNIT_IN_CONTAINER = "/tmp/setupbot-bench-junit.xml"
TEST_COMMAND = ["python", "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={JUNIT_IN_CONTAINER}", "-q"]
# Rust: the test binaries build (EBSR), then every test runs (libtest counts). Both in one fresh
# container with no network (the crates were fetched in the image build): in two containers the
# test run compiled the test binaries a second time, which on a large workspace is most of the
# scoring. A marker line with a per-run nonce (no test can print it) separates the two and
# carries the build's exit status and time.
CARGO_EBSR_COMMAND = ["cargo", "test", "--no-run"]
CARGO_TEST_COMMAND = ["cargo", "test", "--no-fail-fast"]


# coreutils' timeout exits 124 when it stopped the command
TIMEOUT_EXIT = 124


def cargo_score_script(nonce: str, build_timeout: int, test_timeout: int) -> list[str]:
    """The one container's command: build the tests (within ``build_timeout``), say how that
    went, run them (within ``test_timeout``) if it went. cargo names each test binary on stderr
    and the binary reports on stdout: one stream (2>&1) keeps a test under the binary that ran
    it, as the Rust setup loop does."""
    build, test = " ".join(CARGO_EBSR_COMMAND), " ".join(CARGO_TEST_COMMAND)
    return [
        "sh",
        "-c",
        f'start=$(date +%s); timeout {int(build_timeout)} {build} 2>&1; s=$?; echo "setupbot-{nonce} $s $(( $(date +%s) - start ))"; '
        f'[ "$s" -eq 0 ] || exit "$s"; exec timeout {int(test_timeout)} {test} 2>&1',
    ]


def split_cargo_score(output: str, nonce: str) -> tuple[str, int | None, float, str] | None:
    """(build output, its exit status, its seconds, test output) from the one container's
    output; None when the build never reported (it was stopped first)."""
    m = re.search(rf"^setupbot-{re.escape(nonce)} (\d+) (\d+)$", output, re.MULTILINE)
    if m is None:
        return None
    return output[: m.start()], int(m.group(1)), float(m.group(2)), output[m.end() + 1 :]


def parse_junit_counts(xml_text: str) -> TestCounts | None:
    """Counts per outcome from pytest's JUnit XML; None when it is not readable XML."""
    cases = read_junit(xml_text) if xml_text and xml_text.strip() else None
    if cases is None:
        return None
    counts = TestCounts()
    for case in cases:
        tags = case.tags
        if "failure" in tags:
            counts.failed += 1
        elif "error" in tags:
            counts.errors += 1
        elif "skipped" in tags:
            counts.skipped += 1
        else:
            counts.passed += 1
    return counts


_SUMMARY_ITEM = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")


def parse_pytest_summary(output: str) -> TestCounts | None:
    """Counts from pytest's last summary line ("3 failed, 10 passed in 1.2s"), for when the
    JUnit file is missing (a run killed by the timeout writes none)."""
    for line in reversed(output.strip().splitlines()[-30:]):
        items = _SUMMARY_ITEM.findall(line)
        if items and (" in " in line or line.strip().startswith("=")):
            counts = TestCounts()
            for number, word in items:
                n = int(number)
                if word == "passed" or word == "xpassed":
                    counts.passed += n
                elif word == "failed":
                    counts.failed += n
                elif word.startswith("error"):
                    counts.errors += n
                else:
                    counts.skipped += n
            return counts
    return None


def tail(text: str, lines: int = 25, chars: int = 4000) -> str:
    return "\n".join((text or "").strip().splitlines()[-lines:])[-chars:]


@dataclass
class Score:
    built: bool = False
    build_seconds: float | None = None
    image_bytes: int | None = None
    ebsr: bool = False
    collect_exit: int | None = None
    collect_seconds: float | None = None
    collected: int | None = None
    tests: TestCounts = field(default_factory=TestCounts)
    test_exit: int | None = None
    test_seconds: float | None = None
    test_timed_out: bool = False
    counts_from: str = ""  # junit | summary-line | ""
    reason: str = ""
    build_log_tail: str = ""
    collect_tail: str = ""
    test_tail: str = ""

    def to_json(self) -> dict:
        data = asdict(self)
        data["tests"] = self.tests.to_json()
        return data


_COLLECTED = re.compile(r"(\d+) tests? collected|collected (\d+) items?")


def _collected_count(output: str) -> int | None:
    for line in reversed(output.strip().splitlines()[-10:]):
        m = _COLLECTED.search(line)
        if m:
            return int(m.group(1) or m.group(2))
    return None


_EXC_LINE = re.compile(r"^E\s+([A-Za-z_][\w.]*(Error|Exception|Warning)\b.*)$")
_USAGE_LINES = (re.compile(r"(error: (unrecognized arguments|argument)\b.*)$"), re.compile(r"^(ERROR: .*)$"))


def collect_cause(output: str) -> str:
    """Why collection failed, in one line: the most frequent exception among the collection
    errors (one missing module usually breaks many files), else pytest's own usage error."""
    seen: dict[str, int] = {}
    for line in (output or "").splitlines():
        m = _EXC_LINE.match(line.rstrip())
        if m:
            seen[m.group(1)[:240]] = seen.get(m.group(1)[:240], 0) + 1
    if seen:
        return max(seen, key=lambda k: seen[k])
    for pattern in _USAGE_LINES:
        for line in (output or "").splitlines():
            m = pattern.search(line.strip())
            if m:
                return m.group(1)[:240]
    return ""


_PACK_FILE = (
    "import base64, gzip, sys; "
    "sys.stdout.write(base64.b64encode(gzip.compress(open(sys.argv[1], 'rb').read())).decode())"
)


def _read_file_from_session(session, path: str) -> str:
    """The text of a file in the session's container. Sent gzip+base64 by the image's Python,
    so a JUnit file of tens of thousands of tests stays far under the engine's output cap;
    ``cat`` when that fails."""
    import base64
    import binascii
    import gzip

    res = session.exec(["python", "-c", _PACK_FILE, path], timeout=300)
    if res.exit_code == 0 and not res.timed_out:
        try:
            return gzip.decompress(base64.b64decode(res.output.strip())).decode("utf-8", errors="replace")
        except (binascii.Error, OSError, EOFError, ValueError):
            pass
    res = session.exec(["cat", path], timeout=300)
    return res.output if res.exit_code == 0 else ""


def run_tests_in_image(
    engine,
    image: str,
    score: Score,
    *,
    collect_timeout: int,
    test_timeout: int,
    junit_dest: Path | None,
    env: dict | None = None,
    workdir: str | None = None,
) -> Score:
    """Collect (EBSR) and, when collection succeeds, run the tests; fills ``score``."""
    session_kwargs = {"env": env or None, "name_hint": "bench"}
    if workdir:
        session_kwargs["workdir"] = workdir
    with engine.session(image, **session_kwargs) as session:
        collect = session.exec(COLLECT_COMMAND, timeout=collect_timeout)
        score.collect_exit = None if collect.timed_out else collect.exit_code
        score.collect_seconds = round(collect.duration, 2)
        score.collect_tail = tail(collect.output)
        score.collected = _collected_count(collect.output)
        score.ebsr = collect.exit_code == 0 and not collect.timed_out
        if not score.ebsr:
            score.reason = (
                "test collection timed out" if collect.timed_out else f"test collection exited {collect.exit_code}"
            )
            cause = collect_cause(collect.output)
            if cause:
                score.reason += f": {cause}"
            return score
        run = session.exec(TEST_COMMAND, timeout=test_timeout)
        score.test_exit = None if run.timed_out else run.exit_code
        score.test_seconds = round(run.duration, 2)
        score.test_timed_out = bool(run.timed_out)
        score.test_tail = tail(run.output)
        xml_text = "" if run.timed_out else _read_file_from_session(session, JUNIT_IN_CONTAINER)
        counts = parse_junit_counts(xml_text)
        if counts is not None:
            score.counts_from = "junit"
            if junit_dest is not None:
                junit_dest.parent.mkdir(parents=True, exist_ok=True)
                junit_dest.write_text(xml_text)
        else:
            counts = parse_pytest_summary(run.output)
            score.counts_from = "summary-line" if counts is not None else ""
        score.tests = counts or TestCounts()
        if run.timed_out:
            score.reason = f"test run stopped by the {test_timeout}s timeout"
    return score


_CARGO_ERROR = re.compile(r"^error(\[E\d+\])?: .*")


def cargo_cause(output: str) -> str:
    """Why cargo failed, in one line: its first ``error:`` line (the later ones are follow-ups
    such as "could not compile"), else the last line."""
    lines = [ln.strip() for ln in (output or "").splitlines() if ln.strip()]
    for line in lines:
        if _CARGO_ERROR.match(line):
            return line[:240]
    return lines[-1][:240] if lines else ""


def run_cargo_tests_in_image(engine, image: str, score: Score, *, collect_timeout: int, test_timeout: int) -> Score:
    """EBSR (``cargo test --no-run`` exits 0) and, when the test binaries build, the test run
    with its libtest counts, in one fresh container with no network; fills ``score``."""
    nonce = secrets.token_hex(8)
    run = engine.run_once(
        image,
        cargo_score_script(nonce, collect_timeout, test_timeout),
        timeout=collect_timeout + test_timeout + 30,
        network="none",
    )
    parts = split_cargo_score(run.output, nonce)
    if parts is None:  # the build did not report: the container's timeout stopped it, or the shell failed
        built_output, built_exit, built_seconds, test_output = run.output, run.exit_code, run.duration, ""
        build_timed_out = bool(run.timed_out)
    else:
        built_output, built_exit, built_seconds, test_output = parts
        build_timed_out = built_exit == TIMEOUT_EXIT
    score.collect_exit = None if build_timed_out else built_exit
    score.collect_seconds = round(built_seconds, 2)
    score.collect_tail = tail(built_output)
    score.ebsr = parts is not None and built_exit == 0
    if not score.ebsr:
        score.reason = (
            "`cargo test --no-run` timed out"
            if build_timed_out
            else f"`cargo test --no-run` exited {built_exit}: {cargo_cause(built_output)}"
        )
        return score
    test_timed_out = bool(run.timed_out) or run.exit_code == TIMEOUT_EXIT
    score.test_exit = None if test_timed_out else run.exit_code
    score.test_seconds = round(max(0.0, run.duration - built_seconds), 2)
    score.test_timed_out = test_timed_out
    score.test_tail = tail(test_output)
    results = parse_results(test_output, exit_code=run.exit_code)
    # libtest has no "error" outcome: a test that panics or a binary that aborts is a failure
    score.tests = TestCounts(passed=results.passed, failed=results.failed, skipped=results.skipped)
    score.collected = results.total or None
    score.counts_from = "libtest" if results.outcomes else ""
    if test_timed_out:
        score.reason = f"test run stopped by the {test_timeout}s timeout"
    return score


# How a built image is scored: (engine, tag, score) -> score
ImageScorer = Callable[[Any, str, Score], Score]


def score_dockerfile(
    engine,
    context: Path,
    dockerfile_text: str,
    tag: str,
    *,
    collect_timeout: int = 600,
    test_timeout: int = 900,
    junit_dest: Path | None = None,
    build_log: Path | None = None,
    score_image: ImageScorer | None = None,
) -> Score:
    """Build ``dockerfile_text`` with no cache over ``context`` and score the image (with pytest,
    unless ``score_image`` scores it another way)."""
    score = Score()
    result = engine.build(context, dockerfile_text, tag, no_cache=True, log_path=build_log)
    score.build_seconds = round(result.seconds, 2)
    score.built = bool(result.ok)
    if not result.ok:
        score.build_log_tail = tail(result.log, lines=40)
        score.reason = "build failed: " + _last_error_line(result.log)
        return score
    try:
        score.image_bytes = int(engine.image_size(tag))
    except Exception:  # noqa: BLE001 - a size we cannot read is missing, not fatal
        score.image_bytes = None
    if score_image is not None:
        return score_image(engine, tag, score)
    return run_tests_in_image(
        engine, tag, score, collect_timeout=collect_timeout, test_timeout=test_timeout, junit_dest=junit_dest
    )


_CAUSE = re.compile(
    r"^\s*(E\s+)?(ERROR: (?!Could not build wheels)|[A-Za-z_][\w.]*(Error|Exception|NotFound)\b:|"
    r"fatal error: |Package '.*' has no installation candidate|E: Unable to locate package)"
)
_FAILED_STEP = re.compile(r"(returned a non-zero code|did not complete successfully|exit code: \d+)")


def _last_error_line(log: str) -> str:
    """The most telling line of a failed build: the last exception or pip/apt/compiler error,
    else the failing step, else the last line."""
    lines = [ln.strip() for ln in (log or "").splitlines() if ln.strip()][-400:]
    for line in reversed(lines):
        if _CAUSE.search(line) and "subprocess-exited-with-error" not in line:
            return line[-300:]
    for line in reversed(lines):
        if _FAILED_STEP.search(line):
            return line[-300:]
    return lines[-1][-300:] if lines else "no build log"
