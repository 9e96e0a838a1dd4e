"""pytest collects before it runs a test and stops at a collection error, so a direct pytest run
needs no collect-only run before it: what that run would say is in the test run's own output.
The collect-only run comes after only when the test run was stopped (a timeout, a signal) or ran
nothing, where whether the tests collect decides what the outcome says."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from doubles.loop_world import FakeEngine, Need, World, fake_compile, fake_plan_maker  # noqa: E402

from bot.config import load_settings  # noqa: E402
from bot.junit import parse_junit  # noqa: E402
from bot.loop.diagnose import collection_signatures  # noqa: E402
from bot.loop.orchestrator import run_setup  # noqa: E402
from bot.loop.target import collection_stopped  # noqa: E402

MISSING_YAML = """ImportError while importing test module '/workspace/tests/test_x.py'.
E   ModuleNotFoundError: No module named 'yaml'"""


def run(tmp_path, world):
    engine = FakeEngine(world)
    rec = run_setup(
        tmp_path,
        load_settings(tmp_path, environ={}),
        engine,
        None,
        None,
        make_plan=fake_plan_maker("3.11"),
        compile_dockerfile=fake_compile,
        available_pythons=["3.11"],
    )
    return rec, engine


def _collects(engine):
    return [a for a in engine.execs if "--collect-only" in a]


def test_a_passing_run_runs_the_tests_once_and_collects_nothing_apart(tmp_path):
    rec, engine = run(tmp_path, World([], tests=4))
    assert rec.status == "success", rec.remaining
    assert rec.tests.count("passed") == 4
    assert _collects(engine) == []
    # one run of the tests per image (the first and the clean replay), each of them the test run
    assert len([a for a in engine.execs if "pytest" in " ".join(a)]) == len(engine.builds) == 2


def test_a_collection_error_is_read_from_the_test_run_and_repaired(tmp_path):
    rec, engine = run(tmp_path, World([Need("pip:PyYAML", MISSING_YAML)]))
    assert rec.status == "success", rec.remaining
    assert [r.candidate.describe() for r in rec.repairs] == ["pip_install PyYAML"]
    assert _collects(engine) == []
    # the first evaluation stopped at collection, as a collect-only run would have
    first = next(s for s in rec.trajectory.steps if s.action == "test")
    assert first.exit_code == 2


def test_a_stopped_run_asks_whether_the_tests_collect(tmp_path):
    rec, engine = run(tmp_path, World([], tests=3, test_times_out=True))
    assert len(_collects(engine)) >= 1
    assert rec.status == "success", rec.remaining
    assert "collection passed" in (rec.replay.get("note") or "")


def _pytest(tmp_path, *args):
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return r.returncode, r.stdout + r.stderr


def test_pytest_s_own_run_says_what_its_collect_only_run_says(tmp_path):
    """Real pytest: a test module whose import fails. Its test run stops in the collection, and
    the signatures read from it are the collect-only run's."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    (tmp_path / "tests" / "test_bad.py").write_text(
        textwrap.dedent("""
            import quasar_not_installed

            def test_bad():
                assert quasar_not_installed
        """)
    )
    collect_exit, collect_out = _pytest(tmp_path, "--collect-only", "-q")
    junit = tmp_path / "junit.xml"
    test_exit, test_out = _pytest(tmp_path, f"--junitxml={junit}")
    assert collect_exit == test_exit == 2
    results = parse_junit(junit.read_text())
    assert results.total >= 1 and results.count("passed") == 0  # test_ok did not run
    assert collection_stopped(test_exit, results, test_out, junit.read_text())
    assert collection_stopped(test_exit, results, test_out)  # its last line says so too
    want = {(s.kind, s.key) for s in collection_signatures(collect_out)}
    assert ("missing_module", "quasar_not_installed") in want
    assert {(s.kind, s.key) for s in collection_signatures(test_out)} == want


def test_a_run_that_went_through_did_not_stop_in_collection(tmp_path):
    (tmp_path / "test_a.py").write_text("def test_a():\n    assert False\n\ndef test_b():\n    pass\n")
    junit = tmp_path / "junit.xml"
    code, out = _pytest(tmp_path, f"--junitxml={junit}")
    assert code == 1
    assert not collection_stopped(code, parse_junit(junit.read_text()), out)


def test_a_run_that_went_on_past_a_collection_error_says_so_in_its_report(tmp_path):
    """--continue-on-collection-errors: the tests run and the run ends 1, but the JUnit report
    holds the collection failure, which a collect-only run would have stopped at."""
    (tmp_path / "test_a.py").write_text("def test_a():\n    pass\n")
    (tmp_path / "test_b.py").write_text("import quasar_not_installed\n")
    junit = tmp_path / "junit.xml"
    code, out = _pytest(tmp_path, "--continue-on-collection-errors", f"--junitxml={junit}")
    results = parse_junit(junit.read_text())
    assert code == 1 and results.count("passed") == 1
    assert collection_stopped(code, results, out, junit.read_text())


def test_pytest_s_words_in_a_test_s_own_output_are_not_a_collection_stop(tmp_path):
    """A repository that tests a pytest plugin prints an inner session's output, collection
    errors and all; its own run went through."""
    inner = "_____ ERROR collecting tests/test_x.py _____\n1 error during collection\n"
    (tmp_path / "test_a.py").write_text(f"def test_a():\n    print({inner!r})\n    assert False\n")
    junit = tmp_path / "junit.xml"
    code, out = _pytest(tmp_path, f"--junitxml={junit}")
    assert code == 1 and "ERROR collecting" in out
    assert not collection_stopped(code, parse_junit(junit.read_text()), out, junit.read_text())
