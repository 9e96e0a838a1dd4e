"""The setup loop's logic against in-memory doubles of the engine, graph and experience base."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from doubles.loop_world import (  # noqa: E402
    FakeEngine,
    FakeGraph,
    FakePlan,
    FakeRetriever,
    Need,
    World,
    fake_compile,
    fake_plan_maker,
)

from bot.config import load_settings  # noqa: E402
from bot.loop.diagnose import Signature  # noqa: E402
from bot.loop.orchestrator import run_setup  # noqa: E402
from bot.loop.target import TargetOutcome, compare  # noqa: E402

MISSING_YAML = "E   ModuleNotFoundError: No module named 'yaml'"
MISSING_JWT = "E   ModuleNotFoundError: No module named 'jwt'"
SHADOWED_JWT = (
    "E   ImportError: cannot import name 'encode' from 'jwt' (/usr/lib/python3/site-packages/jwt/__init__.py)"
)


def settings(tmp_path, **budgets):
    return load_settings(tmp_path, environ={}, overrides={"budgets": budgets} if budgets else None)


def run(tmp_path, world, retriever=None, python="3.11", broken=None, **budgets):
    engine = FakeEngine(world, broken_packages=broken)
    rec = run_setup(
        tmp_path,
        settings(tmp_path, **budgets),
        engine,
        None,
        None,
        retriever=retriever,
        make_plan=fake_plan_maker(python),
        compile_dockerfile=fake_compile,
        available_pythons=["3.11", "3.13"],
    )
    return rec, engine


def kept(rec):
    return [r.candidate.describe() for r in rec.repairs]


def test_missing_module_repaired_in_container_and_replayed_clean(tmp_path):
    rec, engine = run(tmp_path, World([Need("pip:PyYAML", MISSING_YAML)]))
    assert rec.status == "success", rec.remaining
    # the stages the bench's time table reads: target runs (three here) and the replay
    assert {"plan_seconds", "build_seconds", "test_seconds", "replay_seconds", "total_seconds"} <= set(rec.timings)
    assert rec.timings["test_seconds"] <= rec.timings["total_seconds"]
    assert kept(rec) == ["pip_install PyYAML"]
    # the replay rebuilt from the compiled Dockerfile without cache, and the repair is in it
    replay = [b for b in engine.builds if b["no_cache"]]
    assert len(replay) == 1 and '"PyYAML"' in replay[0]["text"]
    assert rec.replay["ok"] and rec.tests.count("passed") == 3
    assert engine.sessions_open == 0
    actions = [s.action for s in rec.trajectory.steps]
    assert actions.index("snapshot") < actions.index("keep") < actions.index("replay")


def test_knowledge_candidate_first_worse_candidate_rolled_back(tmp_path):
    # the experience base offers the wrong distribution first: `jwt` shadows the module and the
    # error becomes "cannot import name" — worse; rollback, then PyJWT fixes it.
    world = World([Need("pip:PyJWT", MISSING_JWT, shadow={"pip:jwt": SHADOWED_JWT})])
    retriever = FakeRetriever(
        [
            {
                "id": "u-jwt-wrong",
                "signal": r"No module named '(jwt)'",
                "atoms": [{"kind": "pip_install", "packages": ["{match:1}"]}],
            },
        ]
    )
    rec, engine = run(tmp_path, world, retriever)
    assert rec.status == "success", rec.remaining
    assert kept(rec) == ["pip_install PyJWT"]
    rollbacks = [s for s in rec.trajectory.steps if s.action == "rollback"]
    assert rollbacks and rollbacks[0].outcome == "worse"
    assert ("u-jwt-wrong", "failure") in retriever.outcomes
    assert "jwt" not in " ".join(b["text"] for b in engine.builds if b["no_cache"]).replace("PyJWT", "")


def test_build_time_failure_repaired_by_rebuild(tmp_path):
    world = World(
        [Need("apt:libyaml-dev", "src/ext.c:1:10: fatal error: yaml.h: No such file or directory", stage="build")]
    )
    rec, engine = run(tmp_path, world)
    assert rec.status == "success", rec.remaining
    assert kept(rec) == ["apt_install libyaml-dev gcc libc6-dev"]
    assert engine.builds[0]["no_cache"] is False and engine.builds[-1]["no_cache"] is True


def test_python_floor_switches_base_image(tmp_path):
    world = World(
        [Need("python:3.13", "ERROR: Package 'x' requires a different Python: 3.11.2 not in '>=3.12'", stage="build")]
    )
    rec, engine = run(tmp_path, world)
    assert rec.status == "success", rec.remaining
    assert kept(rec) == ["switch_python version=3.13"]
    assert engine.builds[-1]["text"].startswith("FROM python:3.13-slim")


def test_env_var_value_never_comes_from_a_file(tmp_path):
    # .env.example may be a link to a host file or written by an earlier CI step: its value is
    # not turned into a set_env (issue 15); the placeholder is tried instead
    (tmp_path / ".env.example").write_text("APP_SETTINGS=app.settings.testing\n")
    out = (
        "    X = os.environ['APP_SETTINGS']\n  File \"<frozen os>\", line 714, in __getitem__\nKeyError: 'APP_SETTINGS'"
    )
    rec, _ = run(tmp_path, World([Need("env:APP_SETTINGS", out)]))
    assert rec.status == "success", rec.remaining
    assert kept(rec) == ["set_env APP_SETTINGS=test"]


def test_unclassified_failure_stops_and_reports_precisely(tmp_path):
    rec, _ = run(tmp_path, World([Need("pip:never", "Segmentation fault (core dumped) in _frobnicate")]))
    assert rec.status == "unresolved"
    assert rec.unresolved[0]["kind"] == "unclassified"
    assert "Segmentation fault" in rec.unresolved[0]["message"]
    assert "no classified cause" in rec.remaining


def test_repository_assertion_failures_are_not_repaired(tmp_path):
    world = World(
        [Need("pip:never", "E       assert 2 == 3\nFAILED tests/test_x.py::test_0 - assert 2 == 3", stage="test")]
    )
    rec, _ = run(tmp_path, world)
    # the environment is right; the failure is the repository's own
    assert rec.status == "success"
    assert rec.repairs == []
    assert rec.tests.count("error") == 1


def test_step_budget_ends_with_what_remains(tmp_path):
    world = World([Need("pip:PyYAML", MISSING_YAML)])
    rec, _ = run(tmp_path, world, max_steps=1)
    assert rec.status == "over_budget"
    assert "step budget" in rec.remaining and "missing_module" in rec.remaining


def test_sub_path_abandoned_by_multi_frame_rollback(tmp_path):
    # candidate A for `foo` (pip install foo-a) fixes foo but uncovers `bar`, which nothing can fix;
    # the loop must roll back both frames and take candidate B (foo-b), after which bar never shows.
    world = World(
        [
            Need(
                "pip:foo-b",
                "E   ModuleNotFoundError: No module named 'foo'",
                shadow={"pip:foo-a": "E   ModuleNotFoundError: No module named 'barx'"},
            ),
        ]
    )
    retriever = FakeRetriever(
        [
            {"id": "u-a", "signal": r"named 'foo'", "atoms": [{"kind": "pip_install", "packages": ["foo-a"]}]},
            {"id": "u-b", "signal": r"named 'foo'", "atoms": [{"kind": "pip_install", "packages": ["foo-b"]}]},
        ]
    )
    rec, _ = run(tmp_path, world, retriever, broken={"barx"})
    assert rec.status == "success", rec.remaining
    assert kept(rec) == ["pip_install foo-b"]
    assert any(s.action == "rollback" and s.outcome == "abandoned" for s in rec.trajectory.steps)


def test_replay_failure_goes_back_into_the_loop(tmp_path):
    """A repair kept in the working container that the graph does not carry (here the first
    apply_atom is lost, as a compile that forgot one would lose it) is caught by the clean
    replay. The replay failure is new evidence: the repair leaves the record, is offered once
    more against the graph, and the second replay proves it, so the run succeeds with a
    Dockerfile that installs it."""
    world = World([Need("pip:PyYAML", MISSING_YAML)])
    engine = FakeEngine(world)
    plan_maker = fake_plan_maker()

    def make_plan(repo, s, avail):
        plan = plan_maker(repo, s, avail)
        real_apply = plan.graph.apply_atom
        calls = {"n": 0}

        def apply_once_forgetting(atom, evidence=None):
            calls["n"] += 1
            if calls["n"] == 1:
                return []  # the first kept repair is lost on the way into the graph
            return real_apply(atom, evidence)

        plan.graph.apply_atom = apply_once_forgetting
        return plan

    rec = run_setup(
        tmp_path,
        settings(tmp_path),
        engine,
        None,
        None,
        make_plan=make_plan,
        compile_dockerfile=fake_compile,
        available_pythons=["3.11"],
    )
    replays = [s.outcome for s in rec.trajectory.steps if s.action == "replay-result"]
    assert replays == ["failed", "ok"]
    assert rec.status == "success", rec.remaining
    # the repair is listed once: the one the graph (and so the Dockerfile) carries
    assert kept(rec) == ["pip_install PyYAML"]
    assert '"packages": ["PyYAML"]' in rec.dockerfile
    assert any("clean replay still shows" in w for w in rec.warnings)


def test_a_repair_the_replay_disproves_twice_is_not_offered_a_third_time(tmp_path):
    """A graph that never carries the repair: it is offered again once, then the run ends
    unresolved instead of replaying forever."""
    world = World([Need("pip:PyYAML", MISSING_YAML)])
    engine = FakeEngine(world)
    plan_maker = fake_plan_maker()

    def make_plan(repo, s, avail):
        plan = plan_maker(repo, s, avail)
        plan.graph.apply_atom = lambda atom, evidence=None: []  # nothing reaches the graph
        return plan

    rec = run_setup(
        tmp_path,
        settings(tmp_path),
        engine,
        None,
        None,
        make_plan=make_plan,
        compile_dockerfile=fake_compile,
        available_pythons=["3.11"],
    )
    replays = [s.outcome for s in rec.trajectory.steps if s.action == "replay-result"]
    assert replays == ["failed", "failed"]
    assert rec.status == "unresolved"
    assert "yaml" in rec.remaining


def test_compare_rules():
    sig = Signature("missing_module", "installation", "jwt", "")
    before = TargetOutcome("collect", [sig], collect_exit=2)
    shadow = TargetOutcome("collect", [Signature("import_name_error", "installation", "jwt", "")], collect_exit=2)
    nextmod = TargetOutcome("collect", [Signature("missing_module", "installation", "other", "")], collect_exit=2)
    done = TargetOutcome("done", [], collect_exit=0, test_exit=0)
    assert compare(before, shadow, sig) == "worse"
    assert compare(before, nextmod, sig) == "improved"
    assert compare(before, done, sig) == "improved"
    assert compare(before, before, sig) == "unchanged"
    assert compare(before, TargetOutcome("build", []), sig) == "worse"


def test_run_records_written(tmp_path):
    from bot.pipeline import PipelineResult, write_run_records

    rec, _ = run(tmp_path, World([Need("pip:PyYAML", MISSING_YAML)]))
    paths = write_run_records(tmp_path, PipelineResult(repo=tmp_path, run_record=rec))
    names = sorted(p.name for p in paths)
    assert names == ["run.json", "trajectory.jsonl"]
    run_json = json.loads((tmp_path / ".setupbot" / "run.json").read_text())
    assert run_json["status"] == "success" and run_json["repairs"][0]["repair"]["atoms"][0]["kind"] == "pip_install"
    lines = (tmp_path / ".setupbot" / "trajectory.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert set(first) >= {"action", "command", "exit_code", "output_tail", "duration", "snapshot", "outcome"}


def test_unrepairable_failure_after_collection_replays_and_reports_what_remains(tmp_path):
    out = (
        "E   ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 9999): Connection refused port 9999"
    )
    rec, engine = run(tmp_path, World([Need("service:custom", out, stage="test")]))
    assert rec.status == "success" and rec.replay["ok"]
    assert rec.unresolved and rec.unresolved[0]["kind"] == "connection_refused"
    assert "9999" in rec.remaining
    assert sum(b["no_cache"] for b in engine.builds) == 1


DRIFTED = """\
_________ ERROR collecting tests/integrations/test_stream.py _________
tests/integrations/test_stream.py:10: in <module>
    from app.integrations.stream import Broker
