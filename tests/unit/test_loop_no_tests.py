"""A run whose clean replay ran no test is not a success, and a new test command is kept only
when it runs more tests (issue: zero tests is not success)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from doubles.loop_world import FakeEngine, FakeRetriever, Need, World, fake_compile, fake_plan_maker  # noqa: E402

from bot.config import load_settings  # noqa: E402
from bot.junit import TestResults  # noqa: E402
from bot.loop.diagnose import Signature  # noqa: E402
from bot.loop.orchestrator import run_setup  # noqa: E402
from bot.loop.target import TargetOutcome, ran_count, runs_more_tests  # noqa: E402

NOT_FOUND = "ERROR: file or directory not found: tests\n\nno tests ran in 0.01s"


def run(tmp_path, world, retriever=None):
    engine = FakeEngine(world)
    settings = load_settings(tmp_path, environ={})
    rec = run_setup(
        tmp_path,
        settings,
        engine,
        None,
        None,
        retriever=retriever,
        make_plan=fake_plan_maker("3.11"),
        compile_dockerfile=fake_compile,
        available_pythons=["3.11", "3.13"],
    )
    return rec, engine


def test_replay_with_zero_tests_is_not_success(tmp_path):
    rec, engine = run(tmp_path, World([], tests=0))
    assert rec.status == "no_tests"
    assert rec.replay["tests_ran"] == 0
    assert "ran no test" in rec.remaining and "`python -m pytest`: 0 test(s) ran" in rec.remaining
    assert "no tests/, test/" in rec.remaining
    assert rec.unresolved and rec.unresolved[0]["kind"] == "no_tests"
    assert any(b["no_cache"] for b in engine.builds)  # it was replayed: the image itself is fine
    assert engine.sessions_open == 0


def test_only_skipped_tests_is_not_success(tmp_path):
    rec, _ = run(tmp_path, World([], tests=4, skipped=4))
    assert rec.status == "no_tests"
    assert "4 skipped" in rec.remaining


def test_some_tests_ran_is_success(tmp_path):
    rec, _ = run(tmp_path, World([], tests=4, skipped=3))
    assert rec.status == "success", rec.remaining
    assert rec.replay["tests_ran"] == 1


def test_test_command_that_runs_nothing_is_not_kept(tmp_path):
    # pytest finds no tests folder; the experience base suggests unittest, which runs 0 tests
    world = World([Need("env:NEVER", NOT_FOUND, stage="collect")], runner=(0, "\nRan 0 tests in 0.000s\n\nOK\n"))
    retriever = FakeRetriever(
        [
            {
                "id": "u-runtests",
                "signal": r"file or directory not found",
                "atoms": [{"kind": "test_command", "command": ["python", "runtests.py"]}],
            }
        ]
    )
    rec, engine = run(tmp_path, world, retriever)
    assert not rec.repairs, [r.candidate.describe() for r in rec.repairs]
    assert ("u-runtests", "failure") in retriever.outcomes
    rollback = [s for s in rec.trajectory.steps if s.action == "rollback"]
    assert rollback and rollback[0].outcome == "no-more-tests"
    assert rec.status == "no_tests"
    assert "`python runtests.py`: 0 test(s) ran" in rec.remaining
    assert "`python -m pytest`: 0 test(s) ran" in rec.remaining


def test_test_command_that_runs_more_is_kept(tmp_path):
    world = World(
        [Need("env:NEVER", NOT_FOUND, stage="collect")], runner=(0, "\nRan 7 tests in 0.010s\n\nOK (skipped=2)\n")
    )
    retriever = FakeRetriever(
        [
            {
                "id": "u-runtests",
                "signal": r"file or directory not found",
                "atoms": [{"kind": "test_command", "command": ["python", "runtests.py"]}],
            }
        ]
    )
    rec, _ = run(tmp_path, world, retriever)
    assert [r.candidate.describe() for r in rec.repairs] == ["test_command python runtests.py"]
    assert rec.status == "success", rec.remaining
    assert rec.replay["tests_ran"] == 5


def test_counting():
    junit_empty = TargetOutcome("done", junit=True)
    assert ran_count(junit_empty) == 0
    assert ran_count(TargetOutcome("done", log="whatever")) is None
    assert ran_count(TargetOutcome("done", log="Ran 3 tests in 0.1s\n\nFAILED (failures=1, skipped=1)")) == 2
    assert ran_count(TargetOutcome("done", log="===== 3 passed, 2 skipped, 1 failed in 0.51s =====")) == 4
    assert ran_count(TargetOutcome("collect", [Signature("no_tests_collected", "verification", "", "x")])) == 0
    res = TestResults({"a": "passed", "b": "skipped"})
    assert runs_more_tests(TargetOutcome("collect"), TargetOutcome("done", results=res, junit=True))
    assert not runs_more_tests(
        TargetOutcome("done", results=res, junit=True), TargetOutcome("done", log="Ran 1 test in 0.0s\n\nOK")
    )


class TimedEngine(FakeEngine):
    """The fake engine on a fake clock: a build takes 10 s, a command 5 s."""

    def __init__(self, world, now):
        super().__init__(world)
        self.now = now

    def build(self, *a, **kw):
        self.now[0] += 10
        return super().build(*a, **kw)

    def session(self, *a, **kw):
        session = super().session(*a, **kw)
        run = session.exec

        def timed(*args, **kwargs):
            self.now[0] += 5
            return run(*args, **kwargs)

        session.exec = timed
        return session


def test_budget_stops_trials_replays_the_best_state_and_says_what_is_undone(tmp_path):
    # three repairs needed one after another; the budget allows only some trials
    world = World(
        [
            Need("pip:PyYAML", "E   ModuleNotFoundError: No module named 'yaml'"),
            Need("pip:PyJWT", "E   ModuleNotFoundError: No module named 'jwt'"),
            Need("pip:requests", "E   ModuleNotFoundError: No module named 'requests'"),
        ]
    )
    now = [0.0]
    engine = TimedEngine(world, now)
    settings = load_settings(tmp_path, environ={}, overrides={"budgets": {"wall_clock": 70}})
    rec = run_setup(
        tmp_path,
        settings,
        engine,
        None,
        None,
        make_plan=fake_plan_maker("3.11"),
        compile_dockerfile=fake_compile,
        available_pythons=["3.11", "3.13"],
        clock=lambda: now[0],
    )
    assert rec.status == "over_budget"
    assert "left undone" in rec.remaining and "No module named" in rec.remaining
    # the best state was replayed (no cache) with the repairs kept so far, inside the budget
    replays = [b for b in engine.builds if b["no_cache"]]
    assert len(replays) == 1 and 0 < len(rec.repairs) < 3
    assert all(f'"{r.candidate.atoms[0].args["packages"][0]}"' in replays[0]["text"] for r in rec.repairs)
    assert now[0] <= 70
    assert engine.sessions_open == 0


def test_a_script_that_prints_only_its_runner_s_summary_counts_its_tests(tmp_path):
    """wagtailmenus runs `python runtests.py`: Django's runner names no test, it closes with "Ran
    175 tests" and "FAILED (failures=46)". The record's counts come from that summary, so the
    report does not say 0 tests collected and `setupbot run` does not exit 21 on "the clean
    replay ran no test"."""
    from types import SimpleNamespace

    from bot.commands.run import outcome

    summary = "....F.\nRan 175 tests in 58.0s\n\nFAILED (failures=46, skipped=2)\n"
    world = World([Need("env:NEVER", NOT_FOUND, stage="collect")], runner=(1, summary))
    unit = {
        "id": "u-runtests",
        "signal": r"file or directory not found",
        "atoms": [{"kind": "test_command", "command": ["python", "runtests.py"]}],
    }
    rec, _ = run(tmp_path, world, FakeRetriever([unit]))
    assert rec.status == "success", rec.remaining
    assert rec.replay["tests"] == {"passed": 127, "failed": 46, "error": 0, "skipped": 2, "total": 175}
    code, why, _ = outcome(SimpleNamespace(run_record=rec, verification=None), "mostly", verified=False)
    assert (code, why) == (0, "success (not verified)")


