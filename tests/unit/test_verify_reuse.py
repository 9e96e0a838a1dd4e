"""The verification takes the clean replay's test run when it would run the same command with
the same variables on the same image and has no service or sibling to start (issue 16, speed):
the suite ran in a fresh container of that image already, and a long one ran a third time."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bot import pipeline
from bot.config import load_settings
from bot.loop.records import ReplayRun
from bot.verify.run import JUNIT_PATH, read_results, same_test_run, verification_argv

XML = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.test_a" name="test_ok" time="0.1"/>
<testcase classname="tests.test_a" name="test_bad" time="0.1"><failure message="assert 1 == 2">E assert 1 == 2
tests/test_a.py:4: AssertionError</failure></testcase>
<testcase classname="tests.test_a" name="test_skip" time="0"><skipped message="no network"/></testcase>
</testsuite></testsuites>"""


def test_the_loops_pytest_command_and_the_verifications_are_the_same_run():
    loop = ["python", "-m", "pytest", "tests", f"--junitxml={JUNIT_PATH}"]
    assert same_test_run(loop, verification_argv(["python", "-m", "pytest", "tests"]))
    assert same_test_run(["pytest", "--junitxml", "/x.xml"], ["pytest", "-p", "no:cacheprovider"])
    assert not same_test_run(loop, verification_argv(["python", "-m", "pytest", "tests", "-k", "fast"]))
    assert not same_test_run(loop, verification_argv(["python", "-m", "pytest"]))
    # unittest and Django: both made verbose the same way
    assert same_test_run(["python", "manage.py", "test", "-v", "2"], verification_argv(["python", "manage.py", "test"]))


def test_read_results_gives_what_a_verification_run_reads():
    r = read_results("=== 1 failed, 1 passed, 1 skipped in 0.3s ===\n", XML, 1, False)
    assert (r.total, r.passed, r.failed, r.skipped, r.exit_code, r.junit_found) == (3, 1, 1, 1, 1, True)
    assert r.messages["tests.test_a::test_bad"] == "assert 1 == 2"  # the first line, as a report shows
    assert "1 failed" in r.output_tail
    text = "test_one (tests.test_m.T.test_one) ... ok\n\nRan 1 test in 0.001s\n\nOK\n"
    u = read_results(text, None, 0, False)
    assert u.junit_found and u.passed == 1


@pytest.fixture
def verify_call(tmp_path, monkeypatch):
    """``pipeline._verify`` with verify_environment replaced by one that keeps its arguments."""
    seen: dict = {}

    def fake(engine, repo, image, **kw):
        seen.update(kw, image=image)
        return SimpleNamespace(tier="Full")

    monkeypatch.setattr(pipeline, "verify_environment", fake)
    settings = load_settings(tmp_path, environ={})

    def call(replay_run, *, services=(), env=None):
        seen.clear()
        plan = SimpleNamespace(
            services=list(services), test_command=["python", "-m", "pytest"], env=dict(env or {}), warnings=[]
        )
        pipeline._verify(object(), tmp_path, "img:replay", plan, settings, [], replay_run=replay_run)
        return seen

    return call


def _run(**changes) -> ReplayRun:
    base = dict(
        tag="img:replay",
        argv=["python", "-m", "pytest", f"--junitxml={JUNIT_PATH}"],
        env={},
        output="== 1 failed, 1 passed, 1 skipped ==",
        junit_xml=XML,
        exit_code=1,
        timed_out=False,
    )
    return ReplayRun(**{**base, **changes})


def test_the_replays_run_is_taken_when_nothing_differs(verify_call):
    seen = verify_call(_run())
    assert seen["replayed"] is not None and seen["replayed"].counts()["failed"] == 1
    assert "clean replay" in seen["replayed_from"]


@pytest.mark.parametrize(
    "run, kw",
    [
        (None, {}),
        (_run(tag="img:work-1"), {}),  # the lock's image, on which no test ran
        (_run(env={"DEBUG": "1"}), {}),
        (_run(argv=["python", "-m", "pytest", "-x", f"--junitxml={JUNIT_PATH}"]), {}),
        (_run(), {"services": [{"name": "postgres", "image": "postgres:17"}]}),
    ],
    ids=["no-replay", "other-image", "other-variables", "other-command", "a-service"],
)
def test_the_suite_runs_again_when_anything_differs(verify_call, run, kw):
    assert verify_call(run, **kw)["replayed"] is None