src/app/integrations/stream.py:15: in <module>
    from streamlib.broker.message import StreamMessage
E   ModuleNotFoundError: No module named 'streamlib.broker'
!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!
"""


def _era_world(monkeypatch, era_pins):
    """The era resolution answers as uv would for the reference date (no network)."""
    import bot.graph.era as era_mod
    import bot.loop.era as loop_era
    from bot.graph.resolve import Resolution

    calls = []

    def fake_resolve(requirements, python, date, source="", **kw):
        calls.append((tuple(requirements), python, date))
        return era_mod.Era(date=date, source=source, python=python, resolution=Resolution(True, dict(era_pins)))

    def fake_alone(requirements, python, **kw):
        # one distribution's own release of the date (Era.release_of): the set's pin here
        assert kw.get("no_deps") and kw.get("exclude_newer")
        return Resolution(True, {r: era_pins[r] for r in requirements if r in era_pins})

    monkeypatch.setattr(era_mod, "resolve_era", fake_resolve)
    monkeypatch.setattr(loop_era, "resolve_era", fake_resolve)  # the loop's era trial calls it
    monkeypatch.setattr(era_mod, "uv_compile", fake_alone)
    return calls


def test_newer_release_pinned_to_the_repositorys_era(tmp_path, monkeypatch):
    """A submodule the installed release removed: installing the distribution again changes
    nothing; the release current at the commit date brings the module back and is kept."""
    calls = _era_world(monkeypatch, {"streamlib": "0.5.33", "six": "1.16.0"})
    world = World([Need("pip:streamlib==0.5.33", DRIFTED)])
    engine = FakeEngine(world)
    s = load_settings(tmp_path, environ={}, overrides={"target": {"as_of": "2024-12-06T15:56:26+01:00"}})
    rec = run_setup(
        tmp_path,
        s,
        engine,
        None,
        None,
        make_plan=fake_plan_maker(pins={"streamlib": "0.6.2", "six": "1.16.0"}),
        compile_dockerfile=fake_compile,
        available_pythons=["3.11", "3.13"],
    )
    assert rec.status == "success", rec.remaining
    assert kept(rec) == ["pip_constraint streamlib==0.5.33"]
    assert "2024-12-06" in rec.repairs[0].candidate.why and "0.6.2" in rec.repairs[0].candidate.why
    # one era resolution for the run, at the normalised reference date
    assert len(calls) == 1 and calls[0][2] == "2024-12-06T14:56:26Z"
    replay = [b for b in engine.builds if b["no_cache"]]
    assert replay and "streamlib==0.5.33" in replay[-1]["text"]


NEWER_DJANGO = """\
Traceback (most recent call last):
  File "/workspace/tests/tasks.py", line 8, in <module>
    @task()
  File "/workspace/django_tasks/task.py", line 311, in wrapper
    return tasks[backend].task_class(
TypeError: Task.__init__() got an unexpected keyword argument 'enqueue_on_commit'
Found 5 test(s).
"""


def test_a_call_a_dependency_no_longer_takes_gets_the_era_set_before_other_generic_strategies(tmp_path, monkeypatch):
    """django-tasks at its 2025 commit: the newest Django ships its own django.tasks, whose Task
    takes other arguments, and the suite dies at start-up with a TypeError no rule classifies.
    A call a dependency no longer takes is drift: the releases current at the commit's date are
    tried first, once, before the CI's installs and leaving out the plan's guesses, and kept
    because the tests then run."""
    calls = _era_world(monkeypatch, {"django": "5.1.4", "six": "1.16.0"})
    # the CI installs one more thing by name: a generic strategy that would be tried first
    ci = tmp_path / ".github" / "workflows"
    ci.mkdir(parents=True)
    ci.joinpath("ci.yml").write_text(
        "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n      - run: pip install build\n"
    )
    engine = FakeEngine(World([Need("pip:django==5.1.4", NEWER_DJANGO)]))
    s = load_settings(tmp_path, environ={}, overrides={"target": {"as_of": "2025-01-10"}})
    rec = run_setup(
        tmp_path,
        s,
        engine,
        None,
        None,
        make_plan=fake_plan_maker(pins={"django": "6.0.1", "six": "1.16.0"}),
        compile_dockerfile=fake_compile,
        available_pythons=["3.11", "3.13"],
    )
    assert rec.status == "success", (rec.remaining, rec.warnings)
    assert kept(rec) == ["pip_constraint django==5.1.4"]
    said = [w for w in rec.warnings if "the releases current at the repository's date" in w]
    assert said and said[0].endswith("kept"), rec.warnings
    assert [s["strategy"] for s in rec.strategies] == ["the releases current at the repository's date"]
    assert len(calls) == 1
    replay = [b for b in engine.builds if b["no_cache"]]
    assert replay and "django==5.1.4" in replay[-1]["text"]
    # without a reference date there is no era set to try, and the run says what remains
    (tmp_path / "nodate").mkdir()
    rec, _ = run(tmp_path / "nodate", World([Need("pip:django==5.1.4", NEWER_DJANGO)]))
    assert rec.status == "unresolved" and "enqueue_on_commit" in rec.remaining


def test_no_reference_date_no_era_repair(tmp_path, monkeypatch):
    calls = _era_world(monkeypatch, {"streamlib": "0.5.33"})
    rec, _ = run(tmp_path, World([Need("pip:streamlib==0.5.33", DRIFTED)]))
    assert rec.status == "unresolved"
    assert calls == [] and not any("pip_constraint" in k for k in kept(rec))


def test_a_suite_that_outlives_the_command_timeout_still_replays(tmp_path):
    """Collection passed and the partial output shows no setup failure: the environment is
    proven as far as it can be, the run replays, and the record says the tests timed out."""
    rec, engine = run(tmp_path, World([Need("pip:PyYAML", MISSING_YAML)], test_times_out=True))
    assert rec.status == "success", rec.remaining
    assert kept(rec) == ["pip_install PyYAML"]
    assert rec.replay["ok"] and rec.replay["collect_exit"] == 0
    assert "timed out" in rec.replay["note"] and "unknown" in rec.replay["note"]


def test_a_test_run_killed_by_a_signal_after_collection_replays_without_generic_strategies(tmp_path):
    """econ-ark/hark's after-run: 236 tests collected, then the test run ended with exit 137 (a
    SIGKILL, as a memory limit sends) and nothing classified; the loop tried two generic
    strategies (two builds, 8 minutes) and ended unresolved. No install changes a killed run:
    it counts as ran, replays, and the record says what killed it."""
    rec, _ = run(tmp_path, World([Need("pip:PyYAML", MISSING_YAML)], test_killed=137))
    assert rec.status == "success", rec.remaining
    assert kept(rec) == ["pip_install PyYAML"] and rec.strategies == []
    assert rec.replay["ok"] and "killed by SIGKILL (exit 137; a memory limit does that)" in rec.replay["note"]
    # a setup failure in the killed run's output is still repaired first
    world = World([Need("pip:PyYAML", MISSING_YAML, stage="test")], test_killed=139)
    rec, _ = run(tmp_path / "segv", world)
    assert kept(rec) == ["pip_install PyYAML"] and rec.status == "success"


def test_a_timed_out_run_with_a_setup_failure_is_still_repaired(tmp_path):
    world = World([Need("pip:PyYAML", MISSING_YAML, stage="test")], test_times_out=True)
    rec, _ = run(tmp_path, world)
    assert kept(rec) == ["pip_install PyYAML"] and rec.status == "success"


def test_a_repair_whose_apt_package_does_not_exist_is_worse():
    from bot.loop.diagnose import diagnose

    before = TargetOutcome("build", diagnose('../meson.build:31:12: ERROR: Dependency "girepository-2.0" not found'))
    # the trial's build stops at apt, before the pip step that showed the failure
    after = TargetOutcome("build", diagnose("E: Unable to locate package libgirepository-2.0-dev"))
    assert compare(before, after, before.signatures[0]) == "worse"


def test_the_whole_era_set_leaves_the_build_tools_alone(tmp_path, monkeypatch):
    """PIP_CONSTRAINT also binds isolated builds: an era pin of packaging or setuptools would break
    an sdist whose build needs a newer one, so the whole-era candidate leaves them out."""
    from bot.loop.orchestrator import SetupLoop

    _era_world(monkeypatch, {"cryptography": "42.0.7", "packaging": "24.0", "setuptools": "69.5.1", "six": "1.16.0"})
    s = load_settings(tmp_path, environ={}, overrides={"target": {"as_of": "2024-05-21"}})
    loop = SetupLoop(tmp_path, s, FakeEngine(World([])), available_pythons=["3.11"])
    loop.plan = FakePlan(
        FakeGraph(
            "3.11",
            meta={
                "resolution": {
                    "pins": {"cryptography": "46.0.1", "packaging": "25.0", "setuptools": "80.9.0", "six": "1.16.0"}
                }
            },
        )
    )
    cands = loop.era_candidates(Signature("collection_error", "version", "", "E   OSError: Failed to load key"))
    assert [c.describe() for c in cands] == ["pip_constraint cryptography==42.0.7"]
    # the one distribution a signature names is pinned even when it is a build tool
    named = loop.era_candidates(Signature("module_attribute", "installation", "packaging", "AttributeError"))
    assert named[0].describe() == "pip_constraint packaging==24.0"


def test_coloured_build_output_is_diagnosed():
    from bot.loop.diagnose import diagnose

    log = "\x1b[91mE\x1b[0m\x1b[91m: \x1b[0m\x1b[91mUnable to locate package libgirepository-2.0-dev\x1b[0m\n"
    assert [(s.kind, s.key) for s in diagnose(log)] == [("unknown_apt_package", "libgirepository-2.0-dev")]


UNITTEST_FAILED = (
    "......E..F\n======================================================================\n"
    "ERROR: test_x (app.tests.T.test_x)\nTypeError: expected string\n"
    "----------------------------------------------------------------------\n"
    "Ran 10 tests in 0.812s\n\nFAILED (failures=1, errors=1)\nDestroying test database for alias 'default'...\n"
)


def _run_runner(tmp_path, engine, s):
    """A run whose test command is the repository's own runner (settings ``s`` name it)."""
    return run_setup(
        tmp_path,
        s,
        engine,
        None,
        None,
        make_plan=fake_plan_maker(),
        compile_dockerfile=fake_compile,
        available_pythons=["3.11"],
    )


