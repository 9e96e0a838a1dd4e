"""Repositories whose tests run with the standard library's unittest (no JUnit): the loop and
the verification read per-test results from unittest's verbose lines, run for real here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bot.junit import FAILED, PASSED, SKIPPED, is_unittest, parse_unittest, verbose_argv
from bot.verify.facts import RepoFacts
from bot.verify.judge import Judge
from bot.verify.prosecutor import Charge, LocalExecutor, check_test_run
from bot.verify.run import run_tests

SUITE = '''import unittest


class TestRules(unittest.TestCase):
    def test_passes(self):
        self.assertEqual(1 + 1, 2)

    def test_fails(self):
        """Compares two numbers."""
        self.assertEqual(1, 2)

    def test_errors(self):
        import absent_module_for_unittest_results  # noqa: F401

    @unittest.skip("needs a GPU")
    def test_skipped(self):
        pass
'''


def _suite(tmp_path: Path) -> Path:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_rules.py").write_text(SUITE)
    return tmp_path


def test_unittest_commands_are_told_apart():
    assert is_unittest(["python", "-m", "unittest", "discover", "tests"])
    assert is_unittest(["python3", "-m", "unittest"])
    assert not is_unittest(["python", "-m", "pytest"]) and not is_unittest(["python", "runtests.py"])
    assert verbose_argv(["python", "-m", "unittest", "discover", "tests"])[-1] == "-v"
    assert verbose_argv(["python", "manage.py", "test"]) == ["python", "manage.py", "test", "-v", "2"]
    assert verbose_argv(["python", "src/manage.py", "test", "--verbosity=3"])[-1] == "--verbosity=3"
    assert verbose_argv(["python", "-m", "unittest", "-v"]) == ["python", "-m", "unittest", "-v"]
    assert verbose_argv(["python", "runtests.py"]) == ["python", "runtests.py"]
    # as a CI workflow writes Django's runner (RealOrangeOne/django-tasks), and django-admin
    ci = ["python", "-m", "manage", "test", "--shuffle", "--noinput"]
    assert verbose_argv(ci) == [*ci, "-v", "2"]
    assert verbose_argv(["django-admin", "test", "--settings=tests.settings"])[-2:] == ["-v", "2"]
    assert verbose_argv(["python", "-m", "manage", "runserver"]) == ["python", "-m", "manage", "runserver"]
    assert verbose_argv(["python", "-m", "manage", "test", "-v2"])[-1] == "-v2"


def test_the_verification_reads_each_test_from_a_real_unittest_run(tmp_path):
    repo = _suite(tmp_path)
    results = run_tests(LocalExecutor(repo, dict(os.environ)), [sys.executable, "-m", "unittest", "discover", "tests"])
    assert results.junit_found and results.exit_code == 1
    assert results.outcomes == {
        "test_rules.TestRules::test_passes": PASSED,
        "test_rules.TestRules::test_fails": FAILED,
        "test_rules.TestRules::test_errors": "error",
        "test_rules.TestRules::test_skipped": SKIPPED,
    }
    assert results.messages["test_rules.TestRules::test_fails"] == "AssertionError: 1 != 2"
    assert "absent_module_for_unittest_results" in results.messages["test_rules.TestRules::test_errors"]
    assert results.messages["test_rules.TestRules::test_skipped"] == "needs a GPU"
    # a complete run: no "no JUnit report" charge, only the failing tests are charged
    charges, _ = check_test_run(results)
    assert [c.kind for c in charges] == ["tests_failed"], [(c.kind, c.evidence[:80]) for c in charges]


def test_parse_reads_docstring_lines_and_old_pythons_ids():
    out = (
        "test_a (pkg.test_x.T)\nChecks a. ... ok\n"
        "test_b (pkg.test_x.T.test_b) ... unexpected success\n"
        "\n----------------------------------------------------------------------\nRan 2 tests in 0.001s\n\nFAILED\n"
    )
    r = parse_unittest(out)
    assert r.outcomes == {"pkg.test_x.T::test_a": PASSED, "pkg.test_x.T::test_b": FAILED}
    assert not parse_unittest("Ran 0 tests in 0.000s\n\nOK\n").junit_found


def test_the_judge_does_not_give_unittest_pytest_flags(tmp_path):
    """A no-tests charge on a unittest command is ruled by running it: "Ran N tests" finds them."""
    repo = _suite(tmp_path)
    j = Judge(
        LocalExecutor(repo, dict(os.environ)),
        RepoFacts(),
        python=sys.executable,
        repo=repo,
        test_command=[sys.executable, "-m", "unittest", "discover", "tests"],
    )
    ruling = j.rule(Charge("no-tests", "no_tests", "test run", "no test was collected", [], "critical", {}))
    assert ruling.decision == "dismissed" and "finds 4 tests" in ruling.reason, ruling
    assert all("--collect-only" not in c["argv"] for c in ruling.commands)
