"""Fault injection (SECURITY.md R1, R5, R6): each fault ends in bounded time with a clear outcome
and leaves nothing behind.

- LLM 429 / 500 / timeouts inside the loop: bounded retries with capped waits (injected sleep),
  then the deterministic outcome, marked degraded (unit, local LLM double).
- GitHub 5xx and rate limits: tests/unit/test_github_publish.py (primary and secondary rate
  limits waited out through an injected clock, a wait beyond the cap and persistent 5xx end in
  a clear GitHubError, bounded backoff).
- Engine faults on the real engine: a Dockerfile whose build fails, and an engine call that
  raises mid-run; afterwards nothing carries the run's label.
A service that never becomes healthy: tests/integration/test_services.py
(test_service_that_never_becomes_healthy_is_bounded_and_removed).
"""

from __future__ import annotations

import threading
import time

import pytest
from doubles.llm_server import ScriptedLLMServer
from doubles.loop_world import FakeEngine, Need, World, fake_compile, fake_plan_maker
from sec_helpers import copy_repo, leftovers

from bot.config import load_settings
from bot.errors import EngineError, SetupbotError
from bot.loop.llm import LLMPlanner
from bot.loop.orchestrator import run_setup

UNCLASSIFIED = "Segmentation fault (core dumped) in _frobnicate; rebuild libfrob"


# --- LLM faults ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault,expect",
    [
        ({"status": 429, "headers": {"retry-after": "3600"}}, "RateLimitError"),
        ({"status": 500}, "InternalServerError"),
        ({"status": 503, "headers": {"retry-after": "2"}}, "InternalServerError"),
        ({"delay": 2.5, "content": "{}"}, "APITimeoutError"),
    ],
)
def test_llm_faults_are_bounded_then_degrade_to_the_deterministic_path(fault, expect, tmp_path):
    waits: list[float] = []
    with ScriptedLLMServer([fault] * 20) as server:
        settings = load_settings(
            tmp_path,
            environ={},
            overrides={
                "llm": {"base_url": server.base_url, "model": "m", "api_key": "k-123456", "timeout": 1, "retries": 3}
            },
        )
        planner = LLMPlanner(settings.llm, secrets=settings.secrets(), sleep=waits.append)
        started = time.monotonic()
        record = run_setup(
            tmp_path,
            settings,
            FakeEngine(World([Need("pip:never", UNCLASSIFIED)])),
            None,
            planner,
            make_plan=fake_plan_maker(),
            compile_dockerfile=fake_compile,
            available_pythons=["3.11"],
        )
        seconds = time.monotonic() - started
        calls = len(server.requests)
    assert record.degraded is True and record.status == "unresolved"
    assert calls == 4  # the first try and 3 retries, then no more calls
    assert len(waits) == 3 and max(waits) <= 10  # a retry-after of an hour is not obeyed blindly
    assert seconds < 4 * 2.5 + 10
    assert expect in " ".join(record.llm_usage["errors"])
    assert any("fell back" in w or "failed" in w for w in record.warnings + [record.remaining])
    assert "Segmentation fault" in record.unresolved[0]["message"]  # the deterministic outcome


# --- engine faults (real engine) ------------------------------------------------------------------


@pytest.mark.docker
@pytest.mark.timeout(600)
def test_a_failing_build_ends_unresolved_with_nothing_left(docker_available, tmp_path):
    from bot.engine import Engine
    from bot.pipeline import run_pipeline

    repo = copy_repo("hostile-limits", tmp_path)
    (repo / "setup.py").write_text("raise SystemExit('this project does not build: broken on purpose')\n")
    settings = load_settings(
        repo, environ={}, overrides={"budgets": {"max_steps": 4, "wall_clock": 300}, "engine": {"command_timeout": 60}}
    )
    engine = Engine.from_settings(settings)
    started = time.monotonic()
    result = run_pipeline(repo, settings, engine=engine, use_knowledge=False, repository="example/broken")
    assert time.monotonic() - started < 300
    record = result.run_record
    assert record.status == "unresolved" and not record.replay
    build_steps = [s for s in record.trajectory.steps if s.action == "build"]
    assert build_steps and build_steps[0].outcome == "failed"
    assert "broken on purpose" in build_steps[0].output_tail
    report = result.generated.files[result.generated.report_path]
    assert "not verified" in report or "did not run" in report
    assert leftovers(engine.run_id) == {"containers": [], "networks": [], "volumes": [], "images": []}


@pytest.mark.docker
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("call", ["create_container", "build"])
@pytest.mark.slow
def test_an_engine_error_mid_run_is_a_clear_error_and_leaves_nothing(call, docker_available, tmp_path, monkeypatch):
    """The engine works for the first image and runner, then fails (connection reset) on the
    next call of the kind: the clean replay's build, or its container. On an engine whose cache
    did not hold the first image's steps, that image is the clean replay, and the next build is
    the locked Dockerfile's or, when the image installed the lock resolved from the plan, the
    development stage's; a failure there ends the run too, as no verdict on either. The
    development stage builds beside the first build, so either of the two may be the one that
    fails."""
    from bot.engine import Engine
    from bot.pipeline import run_pipeline

    # a repository that passes at once: the loop's next build and container are the replay's
    repo = tmp_path / "passing"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    (repo / ".python-version").write_text("3.11\n")
    # the budget leaves the loop's first build and run room on a loaded CI engine (four builds
    # beside it took it past 300 s once, and the run ended before the replay the fault is for)
    settings = load_settings(
        repo, environ={}, overrides={"budgets": {"max_steps": 4, "wall_clock": 900}, "engine": {"command_timeout": 300}}
    )
    engine = Engine.from_settings(settings)
    real = getattr(engine, call)
    done: list[object] = []
    first = threading.Lock()  # the development stage builds beside the first build: one call wins

    def works_once_then_fails(*a, **kw):
        with first:
            failing = bool(done)
            done.append(call)
        if failing:
            raise EngineError("the engine failed: connection reset by peer", "Check that the engine is healthy.")
        return real(*a, **kw)

    monkeypatch.setattr(engine, call, works_once_then_fails)
    started = time.monotonic()
    try:
        result = run_pipeline(repo, settings, engine=engine, use_knowledge=False, verify=False)
    except SetupbotError as exc:  # a clear error is an acceptable outcome; a hang or a leak is not
        assert "engine failed" in exc.render() and exc.fix
        outcome = "error"
    else:
        record = result.run_record
        assert record.status in ("unresolved", "over_budget", "error")
        assert "engine failed" in (record.remaining + " ".join(record.warnings) + record.trajectory.to_jsonl())
        outcome = record.status
    assert outcome and time.monotonic() - started < 900  # bounded: the fault ends the run, never a hang
    assert done, f"the first {call} did not happen"
    assert leftovers(engine.run_id) == {"containers": [], "networks": [], "volumes": [], "images": []}
    # nor a lock file that a proof wrote before the engine failed: the run wrote no outputs
    assert outcome != "error" or not (repo / ".devcontainer" / "requirements.lock").exists()
