"""libtest / nextest output -> per-test results, on output captured from real cargo runs
(tests/fixtures/rust-logs: cargo 1.95 on the rust-crate fixture and on a crate with failing,
panicking, ignored, should_panic and doc tests)."""

from __future__ import annotations

from pathlib import Path

from bot.ecosystems.rust.results import libtest_summaries, parse_libtest, parse_nextest, parse_results

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "rust-logs"


def test_passing_run_of_the_fixture_crate():
    text = (LOGS / "cargo-test-pass.log").read_text()
    r = parse_libtest(text, exit_code=0)
    assert r.outcomes == {
        "rust_crate:src/lib.rs::tests::slow_sum": "skipped",
        "rust_crate:src/lib.rs::tests::formats_negative_numbers": "passed",
        "rust_crate:src/lib.rs::tests::sums_digits": "passed",
        "api:tests/api.rs::decimal_of_zero": "passed",
        "api:tests/api.rs::decimal_round_trips": "passed",
    }
    assert r.messages["rust_crate:src/lib.rs::tests::slow_sum"].startswith("slow on purpose")
    assert (r.passed, r.failed, r.skipped, r.junit_found) == (4, 0, 1, True)
    sums = libtest_summaries(text)
    assert [(s.suite, s.passed, s.ignored) for s in sums] == [
        ("rust_crate:src/lib.rs", 2, 1),
        ("api:tests/api.rs", 2, 0),
        ("doc:rust_crate", 0, 0),
    ]


def test_failures_messages_and_doc_tests():
    text = (LOGS / "cargo-test-failures.log").read_text()
    r = parse_libtest(text, exit_code=101)
    unit = "failing:src/lib.rs::tests::"
    assert r.outcomes[unit + "passes"] == "passed"
    assert r.outcomes[unit + "should_panic_ok"] == "passed"
    assert r.outcomes[unit + "ignored_plain"] == "skipped"
    for name in ("fails_assert", "panics", "needs_db"):
        assert r.outcomes[unit + name] == "failed"
    assert r.messages[unit + "panics"] == "boom at runtime"
    assert r.messages[unit + "fails_assert"] == "assertion `left == right` failed: math is broken"
    assert "ConnectionRefused" in r.messages[unit + "needs_db"]
    assert r.outcomes["doc:failing::src/lib.rs - add (line 3)"] == "passed"
    assert r.outcomes["doc:failing::src/lib.rs - add (line 7)"] == "failed"
    # the parse agrees with libtest's own summary lines
    sums = libtest_summaries(text)
    assert sum(s.passed for s in sums) == r.passed == 3
    assert sum(s.failed for s in sums) == r.failed == 4
    assert sum(s.ignored for s in sums) == r.skipped == 1


def test_no_test_lines_and_junk_give_empty_results():
    assert parse_libtest("error[E0432]: unresolved import `foo`\n").outcomes == {}
    assert parse_libtest("").junit_found is False
    junk = "test \x00\x1b[31m ... maybe\n" * 1000 + "test result: garbage\n"
    assert parse_results(junk).outcomes == {}


def test_nextest_status_lines():
    text = """
    Starting 4 tests across 2 binaries (1 test skipped)
        PASS [   0.004s] rust-crate tests::sums_digits
        PASS [   0.003s] (2/4) rust-crate::api decimal_of_zero
        FAIL [   0.010s] rust-crate tests::broken
        SKIP [   0.000s] rust-crate tests::slow_sum
     Summary [   0.020s] 4 tests run: 2 passed, 1 failed, 1 skipped
"""
    r = parse_nextest(text, exit_code=100)
    assert r.outcomes == {
        "rust-crate::tests::sums_digits": "passed",
        "rust-crate::api::decimal_of_zero": "passed",
        "rust-crate::tests::broken": "failed",
        "rust-crate::tests::slow_sum": "skipped",
    }
    assert parse_results(text).outcomes == r.outcomes


def test_older_rustc_panic_line_gives_the_message():
    text = (
        "running 1 test\ntest tests::x ... FAILED\n\nfailures:\n\n---- tests::x stdout ----\n"
        "thread 'tests::x' panicked at 'boom', src/lib.rs:3:5\nnote: run with `RUST_BACKTRACE=1`\n"
    )
    r = parse_libtest(text)
    assert r.outcomes == {"tests::x": "failed"} and r.messages == {"tests::x": "boom"}
