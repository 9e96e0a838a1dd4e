"""Each dismissal rule of the judge, and that anything else is upheld, with the judge's own
re-runs done by a local interpreter."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bot.verify.facts import RepoFacts, guarded_imports
from bot.verify.judge import (
    DISMISSED,
    EXTERNAL_CAUSE,
    NOT_REPRODUCED,
    OPTIONAL_DEPENDENCY,
    OWN_ASSERTION,
    REPRODUCED,
    UPHELD,
    Judge,
    classify_failure,
    junit_to_nodeid,
)
from bot.verify.prosecutor import Charge, LocalExecutor


def _judge(tmp_path: Path, facts: RepoFacts | None = None) -> Judge:
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    return Judge(
        LocalExecutor(tmp_path, env),
        facts or RepoFacts(),
        python=sys.executable,
        repo=tmp_path,
        test_command=[sys.executable, "-m", "pytest"],
    )


def _import_charge(module: str, dist: str | None = None, evidence: str = "") -> Charge:
    return Charge(
        f"import:{module}",
        "import_failed",
        module,
        evidence or f"ModuleNotFoundError: No module named '{module}'",
        [sys.executable, "-c", f"import {module}"],
        details={"dist": dist, "module": module, "own": False},
    )


def test_optional_extra_is_dismissed(tmp_path):
    ruling = _judge(tmp_path, RepoFacts(optional={"matplotlib"})).rule(_import_charge("matplotlib", "matplotlib"))
    assert (ruling.decision, ruling.rule) == (DISMISSED, OPTIONAL_DEPENDENCY)
    assert "extra" in ruling.reason


def test_guarded_import_is_dismissed(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(
        "try:\n    import ujson as json\nexcept ImportError:\n    import json\n"
        "try:\n    from lxml import etree\nexcept (ImportError, OSError):\n    etree = None\n"
    )
    facts = RepoFacts(guarded_imports=guarded_imports(tmp_path))
    assert {"ujson", "lxml"} <= facts.guarded_imports
    ruling = _judge(tmp_path, facts).rule(_import_charge("ujson", "ujson"))
    assert (ruling.decision, ruling.rule) == (DISMISSED, OPTIONAL_DEPENDENCY)


def test_entry_point_needing_an_optional_module_is_dismissed(tmp_path):
    charge = Charge(
        "entry:tool",
        "entry_point_failed",
        "tool",
        "exit code 1\nModuleNotFoundError: No module named 'rich'",
        ["tool", "--help"],
    )
    ruling = _judge(tmp_path, RepoFacts(optional={"rich"})).rule(charge)
    assert ruling.rule == OPTIONAL_DEPENDENCY


def test_core_import_that_still_fails_is_upheld_with_the_rerun(tmp_path):
    ruling = _judge(tmp_path).rule(_import_charge("no_such_module_for_judge_xyz", "no-such"))
    assert (ruling.decision, ruling.rule) == (UPHELD, REPRODUCED)
    assert ruling.commands and ruling.commands[0]["exit_code"] != 0
    assert "no_such_module_for_judge_xyz" in ruling.commands[0]["output_tail"]


def test_charge_that_does_not_reproduce_is_dismissed(tmp_path):
    ruling = _judge(tmp_path).rule(_import_charge("json", None, "ImportError: flaky"))
    assert (ruling.decision, ruling.rule) == (DISMISSED, NOT_REPRODUCED)


def test_network_to_unreachable_host_is_external(tmp_path):
    (tmp_path / "netmod.py").write_text(
        "raise OSError('HTTPSConnectionPool(host=\\'example.org\\'): Max retries exceeded with url: / "
        "(Caused by NameResolutionError: Temporary failure in name resolution)')\n"
    )
    ruling = _judge(tmp_path).rule(_import_charge("netmod", None, "OSError: ... Temporary failure in name resolution"))
    assert (ruling.decision, ruling.rule) == (DISMISSED, EXTERNAL_CAUSE)


def test_failing_tests_split_into_own_assertions_external_and_environment(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_env.py").write_text("import missing_driver_xyz\n\ndef test_db():\n    pass\n")
    messages = {
        "tests.test_math::test_add": "AssertionError: assert 3 == 4",
        "tests.test_http::test_fetch": "requests.exceptions.ConnectionError: Max retries exceeded with url: "
        "https://pypi.example/ (Caused by NameResolutionError)",
        "tests.test_env::test_db": "ModuleNotFoundError: No module named 'missing_driver_xyz'",
    }
    charge = Charge(
        "tests-failed", "tests_failed", "3 tests", "", [], details={"tests": sorted(messages), "messages": messages}
    )
    ruling = _judge(tmp_path).rule(charge)
    assert ruling.decision == UPHELD
    assert ruling.upheld_tests == ["tests.test_env::test_db"]
    assert ruling.dismissed_tests == {
        "tests.test_math::test_add": OWN_ASSERTION,
        "tests.test_http::test_fetch": EXTERNAL_CAUSE,
    }
    assert ruling.commands and "tests/test_env.py::test_db" in ruling.commands[0]["argv"]


def test_only_own_assertions_dismisses_the_whole_charge(tmp_path):
    messages = {"t::a": "AssertionError: expected 1", "t::b": "assert [] == [1]"}
    charge = Charge("tests-failed", "tests_failed", "2 tests", "", [], details={"messages": messages})
    ruling = _judge(tmp_path).rule(charge)
    assert (ruling.decision, ruling.rule) == (DISMISSED, OWN_ASSERTION)


def test_classify_failure():
    assert classify_failure("AssertionError") == "assertion"
    assert classify_failure("psycopg.OperationalError: connection refused") == "environment"
    assert classify_failure("socket.gaierror: [Errno -3] Temporary failure in name resolution") == "external"
    assert classify_failure("ValueError: bad") == "unknown"


def test_junit_to_nodeid(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("")
    assert junit_to_nodeid("tests.test_x.TestA::test_b", tmp_path) == "tests/test_x.py::TestA::test_b"
    assert junit_to_nodeid("tests.test_x::test_c[1-2]", tmp_path) == "tests/test_x.py::test_c[1-2]"
    assert junit_to_nodeid("nowhere.mod::t", tmp_path) is None


def test_all_skipped_for_network_is_external_else_upheld(tmp_path):
    j = _judge(tmp_path)
    net = Charge(
        "all-skipped",
        "all_skipped",
        "test run",
        "",
        [],
        details={"skip_messages": ["requires internet access", "no internet"]},
    )
    assert j.rule(net).rule == EXTERNAL_CAUSE
    other = Charge("all-skipped", "all_skipped", "test run", "", [], details={"skip_messages": ["not implemented"]})
    assert j.rule(other).decision == UPHELD


def test_no_tests_and_lifecycle_are_checked_by_collection(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_x():\n    pass\n")
    j = _judge(tmp_path)
    ruling = j.rule(Charge("no-tests", "no_tests", "test run", "no test was collected", []))
    assert (ruling.decision, ruling.rule) == (DISMISSED, NOT_REPRODUCED)
    lifecycle = j.rule(
        Charge(
            "lifecycle",
            "lifecycle_incomplete",
            "test run",
            "timed out",
            [],
            details={"reasons": ["the test run timed out"]},
        )
    )
    assert lifecycle.decision == UPHELD and "collection works" in lifecycle.reason
    (tmp_path / "test_one.py").unlink()
    assert j.rule(Charge("no-tests", "no_tests", "test run", "", [])).decision == UPHELD


def test_pip_conflict_only_in_optional_distributions_is_dismissed(tmp_path):
    info = tmp_path / "fancyextra-1.0.dist-info"
    info.mkdir()
    info.joinpath("METADATA").write_text(
        "Metadata-Version: 2.1\nName: fancyextra\nVersion: 1.0\nRequires-Dist: absent-dist-for-judge-xyz\n"
    )
    charge = Charge("pip-check", "pip_check", "pip check", "", [sys.executable, "-m", "pip", "check"])
    env = dict(os.environ, PYTHONPATH=str(tmp_path))

    # only the optional distribution's conflict: dismissed. The host may have conflicts of its
    # own, so the judge is pointed at a pip check that reports just this one.
    class OnlyThis(LocalExecutor):
        def exec(self, argv, env=None, timeout=600, workdir=None, changes=True):
            r = super().exec(argv, env, timeout, workdir)
            r.output = "\n".join(ln for ln in r.output.splitlines() if "fancyextra" in ln)
            return r

    j = Judge(OnlyThis(tmp_path, env), RepoFacts(optional={"fancyextra"}), python=sys.executable)
    assert j.rule(charge).rule == OPTIONAL_DEPENDENCY
    j2 = Judge(OnlyThis(tmp_path, env), RepoFacts(), python=sys.executable)
    upheld = j2.rule(charge)
    assert upheld.decision == UPHELD
    # the reviewer reads which conflict: pip's own line, not a count alone
    assert upheld.reason.startswith("1 dependency conflict remains: fancyextra 1.0 requires absent-dist-for-judge-xyz")
