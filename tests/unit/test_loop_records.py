"""JUnit parsing, budgets and the trajectory file."""

from __future__ import annotations

import json

from bot.junit import parse_junit
from bot.loop.trajectory import Budget, Trajectory
from bot.redact import register_secret

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.test_a" name="test_ok" time="0.01"/>
<testcase classname="tests.test_a" name="test_bad" time="0.01"><failure message="assert 1 == 2">E assert 1 == 2</failure></testcase>
<testcase classname="tests.test_b" name="test_err" time="0.01"><error message="fixture 'db' not found">setup</error></testcase>
<testcase classname="tests.test_b" name="test_skip" time="0.0"><skipped message="needs gpu"/></testcase>
</testsuite></testsuites>"""


def test_junit_outcomes():
    r = parse_junit(JUNIT, tracebacks=True)
    assert r.counts() == {"passed": 1, "failed": 1, "error": 1, "skipped": 1, "total": 4}
    assert r.record_json()["summary"] == r.counts() and r.record_json()["outcomes"] == r.outcomes
    assert r.outcomes["tests.test_b::test_err"] == "error"
    assert "fixture 'db' not found" in r.failure_text()


def test_junit_malformed_is_empty():
    assert parse_junit("<testsuites><testcase").total == 0
    assert parse_junit("").total == 0


def test_budget_steps_and_wall_clock():
    now = [0.0]
    b = Budget(max_steps=3, wall_clock=100, command_timeout=600, clock=lambda: now[0])
    assert b.exhausted() == ""
    # trial commands stop where the reserve for the clean replay begins; the replay's at the end
    assert b.timeout_for_command() == 100 - b.reserve
    assert b.timeout_for_command(final=True) == 100 - b.FINISH_SECONDS
    for _ in range(3):
        b.spend_step()
    assert "step budget" in b.exhausted()
    b2 = Budget(max_steps=50, wall_clock=100, command_timeout=600, clock=lambda: now[0])
    now[0] = 101.0
    assert "wall-clock" in b2.exhausted()


def test_trajectory_jsonl_is_redacted(tmp_path):
    register_secret("tok_abcdefghijklmnop")
    t = Trajectory(tmp_path / "t.jsonl")
    t.record(
        "trial",
        command=["echo", "tok_abcdefghijklmnop"],
        exit_code=0,
        output_tail="x tok_abcdefghijklmnop",
        duration=0.5,
        snapshot="2",
        outcome="ok",
    )
    line = json.loads((tmp_path / "t.jsonl").read_text())
    assert line["command"] == ["echo", "***"] and "tok_" not in line["output_tail"]
    assert t.to_jsonl().strip() == (tmp_path / "t.jsonl").read_text().strip()


def test_budget_keeps_a_reserve_for_the_replay():
    now = [0.0]
    b = Budget(max_steps=50, wall_clock=1000, command_timeout=600, clock=lambda: now[0])
    assert b.reserve == 300  # nothing measured yet: 30 % of the wall clock
    b.measured(build=100, target=50)
    b.measured(build=80)  # the slowest build counts
    assert b.reserve == 100 * 1.2 + 50 + b.FINISH_SECONDS
    assert b.can_start(700) and not b.can_start(900)
    now[0] = 820.0
    assert "kept for the clean replay" in b.exhausted()
    assert b.can_replay()  # the 100 s build + 20 s fit in the 180 s left
    assert b.timeout_for_command() == 1  # trial commands get nothing past the reserve
    assert b.timeout_for_command(final=True) == 160
    now[0] = 880.0
    assert b.can_replay()  # exactly the build and the finish left
    now[0] = 881.0
    assert not b.can_replay()
    # a huge measured build never takes the whole run
    b.measured(build=5000)
    assert b.reserve == 800