def test_outcome_counts_read_the_runner_s_summary_when_no_test_is_named():
    from bot.loop.target import outcome_counts

    def counts(log):
        return outcome_counts(TargetOutcome("done", log=log))

    assert counts("Ran 10 tests in 1.0s\n\nOK (skipped=4)\n") == {
        "passed": 6, "failed": 0, "error": 0, "skipped": 4, "total": 10
    }  # fmt: skip
    assert counts("Ran 10 tests in 1.0s\n\nFAILED (failures=2, errors=1, unexpected successes=1)\n") == {
        "passed": 6, "failed": 3, "error": 1, "skipped": 0, "total": 10
    }  # fmt: skip
    assert counts("===== 1 failed, 129 passed, 2 errors, 3 skipped, 1 warning in 58.02s =====\n") == {
        "passed": 129, "failed": 1, "error": 2, "skipped": 3, "total": 135
    }  # fmt: skip
    assert counts("Traceback (most recent call last):\nImportError\n")["total"] == 0
    named = TargetOutcome("done", results=TestResults({"a": "passed", "b": "failed"}), log="Ran 9 tests in 1s\n")
    assert outcome_counts(named) == {"passed": 1, "failed": 1, "error": 0, "skipped": 0, "total": 2}


def test_one_reading_of_a_summary_serves_the_counts_the_ran_and_the_passed():
    """The record's counts, the loop's "how many ran" and "how many passed" read a summary the
    same way, as JUnit files each test: an expected failure (xfailed) is skipped; an unexpected
    success passes under pytest (xpassed) and fails under unittest, which says FAILED for it."""
    from bot.loop.target import outcome_counts, passed_count, ran_count

    for log, passed, ran, total in (
        ("===== 3 passed, 2 xfailed, 1 xpassed, 1 skipped in 0.5s =====\n", 4, 4, 7),
        ("Ran 10 tests in 1.0s\n\nOK (skipped=1, expected failures=2)\n", 7, 7, 10),
        ("Ran 10 tests in 1.0s\n\nFAILED (errors=1, unexpected successes=1)\n", 8, 10, 10),
    ):
        o = TargetOutcome("done", log=log)
        counts = outcome_counts(o)
        assert (passed_count(o), ran_count(o), counts["total"]) == (passed, ran, total), log
        assert counts["passed"] == passed and total - counts["skipped"] == ran, log
    # no summary at all: no count, and nothing passed
    silent = TargetOutcome("done", log="Traceback (most recent call last):\nImportError\n")
    assert ran_count(silent) is None and passed_count(silent) == 0 and outcome_counts(silent)["total"] == 0