def _runner_settings(tmp_path):
    return load_settings(tmp_path, environ={}, overrides={"target": {"test_command": ["python", "runtests.py"]}})


def test_a_unittest_runner_with_failing_tests_counts_as_ran(tmp_path):
    """Django's runner exits 1 when its own tests fail: that is the repository's verdict, and the
    run replays instead of ending unresolved."""
    engine = FakeEngine(World([], runner=(1, UNITTEST_FAILED)))
    rec = _run_runner(tmp_path, engine, _runner_settings(tmp_path))
    assert rec.status == "success", rec.remaining
    assert rec.replay["ok"]


UNITTEST_VERBOSE = (
    "test_ok (tests.test_rules.TestRules.test_ok) ... ok\n"
    "test_bad (tests.test_rules.TestRules.test_bad) ... FAIL\n\n"
    "======================================================================\n"
    "FAIL: test_bad (tests.test_rules.TestRules.test_bad)\n"
    "----------------------------------------------------------------------\n"
    "AssertionError: 1 != 2\n\n"
    "----------------------------------------------------------------------\n"
    "Ran 2 tests in 0.010s\n\nFAILED (failures=1)\n"
)


def test_a_unittest_command_runs_verbose_and_its_tests_are_read_one_by_one(tmp_path):
    """`python -m unittest` writes no JUnit: the loop adds -v and reads each test's line, so the
    record holds per-test results as it does for pytest."""
    engine = FakeEngine(World([], runner=(1, UNITTEST_VERBOSE)))
    s = load_settings(
        tmp_path, environ={}, overrides={"target": {"test_command": ["python", "-m", "unittest", "discover", "tests"]}}
    )
    rec = _run_runner(tmp_path, engine, s)
    assert rec.status == "success", rec.remaining
    assert rec.tests.outcomes == {
        "tests.test_rules.TestRules::test_ok": "passed",
        "tests.test_rules.TestRules::test_bad": "failed",
    }
    assert (rec.replay["tests"]["passed"], rec.replay["tests"]["failed"]) == (1, 1)
    ran = [s.command for s in rec.trajectory.steps if s.action == "test"]
    assert ran and all(c == ["python", "-m", "unittest", "discover", "tests", "-v"] for c in ran), ran


