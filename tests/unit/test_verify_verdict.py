"""The verdict tiers, rule by rule (docs/verdicts.md), and JUnit parsing and attribution."""

from __future__ import annotations

from bot.junit import TestResults, parse_junit
from bot.verify.judge import DISMISSED, UPHELD, Ruling
from bot.verify.prosecutor import Charge
from bot.verify.results import attribute
from bot.verify.verdict import FULL, MOSTLY, PARTIAL, SHALLOW, decide


def _results(passed=10, failed=0, skipped=0) -> TestResults:
    outcomes = {f"t::p{i}": "passed" for i in range(passed)}
    outcomes.update({f"t::f{i}": "failed" for i in range(failed)})
    outcomes.update({f"t::s{i}": "skipped" for i in range(skipped)})
    return TestResults(outcomes=outcomes, exit_code=1 if failed else 0)


def _pair(kind, decision, *, own=False, upheld_tests=(), subject="x"):
    cid = f"{kind}:{subject}"
    return (
        Charge(cid, kind, subject, "", details={"own": own}),
        Ruling(cid, kind, decision, "r", "reason", upheld_tests=list(upheld_tests)),
    )


def _decide(pairs, results, mutation=None):
    return decide([c for c, _ in pairs], [r for _, r in pairs], results, mutation)


def test_full_when_nothing_stands():
    v = _decide([_pair("import_failed", DISMISSED), _pair("tests_failed", DISMISSED)], _results(10, 2))
    assert v.tier == FULL and v.environment_pass_rate == 1.0


def test_mostly_with_minor_charges_or_few_environment_failures():
    assert _decide([_pair("entry_point_failed", UPHELD)], _results()).tier == MOSTLY
    assert _decide([_pair("pip_check", UPHELD)], _results()).tier == MOSTLY
    few = _decide([_pair("tests_failed", UPHELD, upheld_tests=["t::f0"])], _results(9, 1))
    assert few.tier == MOSTLY and few.environment_pass_rate == 0.9


def test_partial_rules():
    assert _decide([_pair("import_failed", UPHELD)], _results()).tier == PARTIAL
    many = _decide([_pair("tests_failed", UPHELD, upheld_tests=[f"t::f{i}" for i in range(5)])], _results(5, 5))
    assert many.tier == PARTIAL and "50%" in many.reasons[0]
    survived = _decide([], _results(), {"ran": True, "killed": False})
    assert survived.tier == PARTIAL and "mutation" in survived.reasons[0]
    assert _decide([], _results(), {"ran": True, "killed": True}).tier == FULL


def test_shallow_rules():
    assert _decide([], None).tier == SHALLOW
    assert _decide([], TestResults()).tier == SHALLOW
    for kind in ("lifecycle_incomplete", "no_tests", "all_skipped"):
        assert _decide([_pair(kind, UPHELD)], _results()).tier == SHALLOW
    assert _decide([_pair("import_failed", UPHELD, own=True)], _results()).tier == SHALLOW
    assert _decide([], _results(0, 3)).tier == SHALLOW
    # a dismissed shallow charge does not count
    assert _decide([_pair("all_skipped", DISMISSED)], _results()).tier == FULL


def test_parse_junit_outcomes_and_messages():
    r = parse_junit("""<testsuites><testsuite>
      <testcase classname="a.b" name="ok"/>
      <testcase classname="a.b" name="bad"><failure message="assert 1 == 2">tb</failure></testcase>
      <testcase classname="a.b" name="err"><error message="">ImportError: x
more</error></testcase>
      <testcase classname="a.b" name="sk"><skipped message="why"/></testcase>
    </testsuite></testsuites>""")
    assert r.outcomes == {"a.b::ok": "passed", "a.b::bad": "failed", "a.b::err": "error", "a.b::sk": "skipped"}
    assert r.messages["a.b::err"] == "ImportError: x" and r.pass_rate == 1 / 3
    assert parse_junit("not xml").junit_found is False


def test_attribution_single_and_leave_one_out():
    without = TestResults(outcomes={"t::db": "failed", "t::cache": "failed", "t::plain": "passed", "t::both": "error"})
    with_all = TestResults(
        outcomes={"t::db": "passed", "t::cache": "passed", "t::plain": "passed", "t::both": "passed"}
    )
    one = attribute(without, with_all, names=["postgres"])
    assert one.needed == {"postgres": ("t::both", "t::cache", "t::db")}
    minus = {
        "postgres": TestResults(outcomes={"t::db": "failed", "t::both": "failed", "t::cache": "passed"}),
        "redis": TestResults(outcomes={"t::db": "passed", "t::both": "passed", "t::cache": "failed"}),
    }
    two = attribute(without, with_all, minus, ["postgres", "redis"])
    assert two.needed == {"postgres": ("t::both", "t::db"), "redis": ("t::cache",)}
    assert two.unattributed == ()
