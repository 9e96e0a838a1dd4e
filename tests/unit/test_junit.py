"""One JUnit reader behind the loop's, the verification's and the benchmark's results."""

from bot.bench.score import parse_junit_counts
from bot.junit import read_junit
from bot.loop.junit import parse_junit as loop_parse
from bot.verify.results import parse_junit as verify_parse

XML = """<testsuites><testsuite>
<testcase classname="t.test_a" name="test_ok"/>
<testcase classname="t.test_a" name="test_bad"><failure message="assert 1 == 2">Traceback line 1
AssertionError</failure></testcase>
<testcase classname="t.test_a" name="test_boom"><error message="fixture broke">E   RuntimeError</error></testcase>
<testcase classname="t.test_a" name="test_later"><skipped message="not today"/></testcase>
<testcase name="bare"/>
</testsuite></testsuites>"""


def test_the_three_readers_agree_on_the_outcomes():
    cases = read_junit(XML)
    expected = {
        "t.test_a::test_ok": "passed",
        "t.test_a::test_bad": "failed",
        "t.test_a::test_boom": "error",
        "t.test_a::test_later": "skipped",
        "bare": "passed",
    }
    assert {c.test_id: c.outcome for c in cases} == expected
    loop, verify = loop_parse(XML), verify_parse(XML)
    assert loop.outcomes == verify.outcomes == expected
    counts = parse_junit_counts(XML)
    assert (counts.passed, counts.failed, counts.errors, counts.skipped) == (2, 1, 1, 1)
    # what each keeps of a failure: the loop the whole traceback (diagnosis), the verdict one line
    assert loop.messages["t.test_a::test_bad"] == "assert 1 == 2\nTraceback line 1\nAssertionError"
    assert verify.messages["t.test_a::test_bad"] == "assert 1 == 2"
    assert loop.messages["t.test_a::test_later"] == verify.messages["t.test_a::test_later"] == "not today"


def test_unreadable_xml_is_said_the_same_way():
    assert read_junit("<testsuite><testcase") is None
    assert loop_parse("").outcomes == {} and not verify_parse("").junit_found
    assert parse_junit_counts("not xml") is None