def test_a_runner_that_never_started_is_not_ran(tmp_path):
    engine = FakeEngine(World([], runner=(1, "Traceback (most recent call last):\nRuntimeError: no settings\n")))
    rec = _run_runner(tmp_path, engine, _runner_settings(tmp_path))
    assert rec.status == "unresolved"


def test_the_base_image_is_resolved_once_and_its_digest_pins_the_compiled_from(tmp_path):
    """Before a build the loop makes the base image present through the engine's image source
    and records its digest (a registry image) or none (a stand-in) on the runtime node, which
    the compiler turns into `FROM python:3.13-slim@sha256:...`."""
    from bot.compile import compile_dockerfile
    from bot.compile.plan import make_plan
    from bot.engine.sources import ResolvedImage
    from bot.loop.orchestrator import SetupLoop

    digest = "sha256:" + "ef" * 32
    calls: list[str] = []

    class PullingEngine(FakeEngine):
        def resolve_image(self, image):
            calls.append(image)
            return ResolvedImage(image, "registry", digest)

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0"\nrequires-python = ">=3.12"\n')
    s = load_settings(tmp_path, environ={})
    loop = SetupLoop(tmp_path, s, PullingEngine(World([])), available_pythons=["3.13"])
    loop.plan = make_plan(tmp_path, s, available_pythons=["3.13"], resolve=False)
    loop._pin_base()
    loop._pin_base()
    assert calls == ["python:3.13-slim"]
    assert loop.graph.runtime.attrs["base_origin"] == "registry"
    assert f"FROM python:3.13-slim@{digest}" in compile_dockerfile(loop.graph).text


