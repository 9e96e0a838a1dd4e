"""The clean replay takes from the engine's cache only the leading steps a build of this run made
from scratch (no step from the cache), every instruction up to them the same: those layers are
what a --no-cache build would make again, and every later step runs again. A build that took any
other step from the cache is done again with no cache."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from doubles.loop_world import FakeEngine, Need, World, fake_plan_maker  # noqa: E402

from bot.compile.dockerfile import shared_work_steps  # noqa: E402
from bot.config import load_settings  # noqa: E402
from bot.loop.orchestrator import run_setup  # noqa: E402
from bot.loop.workspace import reused_steps  # noqa: E402
from bot.report.model import from_pipeline  # noqa: E402

MISSING_YAML = """ImportError while importing test module '/workspace/tests/test_x.py'.
E   ModuleNotFoundError: No module named 'yaml'"""
SYSTEM = "RUN apt-get update && apt-get install -y --no-install-recommends libyaml-0-2"


def layered_compile(graph):
    """A Dockerfile with a system-package step first, then one RUN per kept atom."""
    lines = [f"FROM python:{graph.python}-slim", SYSTEM]
    for a in graph.atoms:
        lines += [f"# atom {json.dumps(a, sort_keys=True)}", f"RUN : {json.dumps(a, sort_keys=True)}"]
    return SimpleNamespace(text="\n".join(lines) + "\n", lines=[])


def run(tmp_path, engine):
    return run_setup(
        tmp_path,
        load_settings(tmp_path, environ={}),
        engine,
        None,
        None,
        make_plan=fake_plan_maker("3.11"),
        compile_dockerfile=layered_compile,
        available_pythons=["3.11"],
    )


def _replay_builds(engine):
    return [b for b in engine.builds if ":replay-" in b["tag"]]


def test_the_replay_takes_the_first_build_s_system_step_and_runs_the_rest_again(tmp_path):
    engine = FakeEngine(World([Need("pip:PyYAML", MISSING_YAML)]), layer_cache=True)
    rec = run(tmp_path, engine)
    assert rec.status == "success", rec.remaining
    assert [r.candidate.describe() for r in rec.repairs] == ["pip_install PyYAML"]
    [replay] = _replay_builds(engine)
    # one build: with the cache, its own empty cache mounts, and no --no-cache build after it
    assert replay["no_cache"] is False and replay["fresh_mounts"] is True
    assert rec.replay["reused_steps"] == 1 and rec.replay["reused_from"].endswith(":work-1")
    assert "RUN : " in replay["text"]  # the repair's step, which ran again


def test_a_step_from_the_cache_past_what_the_run_built_from_scratch_means_a_no_cache_build(tmp_path):
    engine = FakeEngine(World([Need("pip:PyYAML", MISSING_YAML)]), layer_cache=True)
    # an earlier build left the repaired step's layer in the cache (a definition-keyed cache
    # can give it on top of this run's first step)
    repaired = layered_compile(SimpleNamespace(python="3.11", atoms=[{"kind": "pip_install", "packages": ["PyYAML"]}]))
    instructions = [ln for ln in repaired.text.splitlines() if ln.strip() and not ln.startswith("#")]
    engine.layers.add(tuple(instructions[:3]))
    rec = run(tmp_path, engine)
    assert rec.status == "success", rec.remaining
    builds = _replay_builds(engine)
    assert [b["no_cache"] for b in builds] == [False, True], builds
    assert "reused_steps" not in rec.replay
    refused = [s for s in rec.trajectory.steps if s.action == "replay" and s.outcome == "refused"]
    assert refused and refused[0].detail["cached_work"] == [True, True]


def test_a_first_build_that_took_a_step_from_the_cache_is_not_taken_from(tmp_path):
    engine = FakeEngine(World([Need("pip:PyYAML", MISSING_YAML)]), layer_cache=True)
    engine.layers.add(("FROM python:3.11-slim", SYSTEM))  # another run built the system step
    rec = run(tmp_path, engine)
    assert rec.status == "success", rec.remaining
    assert [b["no_cache"] for b in _replay_builds(engine)] == [True]
    assert "reused_steps" not in rec.replay


def test_shared_steps_stop_at_the_first_instruction_that_differs():
    built = 'FROM a AS env\nENV X=1\nRUN apt-get install x\nCOPY req /tmp/\nRUN pip install -r /tmp/req\nCMD ["t"]\n'
    assert shared_work_steps(built, built) == 3
    assert shared_work_steps(built, built.replace("pip install", "uv pip install")) == 2
    assert shared_work_steps(built, built.replace("ENV X=1", "ENV X=2")) == 0  # every step after differs
    # comments and a development stage do not count; another stage does
    assert shared_work_steps(built, "# note\n" + built + "\nFROM env AS dev\nRUN apt-get install git\n") == 3
    assert shared_work_steps("FROM a AS wheels\nRUN pip wheel x\n" + built, built) == 0


def test_reused_steps_are_a_leading_run_within_what_is_shared():
    assert reused_steps((True, False, False), shared=2) == 1
    assert reused_steps((False, False), shared=2) == 0  # nothing from the cache: a no-cache build
    assert reused_steps((True, True, True), shared=2) is None  # past what the run built from scratch
    assert reused_steps((True, False, True), shared=3) is None  # a later step from the cache
    assert reused_steps(None, shared=2) is None  # the builder did not say


def test_the_report_says_which_steps_came_from_the_run_s_own_build():
    replay = {"ok": True, "reused_steps": 2, "reused_from": "setupbot-loop-x:work-1"}
    [claim] = [
        p.claim for p in from_pipeline(run_record={"replay": replay}).proven if p.claim.startswith("clean replay")
    ]
    assert "first 2 steps (RUN, COPY, ADD) came from a build of this run that took no step" in claim
    assert "every later step ran again" in claim
