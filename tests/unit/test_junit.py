"""One JUnit reader and one results type behind the loop's, the verification's and the
benchmark's results."""

from functools import partial

from bot.bench.score import parse_junit_counts
from bot.junit import TestResults, parse_junit, read_junit

loop_parse = partial(parse_junit, tracebacks=True)  # what the loop keeps: the diagnosis reads it
verify_parse = parse_junit  # what the verification keeps: the report shows it

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


def test_a_test_reported_twice_keeps_its_failure():
    xml = """<testsuite><testcase classname="t" name="a"/>
<testcase classname="t" name="a"><error message="teardown broke"/></testcase>
<testcase classname="t" name="b"><failure message="first"/></testcase>
<testcase classname="t" name="b"/></testsuite>"""
    for parse in (loop_parse, verify_parse):
        r = parse(xml)
        assert r.outcomes == {"t::a": "error", "t::b": "failed"}
        assert r.counts() == {"passed": 0, "failed": 1, "error": 1, "skipped": 0, "total": 2}
        assert r.summary()["failed"] == 2  # the verification counts failures and errors together


def test_results_survive_their_verification_json():
    r = verify_parse(XML)
    back = TestResults.from_json(r.to_json())
    assert back.outcomes == r.outcomes and back.messages == r.messages and back.summary() == r.summary()