def _drift_run(tmp_path, monkeypatch, world, era_pins, as_of="2025-03-01", pins=None):
    calls = _era_world(monkeypatch, era_pins)
    engine = FakeEngine(world)
    overrides = {"target": {"as_of": as_of}} if as_of else {}
    s = load_settings(tmp_path, environ={}, overrides=overrides)
    rec = run_setup(
        tmp_path,
        s,
        engine,
        None,
        None,
        make_plan=fake_plan_maker(pins=pins or {"pygments": "2.21.0", "markdown": "3.8"}),
        compile_dockerfile=fake_compile,
        available_pythons=["3.11", "3.13"],
    )
    return rec, engine, calls


def test_lint_items_that_a_newer_linter_fails_get_the_linters_release_of_the_era(tmp_path, monkeypatch):
    """keyring at its 2024 commit: pytest-ruff's per-file items fail on rules today's ruff added.
    Only ruff's release of the era is tried (not the whole era set), and kept."""
    world = World(
        [],
        tests=6,
        assert_fails=("pip:ruff==0.6.9", 4),
        drift_item="ruff",
        drift_message="keyring/cli.py:1:1: I001 Import block is un-sorted or un-formatted",
    )
    era = {"pygments": "2.19.1", "markdown": "3.8", "ruff": "0.6.9"}
    pins = {"pygments": "2.21.0", "markdown": "3.8", "ruff": "0.14.0"}
    rec, engine, _ = _drift_run(tmp_path, monkeypatch, world, era, pins=pins)
    assert rec.status == "success", rec.remaining
    assert kept(rec) == ["pip_constraint ruff==0.6.9"]
    sig = rec.repairs[0].signature
    assert sig.kind == "assertion_drift" and "4 of 4 failing tests fail on the rules of ruff" in sig.message
    assert "pkg.mod_1::ruff" in sig.message
    assert rec.replay["tests"]["failed"] == 0
    assert not any("pygments==2.19.1" in b["text"] for b in engine.builds)


def test_lint_failures_name_their_linter():
    from bot.junit import TestResults
    from bot.loop.diagnose import lint_failures

    results = TestResults(
        {
            "keyring.cli::ruff": "failed",
            "keyring.cli::ruff::format": "failed",
            "pkg.mod::mypy": "failed",
            "pkg.mod::flake-8::FLAKE8": "failed",
            "tests.test_ruff::test_ruff_rules": "failed",  # a test about ruff, not a lint item
            "pkg.ok::black": "passed",
        }
    )
    assert lint_failures(results) == {
        "keyring.cli::ruff": "ruff",
        "keyring.cli::ruff::format": "ruff",
        "pkg.mod::mypy": "mypy",
        "pkg.mod::flake-8::FLAKE8": "flake8",
    }


def test_assertion_failures_that_a_newer_release_caused_get_the_era_set(tmp_path, monkeypatch):
    """Most tests fail on their own assertions (a renderer's markup changed in a newer Pygments):
    the releases current at the reference date are tried once, kept because more tests pass and
    fewer fail, and the replay builds them in."""
    world = World([], tests=6, assert_fails=("pip:pygments==2.19.1", 4))
    rec, engine, calls = _drift_run(tmp_path, monkeypatch, world, {"pygments": "2.19.1", "markdown": "3.8"})
    assert rec.status == "success", rec.remaining
    assert kept(rec) == ["pip_constraint pygments==2.19.1"]
    assert (
        rec.repairs[0].signature.kind == "assertion_drift"
        and "4 of 4 failing tests" in rec.repairs[0].signature.message
    )
    why = rec.repairs[0].candidate.why
    assert why.startswith("4 of 4 failing tests fail on an assertion (first: tests.test_x::test_1); ")
    replay = [b for b in engine.builds if b["no_cache"]]
    assert replay and "pygments==2.19.1" in replay[-1]["text"]
    assert rec.replay["tests"]["failed"] == 0 and rec.replay["tests"]["passed"] == 6
    assert len(calls) == 1


def test_an_era_set_that_does_not_fix_the_assertions_is_taken_back_and_tried_once(tmp_path, monkeypatch):
    """The failing assertions are the project's own (the era set changes nothing): the trial is
    rolled back, the run still ends in a replayed success with the failures, and no second trial."""
    world = World([], tests=6, assert_fails=("pip:something-else==1", 3))
    rec, engine, _ = _drift_run(tmp_path, monkeypatch, world, {"pygments": "2.19.1", "markdown": "3.8"})
    assert rec.status == "success", rec.remaining
    assert kept(rec) == []
    trials = [s for s in rec.trajectory.steps if s.action in ("keep", "rollback")]
    assert [s.action for s in trials] == ["rollback"] and trials[0].outcome == "unchanged"
    assert rec.replay["tests"]["failed"] == 3
    assert not any("pygments" in b["text"] for b in engine.builds if b["no_cache"])


def test_an_era_set_the_clean_replay_contradicts_is_left_out_and_replayed_again(tmp_path, monkeypatch):
    """The era set made every test pass in the working container, but the clean build of it
    passes fewer tests than the state before it did (1 against 2): the run does not publish the
    worse environment. The era set leaves the graph, a second replay proves the state before
    it, and the report says why."""
    world = World([], tests=6, assert_fails=("pip:pygments==2.19.1", 4), clean_breaks=("pip:pygments==2.19.1", 5))
    rec, engine, _ = _drift_run(tmp_path, monkeypatch, world, {"pygments": "2.19.1", "markdown": "3.8"})
    assert rec.status == "success", rec.remaining
    assert kept(rec) == []
    replays = [b for b in engine.builds if b["no_cache"]]
    assert len(replays) == 2
    assert "pygments==2.19.1" in replays[0]["text"] and "pygments==2.19.1" not in replays[1]["text"]
    assert (rec.replay["tests"]["passed"], rec.replay["tests"]["failed"]) == (2, 4)
    assert "pygments" not in rec.dockerfile
    said = [w for w in rec.warnings if "clean replay passed 1 (5 failed) against 2 before it" in w]
    assert said and "left out of the Dockerfile" in said[0], rec.warnings
    disproved = [s for s in rec.trajectory.steps if s.action == "rollback" and s.outcome == "replay-disproved"]
    assert len(disproved) == 1


def test_an_era_set_the_clean_replay_confirms_stays(tmp_path, monkeypatch):
    """The clean build passes fewer than the working container (5 of 6) but more than before the
    era set (2): the repair stays, with one replay."""
    world = World([], tests=6, assert_fails=("pip:pygments==2.19.1", 4), clean_breaks=("pip:pygments==2.19.1", 1))
    rec, engine, _ = _drift_run(tmp_path, monkeypatch, world, {"pygments": "2.19.1", "markdown": "3.8"})
    assert rec.status == "success", rec.remaining
    assert kept(rec) == ["pip_constraint pygments==2.19.1"]
    assert len([b for b in engine.builds if b["no_cache"]]) == 1
    assert (rec.replay["tests"]["passed"], rec.replay["tests"]["failed"]) == (5, 1)


def test_tests_that_call_what_a_newer_release_dropped_get_the_era_set(tmp_path, monkeypatch):
    """The tests fail on a call the dependency no longer takes (click 8.2 dropped CliRunner's
    mix_stderr): the era set is tried once, kept because the tests pass with it."""
    world = World(
        [],
        tests=4,
        assert_fails=("pip:click==8.1.7", 3),
        drift_message="TypeError: CliRunner.__init__() got an unexpected keyword argument 'mix_stderr'",
    )
    rec, engine, _ = _drift_run(tmp_path, monkeypatch, world, {"click": "8.1.7"})
    assert rec.status == "success", rec.remaining
    assert kept(rec) == ["pip_constraint click==8.1.7"]
    assert "3 of 3 failing tests fail on a call the dependency no longer takes" in rec.repairs[0].signature.message
    assert (rec.replay["tests"]["passed"], rec.replay["tests"]["failed"]) == (4, 0)


def test_which_failures_are_calls_a_dependency_no_longer_takes():
    from bot.junit import TestResults
    from bot.loop.diagnose import api_drift_failures

    results = TestResults(
        {f"t::{k}": "failed" for k in "abcdef"},
        {
            "t::a": "TypeError: CliRunner.__init__() got an unexpected keyword argument 'mix_stderr'",
            "t::b": "AttributeError: module 'numpy' has no attribute 'float'",
            "t::c": "ImportError: cannot import name 'soft_unicode' from 'markupsafe'",
            "t::d": "TypeError: unsupported operand type(s) for +: 'int' and 'str'",  # the code's own bug
            "t::e": "AttributeError: 'NoneType' object has no attribute 'x'",
            "t::f": "TypeError: f() takes 1 positional argument but 2 were given",
        },
    )
    assert api_drift_failures(results) == ["t::a", "t::b", "t::c", "t::f"]


def test_no_era_trial_without_a_reference_date_or_when_failures_are_not_assertions(tmp_path, monkeypatch):
    world = World([], tests=6, assert_fails=("pip:pygments==2.19.1", 4))
    rec, _, calls = _drift_run(tmp_path, monkeypatch, world, {"pygments": "2.19.1"}, as_of=None)
    assert rec.status == "success" and kept(rec) == [] and calls == []
    # an exception the code raised is not an assertion the test made
    from bot.junit import TestResults
    from bot.loop.diagnose import assertion_failures

    results = TestResults(
        {"t::a": "failed", "t::b": "failed", "t::c": "error", "t::d": "failed"},
        {
            "t::a": "AssertionError: assert '<b>' == '<strong>'",
            "t::b": "KeyError: 'name'\nTraceback ...",
            "t::c": "AssertionError in fixture setup",
            "t::d": "def test_d():\n>       assert render(x) == expected\nE       assert 1 == 2",
        },
    )
    assert assertion_failures(results) == ["t::a", "t::d"]


def test_the_era_set_for_assertions_is_kept_only_when_it_helps():
    from bot.junit import TestResults
    from bot.loop.diagnose import Signature

    sig = Signature("assertion_drift", "test", "", "4 of 4 failing tests fail on an assertion")

    def outcome(passed, failed):
        outcomes = {f"t::p{i}": "passed" for i in range(passed)} | {f"t::f{i}": "failed" for i in range(failed)}
        return TargetOutcome("done", [], results=TestResults(outcomes))

    assert compare(outcome(2, 4), outcome(6, 0), sig) == "improved"
    assert compare(outcome(2, 4), outcome(4, 2), sig) == "improved"  # fewer failures is progress
    assert compare(outcome(2, 4), outcome(2, 4), sig) == "unchanged"
    assert compare(outcome(2, 4), outcome(1, 2), sig) == "worse"  # fewer pass: something broke


MISMATCH = (
    "import file mismatch:\n"
    "imported module 'test_a' has this __file__ attribute:\n  /workspace/tests/one/test_a.py\n"
    "which is not the same as the test file we want to collect:\n  /workspace/tests/two/test_a.py"
)
MISSING_NUMBA = "E   ModuleNotFoundError: No module named 'numba'"


def test_a_trial_that_fixes_another_failure_of_the_run_is_kept_for_that_failure(tmp_path):
    # xhluca/bm25s: one collection shows two failures. The experience base, asked about the
    # first (duplicate test basenames), also offers the module missing beside it; installing it
    # leaves the first but fixes the second. That is progress: kept, and attributed to the
    # failure it fixed, not tried again for it and not refused as "failed in this state".
    world = World([Need("env:PYTEST_ADDOPTS", MISMATCH), Need("pip:numba", MISSING_NUMBA)], together=True)
    retriever = FakeRetriever(
        [
            {
                "id": "u-missing",
                "signal": r"No module named '(numba)'",
                "atoms": [{"kind": "pip_install", "packages": ["{match:1}"]}],
            },
            {
                "id": "u-mismatch",
                "signal": r"import file mismatch",
                "atoms": [{"kind": "set_env", "name": "PYTEST_ADDOPTS", "value": "--import-mode=importlib"}],
            },
        ]
    )
    rec, _ = run(tmp_path, world, retriever)
    assert rec.status == "success", rec.remaining
    assert sorted(kept(rec)) == ["pip_install numba", "set_env PYTEST_ADDOPTS=--import-mode=importlib"]
    numba = next(r for r in rec.repairs if r.candidate.describe() == "pip_install numba")
    assert numba.signature.kind == "missing_module" and numba.signature.key == "numba"
    assert [s.outcome for s in rec.trajectory.steps if s.action == "rollback"] == []


def test_compare_counts_another_failure_fixed_as_progress():
    from bot.loop.target import fixed

    mismatch = Signature("import_path_mismatch", "verification", "", "import file mismatch:")
    numba = Signature("missing_module", "installation", "numba", "")
    before = TargetOutcome("collect", [mismatch, numba], collect_exit=2)
    other_gone = TargetOutcome("collect", [mismatch], collect_exit=2)
    assert compare(before, other_gone, mismatch) == "improved"
    assert fixed(before, other_gone, mismatch) == numba
    assert fixed(before, TargetOutcome("collect", [numba], collect_exit=2), mismatch) == mismatch
    assert compare(before, before, mismatch) == "unchanged"
    # the other failure went but a new one came: worse, as before
    new = TargetOutcome("collect", [mismatch, Signature("missing_module", "installation", "llvmlite", "")])
    assert compare(before, new, mismatch) == "worse"


def test_a_repair_that_fixed_another_failure_cites_that_failure_in_the_dockerfile():
    """The Dockerfile's comment above a repair names the failure it fixed: a repair trialled
    against the duplicate-basename failure that fixed the missing module says "missing module
    numba", not the failure it was offered for."""
    from types import SimpleNamespace

    from bot.atoms import Atom
    from bot.compile.dockerfile import _where
    from bot.graph.model import DepGraph
    from bot.loop.diagnose import Signature
    from bot.loop.repair import Candidate
    from bot.loop.trials import TrialsMixin

    class Host(TrialsMixin):
        def __init__(self) -> None:
            self.plan = SimpleNamespace(graph=DepGraph())

    host = Host()
    mismatch = Signature("import_file_mismatch", "collection", "test_a", "import file mismatch")
    numba = Signature("missing_module", "import", "numba", "No module named 'numba'")
    cand = Candidate([Atom("pip_install", {"packages": ["numba"]})], "knowledge", why="the module's distribution")
    host._apply_to_graph(cand, mismatch)
    node = host.graph.nodes["package:numba"]
    assert any("import_file_mismatch" in d for _, _, d in node.evidence)
    host._retell(cand, mismatch, numba)
    cited = _where([node])
    assert cited == [f"repair for {numba.describe()}: the module's distribution"], cited
    assert not any("import_file_mismatch" in d for _, _, d in node.evidence)


def test_tests_that_reach_a_host_outside_end_the_run_without_trials(tmp_path):
    # a module loads a model from a hub while it is collected; the sandbox has no network.
    # Nothing is tried for it (no era pins, no generic strategy): the record says why.
    outside = (
        "/usr/local/lib/python3.11/site-packages/requests/adapters.py:700: in send\n"
        "E   requests.exceptions.ConnectionError: HTTPSConnectionPool(host='models.example.org', port=443): "
        "Max retries exceeded with url: /tiny/config.json\n"
        "!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!"
    )
    rec, engine = run(tmp_path, World([Need("pip:never", outside)]))
    assert rec.status == "unresolved" and rec.repairs == [] and rec.strategies == []
    assert [u["kind"] for u in rec.unresolved] == ["external_network"]
    assert "collection reaches for a host outside (models.example.org)" in rec.remaining
    # the first build is the only one: no trial image was built
    assert len(engine.builds) == 1


@pytest.mark.parametrize(
    "log, kind, remaining",
    [
        # a dependency pinned to a git URL on a host the sandbox cannot resolve: installing the
        # dependencies only (the generic strategy for a failed project install) would fetch it too
        (
            "  fatal: unable to access 'https://git.example.org/someone/fork.git/': Could not resolve host: "
            "git.example.org\n  error: subprocess-exited-with-error\n"
            "The command '/bin/sh -c python -m pip install --no-cache-dir -e .' returned a non-zero code: 1",
            "external_network",
            "the build reaches for a host outside (git.example.org)",
        ),
        # a distribution's setup.py compiles CUDA extensions and the runner has no toolkit
        (
            '        File "<string>", line 74, in <module>\n'
            "      RuntimeError: CUDA_HOME or ROCM_HOME environment variable must be set to compile CUDA or HIP "
            "extensions.\nThe command '/bin/sh -c python -m pip install --no-cache-dir -r requirements.txt' "
            "returned a non-zero code: 1",
            "gpu_toolkit",
            "the build compiles CUDA or ROCm extensions",
        ),
        # FasterLivePortrait's after-run (9049bdc): pycuda's compiler finds no cuda.h; it ended as
        # a missing header and two generic strategies
        (
            "      In file included from src/cpp/cuda.cpp:4:\n"
            "      src/cpp/cuda.hpp:14:10: fatal error: cuda.h: No such file or directory\n"
            "         14 | #include <cuda.h>\n      compilation terminated.\n"
            "  ERROR: Failed building wheel for pycuda\n"
            "The command '/bin/sh -c python -m pip install --no-cache-dir -r requirements.txt' returned a non-zero code: 1",
            "gpu_toolkit",
            "the build compiles CUDA or ROCm extensions",
        ),
    ],
)
def test_a_build_stopped_by_what_no_environment_gives_ends_saying_so(tmp_path, log, kind, remaining):
    rec, engine = run(tmp_path, World([Need("pip:never", log, stage="build")]))
    assert rec.status == "unresolved" and rec.strategies == [] and len(engine.builds) == 1
    assert [u["kind"] for u in rec.unresolved] == [kind]
    assert rec.remaining.startswith(remaining), rec.remaining


def test_pytest_inside_a_shell_wrapper_is_read_from_its_junit_report(tmp_path):
    """`sh -c '... pytest'`: an option appended to the wrapper is the script's $0, so the loop asks
    pytest for the report through PYTEST_ADDOPTS, and reads each test as it does for pytest.
    Before, the run had no test results and ended Shallow."""
    engine = FakeEngine(World([], tests=4))
    command = ["sh", "-c", "make data && python -m pytest"]
    s = load_settings(tmp_path, environ={}, overrides={"target": {"test_command": command}})
    rec = _run_runner(tmp_path, engine, s)
    assert rec.status == "success", rec.remaining
    assert len(rec.tests.outcomes) == 4 and set(rec.tests.outcomes.values()) == {"passed"}
    assert rec.replay["tests"]["passed"] == 4
    ran = [s.command for s in rec.trajectory.steps if s.action == "test"]
    assert ran and all(c == command for c in ran), ran  # the wrapper runs as written
