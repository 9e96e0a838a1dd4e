"""The lock drafted before the clean replay (issue 16: one build proves the environment and its
lock). The loop freezes its working image, the replay builds the locked Dockerfile, and the lock
is kept only when that replay holds; otherwise the lock file and the graph go back and the
unlocked Dockerfile is replayed."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from bot.atoms import Atom
from bot.compile import compile_dockerfile
from bot.compile.plan import make_plan
from bot.config import load_settings
from bot.engine.results import BuildResult, ExecResult
from bot.errors import EngineError
from bot.graph.apply import apply_atom
from bot.graph.lock import LOCK_NAME, MARKER_LINE, LockEntry
from bot.graph.mapping import Registry
from bot.junit import TestResults
from bot.loop import lock as vlock
from bot.loop.orchestrator import SetupLoop
from bot.loop.records import Checkpoint, KeptRepair, RunRecord
from bot.loop.repair import Candidate
from bot.loop.target import TargetOutcome
from bot.loop.trajectory import Budget
from bot.loop.workspace import Workspace

REPOS = Path(__file__).parents[1] / "fixtures" / "repos"
H1 = "sha256:" + "a" * 64
WORK = "setupbot-loop-x:work-1"
REPLAY = "setupbot-loop-x:replay-2"
SET = '[["requests", "2.31.0", false], ["pip", "24.0", false]]'


class _Engine:
    """Freezes images from a table (what each image installed)."""

    def __init__(self, sets: dict[str, str]) -> None:
        self.sets = {"python:3.11-slim": '[["pip", "24.0", false]]', **sets}
        self.frozen: list[str] = []

    def run_once(self, image, argv, timeout=300, env=None, network="none"):
        if argv[0] == "dpkg-query":
            return ExecResult(list(argv), 0, "libpq-dev=15.8\n", 0.1)
        self.frozen.append(image)
        return ExecResult(list(argv), 0, "SETUPBOT-DISTS:" + self.sets[image], 0.1)

    def build(self, context, text, tag, no_cache=False, timeout=None):
        # the development stage, built once the run has succeeded (bot.loop.devstage)
        return BuildResult(True, tag, "", 0.1)


def _outcome(passed: int, stage: str = "done") -> TargetOutcome:
    results = TestResults({f"t::test_{i}": "passed" for i in range(passed)})
    return TargetOutcome(stage, results=results, junit=stage == "done", collect_exit=0 if stage == "done" else None)


@pytest.fixture
def loop(tmp_path, monkeypatch):
    monkeypatch.setattr(
        vlock, "fetch_hashes", lambda pins, py, **kw: ([LockEntry(n, v, [H1]) for n, v in sorted(pins.items())], [])
    )
    monkeypatch.setattr(vlock, "_compiled_pins", lambda *a, **k: None)  # no resolution here
    repo = tmp_path / "r"
    shutil.copytree(REPOS / "plan-ci-services", repo)
    settings = load_settings(repo, environ={})
    graph = make_plan(repo, settings, available_pythons=["3.11"], registry=Registry(enabled=False)).graph
    lp = SetupLoop.__new__(SetupLoop)
    lp.repo, lp.settings, lp.compile = repo, settings, compile_dockerfile
    lp.plan = SimpleNamespace(graph=graph)
    lp.record = RunRecord(repo="r", run_id="x")
    lp.traj = lp.record.trajectory
    lp.budget = Budget(max_steps=20, wall_clock=3600, command_timeout=300)
    lp._prelock, lp._prelocked, lp._prelock_refused, lp._planlock = None, None, "", None
    lp._final, lp._dev_build = False, None
    lp.replays = []  # (Dockerfile the replay built, its outcome)

    def replay_with(*outcomes):
        queue = list(outcomes)

        def replay():
            outcome = queue.pop(0)
            text = lp.compile(lp.graph).text
            lp.replays.append(text)
            tag = f"setupbot-loop-x:replay-{len(lp.replays) + 1}"
            lp.record.replay = {"ok": outcome.stage == "done", "tag": tag}
            ws = Workspace(tag, SimpleNamespace(text=text))
            ws.outcome = outcome
            return ws

        lp.replay = replay

    lp.replay_with = replay_with
    return lp


def _working(loop, passed: int = 3) -> Workspace:
    ws = Workspace(WORK, SimpleNamespace(text=loop.compile(loop.graph).text))
    ws.outcome = _outcome(passed)
    return ws


def test_the_replay_builds_the_lock_drafted_from_the_working_image(loop):
    loop.engine = _Engine({WORK: SET, REPLAY: SET})
    working = _working(loop)
    pending = loop._lock_first(working)
    assert pending is not None and WORK in loop.engine.frozen
    lock_file = loop.repo / ".devcontainer" / LOCK_NAME
    assert "requests==2.31.0" in lock_file.read_text()
    loop.replay_with(_outcome(3))
    ws = loop._hold_locked_replay(pending, loop.replay(), working)
    # one replay, of the locked Dockerfile: it is the build that proves the lock
    assert len(loop.replays) == 1
    assert "--require-hashes" in loop.replays[0] and "libpq-dev=15.8" in loop.replays[0]
    assert ws.tag == REPLAY and loop._prelocked is not None and loop._prelocked.status == "locked"
    loop._record_lock(loop._prelocked)
    assert loop.record.replay["lock"]["count"] == 1 and loop.record.lock_text == lock_file.read_text()
    assert loop.record.replay["tag"] == REPLAY
    assert "config:requirements-lock" in loop.graph.nodes


def _reruns(loop, *outcomes):
    """The replay container's tests, run again: each call gives the next outcome."""
    queue = list(outcomes)
    loop.evaluated = []

    def evaluate(ws, env=None):
        loop.evaluated.append(ws.tag)
        return queue.pop(0)

    loop.evaluate = evaluate


def _session_replays(loop):
    """Replays whose workspace has a live container (the rerun runs in it)."""
    plain = loop.replay

    def replay():
        ws = plain()
        ws.session = SimpleNamespace(depth=0)
        return ws

    loop.replay = replay


def test_a_locked_replay_that_passes_fewer_tests_is_not_locked_and_the_unlocked_one_is_replayed(loop):
    loop.engine = _Engine({WORK: SET, REPLAY: SET})
    working = _working(loop, passed=3)
    pending = loop._lock_first(working)
    loop.replay_with(_outcome(2), _outcome(3))
    _session_replays(loop)
    _reruns(loop, _outcome(2))  # one short again when run a second time: not a flaky test
    ws = loop._hold_locked_replay(pending, loop.replay(), working)
    assert loop.evaluated == [REPLAY]
    assert len(loop.replays) == 2
    assert "--require-hashes" in loop.replays[0] and "requirements.lock" not in loop.replays[1]
    assert ws.outcome.results.count("passed") == 3
    assert not (loop.repo / ".devcontainer" / LOCK_NAME).exists()
    assert "config:requirements-lock" not in loop.graph.nodes and loop._prelocked is None
    assert "passed 2 tests, against 3 in the working image (2 when they ran again)" in loop._prelock_refused


def test_a_locked_replay_a_test_short_that_passes_it_on_a_second_run_keeps_the_lock(loop):
    """django-tasks shuffles its suite: one locked replay passed 127 tests against 128."""
    loop.engine = _Engine({WORK: SET, REPLAY: SET})
    working = _working(loop, passed=128)
    pending = loop._lock_first(working)
    loop.replay_with(_outcome(127))
    _session_replays(loop)
    _reruns(loop, _outcome(128))
    ws = loop._hold_locked_replay(pending, loop.replay(), working)
    assert len(loop.replays) == 1 and ws.tag == REPLAY
    assert loop._prelocked is not None and loop._prelocked.status == "locked"
    assert loop.record.replay["rerun"] == {"first": 127, "second": 128, "working": 128}
    assert any("passed 127 tests, and 128 when they ran again" in w for w in loop.record.warnings)
    assert (loop.repo / ".devcontainer" / LOCK_NAME).exists()


@pytest.mark.parametrize(("working_passed", "replay_passed"), [(100, 90), (10, 7)])
def test_a_locked_replay_many_tests_short_is_not_run_again(loop, working_passed, replay_passed):
    loop.engine = _Engine({WORK: SET, REPLAY: SET})
    working = _working(loop, passed=working_passed)
    pending = loop._lock_first(working)
    loop.replay_with(_outcome(replay_passed), _outcome(working_passed))
    _session_replays(loop)
    _reruns(loop, _outcome(working_passed))
    loop._hold_locked_replay(pending, loop.replay(), working)
    assert loop.evaluated == [] and len(loop.replays) == 2 and loop._prelocked is None
    assert "when they ran again" not in loop._prelock_refused


def test_a_locked_image_that_does_not_build_leaves_the_lock_to_after_the_replay(loop):
    loop.engine = _Engine({WORK: SET})
    working = _working(loop)
    pending = loop._lock_first(working)
    loop.replay_with(_outcome(0, stage="build"), _outcome(3))
    loop._hold_locked_replay(pending, loop.replay(), working)
    assert len(loop.replays) == 2 and not (loop.repo / ".devcontainer" / LOCK_NAME).exists()
    # lock_replay then tries the lock again (without the builder stage, with the compiler)
    assert loop._prelock_refused == "" and loop._prelocked is None


def test_a_locked_replay_with_another_set_is_not_locked(loop):
    loop.engine = _Engine({WORK: SET, REPLAY: '[["requests", "2.32.0", false], ["pip", "24.0", false]]'})
    working = _working(loop)
    pending = loop._lock_first(working)
    loop.replay_with(_outcome(3), _outcome(3))
    loop._hold_locked_replay(pending, loop.replay(), working)
    assert "differs" in loop._prelock_refused and "2.32.0" in loop._prelock_refused
    assert not (loop.repo / ".devcontainer" / LOCK_NAME).exists() and len(loop.replays) == 2


def test_no_draft_when_the_working_image_is_not_the_graphs_own_build(loop):
    loop.engine = _Engine({WORK: SET})
    working = _working(loop)
    working.dockerfile = SimpleNamespace(text="FROM python:3.11-slim\n")  # a repair changed the graph since
    assert loop._lock_first(working) is None
    working = _working(loop, passed=0)  # nothing passed: nothing is proven to lock
    assert loop._lock_first(working) is None
    assert loop.engine.frozen == [] and not (loop.repo / ".devcontainer" / LOCK_NAME).exists()


def test_no_draft_over_a_hand_written_lock_or_with_the_lock_off(loop):
    loop.engine = _Engine({WORK: SET})
    (loop.repo / ".devcontainer").mkdir(exist_ok=True)
    (loop.repo / ".devcontainer" / LOCK_NAME).write_text("requests==2.0\n")
    assert loop._lock_first(_working(loop)) is None
    assert (loop.repo / ".devcontainer" / LOCK_NAME).read_text() == "requests==2.0\n"
    (loop.repo / ".devcontainer" / LOCK_NAME).unlink()
    loop.settings = load_settings(loop.repo, environ={}, overrides={"output": {"lock": False}})
    assert loop._lock_first(_working(loop)) is None


def test_what_one_replay_found_of_its_lock_does_not_stop_the_next_from_locking(loop, monkeypatch):
    """A replay that failed (the loop then works on) leaves no refusal behind: the next
    _finish locks again, here after its replay (its working image is not the graph's build)."""
    loop.engine = _Engine({WORK: SET})
    loop._prelock_refused = "an earlier replay passed fewer tests"
    monkeypatch.setattr(loop, "_disproved_by_counts", lambda outcome: None, raising=False)
    after = []
    monkeypatch.setattr(loop, "lock_replay", lambda: after.append(loop.record.replay["tag"]), raising=False)
    working = _working(loop)
    working.dockerfile = SimpleNamespace(text="FROM python:3.11-slim\n")
    loop.replay_with(_outcome(3))
    assert loop._finish(working=working) is None
    assert loop.record.status == "success" and after == [REPLAY]
    assert "lock" not in loop.record.replay and not any("not locked" in w for w in loop.record.warnings)


LOCKED = "setupbot-loop-x:locked"


def _first_image(loop, monkeypatch) -> Workspace:
    """The run's first image, built with no step from the cache, whose tests passed with no
    repair: the clean replay already (bot.loop.replay)."""
    monkeypatch.setattr(loop, "_disproved_by_counts", lambda outcome: None, raising=False)
    working = _working(loop)
    working.from_scratch, working.first = True, working.outcome
    loop.replay_with(_outcome(3))  # what a --no-cache replay would give, were it built
    return working


def test_a_first_image_built_from_scratch_is_the_replay_and_the_lock_is_proven_by_a_build(loop, monkeypatch):
    loop.engine = _Engine({WORK: SET, LOCKED: SET})
    working = _first_image(loop, monkeypatch)
    assert loop._finish(working=working) is None
    rec = loop.record
    assert rec.status == "success" and loop.replays == []  # no --no-cache rebuild, no second test run
    assert rec.replay["first_build"] is True and rec.replay["tests"]["passed"] == 3
    # the lock drafted from that image was built and installs the same set: kept
    assert rec.replay["lock"]["status"] == "locked" and rec.replay["tag"] == LOCKED
    assert "--require-hashes" in rec.lock_text or "requests==2.31.0" in rec.lock_text
    node = loop.graph.nodes["config:requirements-lock"]
    assert "the run's first image" in node.attrs["source"] and "tested by" not in node.attrs["source"]
    assert any("the run's first image" in d for _, _, d in node.evidence)


def test_a_lock_whose_build_installs_another_set_is_not_kept_after_a_first_image_replay(loop, monkeypatch):
    loop.engine = _Engine({WORK: SET, LOCKED: '[["requests", "2.32.0", false], ["pip", "24.0", false]]'})
    working = _first_image(loop, monkeypatch)
    assert loop._finish(working=working) is None
    rec = loop.record
    assert rec.status == "success" and loop.replays == [] and rec.replay["first_build"] is True
    assert rec.replay["tag"] == WORK and "config:requirements-lock" not in loop.graph.nodes
    assert not (loop.repo / ".devcontainer" / LOCK_NAME).exists()
    assert any("environment not locked" in w and "2.32.0" in w for w in rec.warnings), rec.warnings


@pytest.mark.parametrize("path", ["first-image", "replay"])
def test_an_engine_failure_in_the_locks_build_ends_the_run_and_puts_the_lock_back(loop, monkeypatch, path):
    """The locked Dockerfile's build (after a first-image replay) or the replay that builds it:
    an engine that fails there (connection reset) ends the run. That is no verdict on the lock,
    and the lock file drafted into the repository goes back with the graph."""

    class _Broken(_Engine):
        def build(self, context, text, tag, no_cache=False, timeout=None):
            raise EngineError("the engine failed: connection reset by peer", "Check that the engine is healthy.")

    loop.engine = _Broken({WORK: SET})
    working = _first_image(loop, monkeypatch)
    if path == "replay":  # a cached step: the --no-cache replay builds the locked Dockerfile
        working.from_scratch = False

        def replay():
            loop.replays.append(loop.compile(loop.graph).text)
            raise EngineError("the engine failed: connection reset by peer", "Check that the engine is healthy.")

        loop.replay = replay
    with pytest.raises(EngineError, match="connection reset"):
        loop._finish(working=working)
    assert "config:requirements-lock" not in loop.graph.nodes
    assert not (loop.repo / ".devcontainer" / LOCK_NAME).exists()
    assert loop._prelock is None and loop.record.status != "success"
    if path == "replay":
        assert "--require-hashes" in loop.replays[0]  # the fault hit the locked replay itself


def test_a_lock_that_leaves_the_compiler_out_goes_to_a_replay_that_runs_the_tests(loop, monkeypatch):
    """A test may compile (cffi, a C snippet): an image without the compiler is proven by
    running the tests in it, so the first image does not stand in for the replay then."""
    monkeypatch.setattr(vlock, "_compiled_pins", lambda *a, **k: [])  # every pin has a wheel
    loop.engine = _Engine({WORK: SET, REPLAY: SET})
    assert loop.graph.nodes["systemlib:build-essential"].action == "apt"
    working = _first_image(loop, monkeypatch)
    assert loop._finish(working=working) is None
    assert len(loop.replays) == 1 and "build-essential" not in loop.replays[0]
    assert "first_build" not in loop.record.replay and loop.record.replay["lock"]["status"] == "locked"


def _kept(loop, atom: Atom) -> None:
    """A repair the loop kept after the first test run: in the graph and the record."""
    apply_atom(loop.graph, atom, "a repair")
    loop.record.repairs.append(KeptRepair(None, Candidate([atom], "rule"), ""))


def test_an_image_with_a_cached_step_is_replayed_with_its_tests(loop, monkeypatch):
    """A step from the cache may be older than what the Dockerfile installs today: the replay
    rebuilds with --no-cache and runs the tests, and proves the lock with them."""
    loop.engine = _Engine({WORK: SET, REPLAY: SET})
    working = _first_image(loop, monkeypatch)
    working.from_scratch = False
    assert loop._finish(working=working) is None
    assert len(loop.replays) == 1 and "--require-hashes" in loop.replays[0]
    assert "first_build" not in loop.record.replay and loop.record.replay["tag"] == REPLAY
    assert loop.record.replay["lock"]["status"] == "locked"


# -- the lock resolved from the plan, which the first image installs ----------------------------


def _plan_locked(loop, pins: dict[str, str] | None = None) -> str:
    """The plan's resolution fixes the whole set (no compiler, a wheel for every pin): the lock
    is drafted from it before the first build. Returns the Dockerfile without it."""
    loop.graph.remove("systemlib:build-essential")
    loop.graph.meta["resolution"]["pins"] = pins or {"requests": "2.31.0"}
    unlocked = loop.compile(loop.graph).text
    loop._lock_from_plan()
    return unlocked


def test_the_plans_resolution_is_the_lock_the_first_image_installs(loop):
    loop.engine = _Engine({})
    unlocked = _plan_locked(loop)
    assert loop._planlock is not None and "requests==2.31.0" in (loop.repo / ".devcontainer" / LOCK_NAME).read_text()
    text = loop.compile(loop.graph).text
    assert text != unlocked and "--require-hashes" in text and "requirements.lock" in text
    assert loop.engine.frozen == []  # nothing was built or frozen to draft it


def test_a_first_image_that_installed_the_plans_lock_proves_it_with_no_other_build(loop, monkeypatch):
    loop.engine = _Engine({WORK: SET})
    builds: list[str] = []

    def build(context, text, tag, **kw):
        builds.append(tag)
        return BuildResult(True, tag, "", 0.1)

    monkeypatch.setattr(loop.engine, "build", build)
    _plan_locked(loop)
    working = _first_image(loop, monkeypatch)
    assert loop._finish(working=working) is None
    rec = loop.record
    # no image built to prove the lock: only the development stage, once the run succeeded
    assert rec.status == "success" and loop.replays == [] and builds == ["setupbot-loop-x:dev-final"]
    assert rec.replay["first_build"] is True and rec.replay["tag"] == WORK
    assert rec.replay["lock"]["status"] == "locked" and rec.replay["lock"]["count"] == 1
    # the system packages are pinned to the versions that image installed, in the lock and the Dockerfile
    assert "# apt: libpq-dev=15.8" in rec.lock_text and "libpq-dev=15.8" in loop.compile(loop.graph).text
    assert rec.lock_text == (loop.repo / ".devcontainer" / LOCK_NAME).read_text()
    source = loop.graph.nodes["config:requirements-lock"].attrs["source"]
    assert "resolved from the plan" in source and "first image" in source
    assert "locked from the plan's resolution, which the clean replay installed" in loop.compile(loop.graph).text
    assert loop._planlock is None


def test_a_first_image_with_another_set_than_the_plans_lock_is_replayed_without_it(loop, monkeypatch):
    """The image installed something the lock does not list (or at another version): the lock
    goes, the unlocked Dockerfile gets its clean replay, and the lock is frozen from that."""
    loop.engine = _Engine({WORK: '[["requests", "2.32.0", false], ["pip", "24.0", false]]', REPLAY: SET, LOCKED: SET})
    unlocked = _plan_locked(loop)
    working = _first_image(loop, monkeypatch)
    assert loop._finish(working=working) is None
    assert loop.replays == [unlocked] and loop._planlock is None
    assert loop.record.replay["lock"]["status"] == "locked" and loop.record.replay["tag"] == LOCKED
    withdrawn = [s for s in loop.traj.steps if s.action == "lock-draft" and s.outcome == "withdrawn"]
    assert withdrawn and "2.32.0" in withdrawn[0].detail["reason"]


def test_a_cached_first_image_leaves_the_plans_lock_to_the_clean_replay(loop, monkeypatch):
    loop.engine = _Engine({WORK: SET, REPLAY: SET})
    _plan_locked(loop)
    working = _first_image(loop, monkeypatch)
    working.from_scratch = False
    assert loop._finish(working=working) is None
    assert len(loop.replays) == 1 and "--require-hashes" in loop.replays[0]
    assert loop.record.replay["lock"]["status"] == "locked" and loop.record.replay["tag"] == REPLAY
    assert "clean replay" in loop.graph.nodes["config:requirements-lock"].attrs["source"]


def test_dropping_the_plans_lock_puts_back_the_file_and_the_dockerfile(loop):
    loop.engine = _Engine({})
    target = loop.repo / ".devcontainer" / LOCK_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    before = "# Generated by setupbot\n" + MARKER_LINE + "\n"
    target.write_text(before)
    unlocked = _plan_locked(loop)
    assert loop._planlock is not None and target.read_text() != before
    loop._drop_plan_lock("a repair was tried")
    assert target.read_text() == before and loop.compile(loop.graph).text == unlocked
    assert loop._planlock is None


@pytest.mark.parametrize("why", ["unbuilt", "compiler", "lock-off", "hand-written"])
def test_no_lock_from_the_plan_when_its_resolution_does_not_fix_the_set(loop, why):
    loop.engine = _Engine({})
    loop.graph.meta["resolution"]["pins"] = {"requests": "2.31.0"}
    if why == "unbuilt":
        loop.graph.remove("systemlib:build-essential")
        loop.graph.meta["resolution"]["unbuilt"] = ["pyyaml"]
    elif why == "lock-off":
        loop.graph.remove("systemlib:build-essential")
        loop.settings = dataclasses.replace(loop.settings, output=dataclasses.replace(loop.settings.output, lock=False))
    elif why == "compiler":
        # the project builds its own extension: the compilers stay, and so does the plan's ranges
        proj = next(n for n in loop.graph.of_type("PACKAGE") if n.action == "project")
        proj.attrs["compiles"] = True
    elif why == "hand-written":
        loop.graph.remove("systemlib:build-essential")
        target = loop.repo / ".devcontainer" / LOCK_NAME
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("requests==2.30.0\n")
    loop._lock_from_plan()
    assert loop._planlock is None and "config:requirements-lock" not in loop.graph.nodes


@pytest.mark.parametrize(
    "line",
    [
        "The command '/bin/sh -c python -m pip install uv && uv pip install -r /tmp/requirements.lock' returned a "
        "non-zero code: 1",
        '#9 ERROR: process "/bin/sh -c uv pip install --require-hashes -r /tmp/requirements.lock" did not complete',
    ],
)
def test_a_build_that_failed_installing_the_lock_is_told_from_other_failures(line):
    assert vlock.failed_in_lock_install("Step 5/9 : RUN ...\nerror: hash mismatch\n" + line)
    other = line.replace("/tmp/requirements.lock", "/tmp/x").replace("uv pip install", "apt-get install")
    assert not vlock.failed_in_lock_install("E: Unable to locate package libfoo\n" + other)


def test_a_repair_that_leaves_the_installed_distributions_keeps_the_plans_lock():
    apt = Atom("apt_install", {"packages": ["libsndfile1"]})
    env = Atom("set_env", {"name": "TZ", "value": "UTC"})
    pip = Atom("pip_install", {"packages": ["numpy<2"]})
    assert vlock.keeps_plan_lock([apt]) and vlock.keeps_plan_lock([apt, env])
    assert not vlock.keeps_plan_lock([pip]) and not vlock.keeps_plan_lock([apt, pip])


def test_going_back_to_a_checkpoint_taken_before_the_plans_lock_was_dropped_leaves_it_out(loop):
    """A backtrack restores a graph from before the lock went: its file is gone, so the lock
    stays out of the graph (its COPY would fail)."""
    loop.engine = _Engine({})
    _plan_locked(loop)
    ws = Workspace(WORK, SimpleNamespace(text=""))
    cp = Checkpoint(loop.graph.to_json(), WORK, None, {}, 0)
    loop._drop_plan_lock("pip_install numpy<2 was tried")
    loop.undo_to(ws, cp)
    assert "config:requirements-lock" not in loop.graph.nodes
    assert "requirements.lock" not in loop.compile(loop.graph).text


def test_going_back_while_the_plans_lock_stands_keeps_it(loop):
    loop.engine = _Engine({})
    _plan_locked(loop)
    cp = Checkpoint(loop.graph.to_json(), WORK, None, {}, 0)
    loop.undo_to(Workspace(WORK, SimpleNamespace(text="")), cp)
    assert "config:requirements-lock" in loop.graph.nodes and loop._planlock is not None


@pytest.mark.parametrize("link", ["folder", "file"])
def test_a_symlinked_output_folder_or_lock_file_is_never_written_through(loop, tmp_path, link):
    """SECURITY.md: nothing from the repository reads or writes outside it. A repository whose
    .devcontainer (or its requirements.lock) is a symlink to a host directory (or file) gets no
    lock from the plan nor from the working image, and the host side is left as it was."""
    loop.engine = _Engine({WORK: SET})
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / LOCK_NAME).write_text("host file\n")
    folder = loop.repo / ".devcontainer"
    shutil.rmtree(folder, ignore_errors=True)
    if link == "folder":
        folder.symlink_to(outside, target_is_directory=True)
    else:
        folder.mkdir()
        (folder / LOCK_NAME).symlink_to(outside / LOCK_NAME)
    _plan_locked(loop)
    assert loop._planlock is None and "config:requirements-lock" not in loop.graph.nodes
    skipped = [s for s in loop.traj.steps if s.action == "lock-draft" and s.outcome == "skipped"]
    assert skipped and "symlink" in skipped[0].detail["reason"]
    assert loop._lock_first(_working(loop)) is None
    out = vlock.lock_environment(
        loop.engine, loop.repo, loop.graph, replay_tag=WORK, output_dir=".devcontainer", compile_dockerfile=loop.compile
    )
    assert out.status == "skipped" and "symlink" in out.reason
    assert sorted(p.name for p in outside.iterdir()) == [LOCK_NAME]
    assert (outside / LOCK_NAME).read_text() == "host file\n"


def test_the_plans_lock_leaves_out_the_compiler_that_no_pin_needs_and_dropping_it_puts_it_back(loop):
    """Every pin installs from a wheel and the project compiles nothing: the first image goes
    without the compiler the plan had from the repository's CI, as a lock after a replay would."""
    loop.engine = _Engine({})
    loop.graph.meta["resolution"]["pins"] = {"requests": "2.31.0"}
    unlocked = loop.compile(loop.graph).text
    assert "build-essential" in unlocked
    loop._lock_from_plan()
    assert loop._planlock is not None and loop._planlock.left_out == ["build-essential"]
    text = loop.compile(loop.graph).text
    assert "--require-hashes" in text and "build-essential" not in text
    assert any("build-essential left out" in n for n in loop._planlock.notes)
    loop._drop_plan_lock("a repair was tried")
    assert loop.compile(loop.graph).text == unlocked


@pytest.mark.parametrize("left_out", [True, False])
def test_a_first_image_that_did_not_build_without_the_left_out_compiler_goes_back_to_the_plan(loop, left_out):
    """Any build failure of the first image withdraws a lock that left a compiler out; with
    nothing left out, only a failure while installing the lock does, and the loop repairs the rest."""
    loop.engine = _Engine({})
    loop.graph.meta["resolution"]["pins"] = {"requests": "2.31.0"}
    if not left_out:
        loop.graph.remove("systemlib:build-essential")
    unlocked = loop.compile(loop.graph).text
    loop._lock_from_plan()
    failed = TargetOutcome("build", log="gcc: command not found\nThe command '/bin/sh -c make' returned 127")
    assert loop._plan_lock_failed_build(failed) is left_out
    assert (loop._planlock is None) is left_out
    if left_out:
        assert loop.compile(loop.graph).text == unlocked
        withdrawn = [s for s in loop.traj.steps if s.action == "lock-draft" and s.outcome == "withdrawn"]
        assert "did not build without build-essential" in withdrawn[0].detail["reason"]
    assert not loop._plan_lock_failed_build(_outcome(3))


def test_going_back_to_a_checkpoint_taken_with_the_compiler_left_out_puts_it_back(loop):
    loop.engine = _Engine({})
    loop.graph.meta["resolution"]["pins"] = {"requests": "2.31.0"}
    unlocked = loop.compile(loop.graph).text
    loop._lock_from_plan()
    cp = Checkpoint(loop.graph.to_json(), WORK, None, {}, 0)
    loop._drop_plan_lock("pip_install numpy<2 was tried")
    loop.undo_to(Workspace(WORK, SimpleNamespace(text="")), cp)
    assert loop.compile(loop.graph).text == unlocked


@pytest.mark.parametrize("found", [None, "# Generated by setupbot\n" + MARKER_LINE + "\nrequests==2.30.0\n"])
def test_a_run_that_ends_in_an_engine_error_puts_the_lock_file_back_as_it_found_it(loop, found):
    """The engine fails after the lock was written (the development stage's build, once the
    first image proved the plan's lock): the run writes no outputs, and the lock file goes back."""
    loop.engine = _Engine({})
    target = loop.repo / ".devcontainer" / LOCK_NAME
    if found is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(found)
    loop.graph.remove("systemlib:build-essential")
    loop.graph.meta["resolution"]["pins"] = {"requests": "2.31.0"}
    loop._make_plan = lambda t_start: None
    loop.llm, loop.llm_repairs = None, []

    def first_image(**kw):
        assert "requests==2.31.0" in target.read_text()  # the lock the first image installs
        return _working(loop)

    def proven_then_broken(ws):
        # the first image proved the lock (bot.loop.replay._prove_plan_lock); then the
        # development stage's build meets a broken engine
        loop._planlock, loop.record.status = None, "success"
        raise EngineError("the engine failed: connection reset by peer", "Check that the engine is healthy.")

    loop.open_workspace, loop._step = first_image, proven_then_broken
    with pytest.raises(EngineError, match="connection reset"):
        SetupLoop.run(loop)
    assert (target.read_text() if target.exists() else None) == found


def test_a_hand_written_lock_file_is_left_untouched_by_a_run_that_fails(loop):
    loop.engine = _Engine({})
    target = loop.repo / ".devcontainer" / LOCK_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("requests==2.30.0\n")
    before = target.stat().st_mtime_ns
    loop._lock_from_plan()
    loop._put_back_lock_file()
    assert target.read_text() == "requests==2.30.0\n" and target.stat().st_mtime_ns == before


def test_a_build_tool_the_test_command_runs_stays_in_the_plans_lock(loop):
    loop.engine = _Engine({})
    loop.graph.meta["resolution"]["pins"] = {"requests": "2.31.0"}
    apply_atom(loop.graph, Atom("apt_install", {"packages": ["make"]}), "tests/Makefile")
    loop.graph.target.attrs["command"] = ["make", "test"]
    loop._lock_from_plan()
    assert loop._planlock is not None and loop._planlock.left_out == ["build-essential"]
    text = loop.compile(loop.graph).text
    assert "make" in text.split("apt-get install", 1)[1] and "build-essential" not in text


# -- a repair that changed only the test command ---------------------------------------------------


def _opens_on_image(loop, monkeypatch, *outcomes: TargetOutcome) -> list[str]:
    """``open_on_image`` runs the tests in a fresh container on an image the run built: the
    tags it was asked for."""
    queue, tags = list(outcomes), []

    def open_on_image(tag, *, purpose):
        tags.append(tag)
        ws = Workspace(tag, SimpleNamespace(text=loop.compile(loop.graph).text))
        ws.outcome = ws.first = queue.pop(0)
        return ws

    monkeypatch.setattr(loop, "open_on_image", open_on_image, raising=False)
    return tags


def _retested(loop, monkeypatch) -> Workspace:
    """The first image, built from scratch, after a kept repair that set the test command; the
    trial ran the new command in the container the first test run had used."""
    working = _first_image(loop, monkeypatch)
    _kept(loop, Atom("test_command", {"command": ["python", "-m", "pytest", "tests"]}))
    working.outcome = _outcome(5)
    loop.replay_with(_outcome(5))  # what a --no-cache replay would give, were it built
    return working


def test_a_test_command_repair_is_replayed_in_a_fresh_container_on_the_first_image(loop, monkeypatch):
    """The CMD is all that changed: every layer is the first image's, built with no step from the
    cache. A fresh container on it runs the tests, and no --no-cache rebuild happens."""
    loop.engine = _Engine({WORK: SET, LOCKED: SET})
    working = _retested(loop, monkeypatch)
    tags = _opens_on_image(loop, monkeypatch, _outcome(5))
    assert loop._finish(working=working) is None
    rec = loop.record
    assert rec.status == "success" and loop.replays == [] and tags == [WORK]
    assert rec.replay["fresh_container"] is True and rec.replay["tests"]["passed"] == 5
    assert "first_build" not in rec.replay
    # the lock drafted from that image changes pins alone: its build installs the same set
    assert rec.replay["lock"]["status"] == "locked" and rec.replay["tag"] == LOCKED
    assert 'CMD ["python", "-m", "pytest", "tests"]' in loop.compile(loop.graph).text


def test_a_variable_set_for_the_tests_alone_is_replayed_in_a_fresh_container_too(loop, monkeypatch):
    """An in-container trial gave the variable to the test run alone: the Dockerfile sets it after
    every layer, and the fresh container starts with it from the graph's environment."""
    loop.engine = _Engine({WORK: SET, LOCKED: SET})
    working = _retested(loop, monkeypatch)
    _kept(loop, Atom("set_env", {"name": "TZ", "value": "UTC"}))
    loop.graph.nodes["config:env:TZ"].attrs["for_tests"] = True
    tags = _opens_on_image(loop, monkeypatch, _outcome(5))
    assert loop._finish(working=working) is None
    assert tags == [WORK] and loop.replays == [] and loop.record.replay["fresh_container"] is True
    text = loop.compile(loop.graph).text
    assert text.index("ENV TZ=UTC") > text.index("requirements.lock")


def test_a_fresh_container_that_does_not_pass_puts_the_drafted_lock_back(loop, monkeypatch):
    """The first run left state in its container (a generated file) that the new command needed:
    the fresh container shows it, and no lock is kept from an unproven image."""
    loop.engine = _Engine({WORK: SET, LOCKED: SET})
    working = _retested(loop, monkeypatch)
    _opens_on_image(loop, monkeypatch, _outcome(0, stage="collect"))
    loop._finish(working=working)
    assert WORK in loop.engine.frozen  # the lock was drafted from the first image
    assert loop.record.status != "success" and loop.record.replay["fresh_container"] is True
    assert "config:requirements-lock" not in loop.graph.nodes
    assert not (loop.repo / ".devcontainer" / LOCK_NAME).exists()


@pytest.mark.parametrize(
    "also",
    [Atom("set_env", {"name": "TZ", "value": "UTC"}), Atom("apt_install", {"packages": ["libsndfile1"]}), "cached"],
    ids=["set_env", "apt_install", "cached"],
)
def test_a_test_command_repair_beside_another_change_is_rebuilt(loop, monkeypatch, also):
    """An ENV or an install is a layer the first image lacks; a cached step is not a clean
    build: the replay rebuilds with --no-cache and runs the tests there."""
    loop.engine = _Engine({WORK: SET, REPLAY: SET, LOCKED: SET})
    working = _retested(loop, monkeypatch)
    if also == "cached":
        working.from_scratch = False
    else:
        _kept(loop, also)
    tags = _opens_on_image(loop, monkeypatch)
    assert loop._finish(working=working) is None
    assert tags == [] and len(loop.replays) == 1 and "fresh_container" not in loop.record.replay
    if also != "cached":
        assert also.args.get("name", "libsndfile1") in loop.replays[0]


def test_a_test_command_repair_after_the_plans_lock_is_proven_by_the_fresh_container(loop, monkeypatch):
    """The first image installed the plan's lock; a repair set the test command. The fresh
    container on that image is the replay, and the lock holds when that image installed its set."""
    loop.engine = _Engine({WORK: SET})
    _plan_locked(loop)
    working = _retested(loop, monkeypatch)
    tags = _opens_on_image(loop, monkeypatch, _outcome(5))
    monkeypatch.setattr(loop, "_settle_dev_stage", lambda: None, raising=False)
    assert loop._finish(working=working) is None
    rec = loop.record
    assert rec.status == "success" and tags == [WORK] and loop.replays == []
    assert rec.replay["fresh_container"] is True and rec.replay["lock"]["status"] == "locked"
    assert rec.replay["tag"] == WORK and loop._planlock is None
    assert "the clean replay" in loop.graph.nodes["config:requirements-lock"].attrs["source"]


# -- a lock frozen in the running container, after repairs tried there ---------------------------

CONTAINER_SET = '[["numba", "0.60.0", false], ["requests", "2.31.0", false], ["pip", "24.0", false]]'


class _Session:
    """The working image's runner, where a trial pip-installed numba."""

    def __init__(self) -> None:
        self.ran: list[list[str]] = []
        self.depth = 1

    closed = False

    def exec(self, argv, env=None, timeout=60, workdir=None, changes=True):
        if self.closed:
            raise EngineError("the runner session is not open", "Use it inside `with engine.session(...)`.")
        self.ran.append(list(argv))
        if argv[0] == "dpkg-query":
            return ExecResult(list(argv), 0, "libpq-dev=15.8\n", 0.1)
        return ExecResult(list(argv), 0, "SETUPBOT-DISTS:" + CONTAINER_SET, 0.1)


def _repaired_in(loop, working: Workspace, depth: int | None) -> None:
    """A pip_install kept after the image was built: tried in its container (a depth to roll back
    to) or by a rebuild (none)."""
    atom = Atom("pip_install", {"packages": ["numba"]})
    apply_atom(loop.graph, atom, "a repair")
    cp = Checkpoint(loop.graph.to_json(), working.tag, depth, {}, 0)
    loop.record.repairs.append(KeptRepair(None, Candidate([atom], "rule"), "", checkpoint=cp))


def test_after_an_in_container_repair_the_lock_is_frozen_in_the_container(loop):
    loop.engine = _Engine({WORK: SET, REPLAY: CONTAINER_SET})
    working = _working(loop)
    working.session = _Session()
    _repaired_in(loop, working, depth=0)
    pending = loop._lock_first(working)
    # read in the container (the image lacks numba), not in a throwaway one on the image
    assert pending is not None and WORK not in loop.engine.frozen and working.session.ran
    lock_text = (loop.repo / ".devcontainer" / LOCK_NAME).read_text()
    assert "numba==0.60.0" in lock_text and "requests==2.31.0" in lock_text
    assert "the tested container" in loop.graph.nodes["config:requirements-lock"].attrs["source"]
    loop.replay_with(_outcome(3))
    ws = loop._hold_locked_replay(pending, loop.replay(), working)
    # one replay, of the locked Dockerfile: no build after it to lock
    assert len(loop.replays) == 1 and "--require-hashes" in loop.replays[0]
    assert ws.tag == REPLAY and loop._prelocked is not None and loop._prelocked.status == "locked"


def test_a_repair_tried_by_a_rebuild_is_not_frozen_from_the_old_container(loop):
    loop.engine = _Engine({WORK: SET})
    working = _working(loop)
    working.session = _Session()
    _repaired_in(loop, working, depth=None)
    assert loop._lock_first(working) is None
    assert working.session.ran == [] and not (loop.repo / ".devcontainer" / LOCK_NAME).exists()


def test_the_run_freezes_the_container_before_it_closes_it_for_the_replay(loop, monkeypatch):
    """The loop hands its live workspace to the replay step, which drafts the lock in the
    container and only then closes it, so the replay's build has the machine to itself."""
    monkeypatch.setattr(loop, "_disproved_by_counts", lambda outcome: None, raising=False)
    monkeypatch.setattr(loop, "_settle_dev_stage", lambda: None, raising=False)
    loop.engine = _Engine({WORK: SET, REPLAY: CONTAINER_SET})
    working = _working(loop)
    session = working.session = _Session()
    working.stack.callback(setattr, session, "closed", True)
    _repaired_in(loop, working, depth=0)
    loop.replay_with(_outcome(3))
    assert loop._finish(working=working) is None
    assert session.ran and session.closed
    rec = loop.record
    assert rec.status == "success" and len(loop.replays) == 1 and "--require-hashes" in loop.replays[0]
    assert rec.replay["lock"]["status"] == "locked" and "numba==0.60.0" in rec.lock_text


@pytest.mark.parametrize(
    ("atom", "frozen_there"),
    [
        (Atom("pip_install", {"packages": ["numba"]}), True),
        (Atom("apt_install", {"packages": ["libsndfile1"]}), False),
    ],
)
def test_a_builder_stage_is_frozen_in_the_container_when_its_repairs_were_python_alone(
    loop, monkeypatch, atom, frozen_there
):
    """A lock whose builder stage builds a wheel (mysqlclient) is drafted in the container when
    the repairs tried there changed Python distributions alone: its system libraries are the
    image's. A Debian package installed there may be a library the image lacks: the lock is
    made after the replay instead."""
    from bot.loop import replay as vreplay

    withdrawn = []
    draft = SimpleNamespace(staged=True, left_out=[], lock=SimpleNamespace(entries=[]), notes=[], locked=loop.graph)
    pending = SimpleNamespace(draft=draft, seconds=0.1, withdraw=lambda: withdrawn.append(True))
    monkeypatch.setattr(vreplay, "draft_before_replay", lambda *a, **kw: pending)
    loop.engine = _Engine({WORK: SET})
    working = _working(loop)
    working.session = _Session()
    apply_atom(loop.graph, atom, "a repair")
    cp = Checkpoint(loop.graph.to_json(), working.tag, 0, {}, 0)
    loop.record.repairs.append(KeptRepair(None, Candidate([atom], "rule"), "", checkpoint=cp))
    got = loop._lock_first(working)
    assert (got is pending) is frozen_there and bool(withdrawn) is not frozen_there
    drafts = [s for s in loop.traj.steps if s.action == "lock-draft"]
    assert drafts[-1].outcome == ("ok" if frozen_there else "skipped")


# -- the plan's resolution completed in a container (bot.loop.inimage) ---------------------------


class _ResolveSession:
    """A runner session on the base image that answers the resolution script: the compiled set,
    then the wheels each wheel-less pin built into."""

    def __init__(self, compiled: str, wheels: dict[str, list[str]]) -> None:
        self.compiled, self.wheels = compiled, wheels
        self.modes: list[str] = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def exec(self, argv, env=None, timeout=None, workdir=None, changes=True):
        import json

        spec = json.loads(env["SETUPBOT_RESOLVE"])
        self.modes.append(spec["mode"])
        if spec["mode"] == "compile":
            answer = {"compiled": self.compiled}
        else:
            answer = {
                "wheels": {n: {"files": self.wheels.get(n, []), "error": "gcc: not found"} for n, _ in spec["build"]}
            }
        return ExecResult(list(argv), 0, "pip says things\nSETUPBOT-RESOLVED:" + json.dumps(answer), 1.0)


def _wheel_less_plan(loop, monkeypatch, session: _ResolveSession, missing: list[str]) -> list[str]:
    """The plan as the host left it when pyyaml has no wheel: the rest pinned, pyyaml unbuilt,
    and the compiler the plan adds for it. Returns the base images a session was opened on."""
    from bot.loop import replay as vreplay

    loop.plan = SimpleNamespace(graph=loop.graph, base_image="python:3.11-slim")
    loop.graph.meta["resolution"]["pins"] = {"requests": "2.31.0"}
    loop.graph.meta["resolution"]["unbuilt"] = ["pyyaml"]
    assert "systemlib:build-essential" in loop.graph.nodes
    opened: list[str] = []

    def open_session(image, **kw):
        opened.append(image)
        return session

    loop.engine.session = open_session
    monkeypatch.setattr(vreplay, "wheel_less", lambda pins, python: [n for n in missing if n in pins])
    return opened


def test_a_pin_with_no_wheel_that_builds_pure_in_a_container_lets_the_plan_lock_the_whole_set(loop, monkeypatch):
    loop.engine = _Engine({})
    compiled = "requests==2.31.0\npyyaml==6.0.1\nsvc-demo==0.1\n"
    session = _ResolveSession(compiled, {"pyyaml": ["PyYAML-6.0.1-py3-none-any.whl"]})
    opened = _wheel_less_plan(loop, monkeypatch, session, ["pyyaml"])
    loop._lock_from_plan()
    assert opened == ["python:3.11-slim"] and session.modes == ["compile", "build"]
    lock = (loop.repo / ".devcontainer" / LOCK_NAME).read_text()
    assert "pyyaml==6.0.1" in lock and "requests==2.31.0" in lock
    assert "svc-demo" not in lock  # the project is installed from its source, never from the lock
    assert loop._planlock is not None and loop._planlock.left_out == ["build-essential"]
    assert any("pure Python (pyyaml" in n for n in loop._planlock.notes)
    assert "build-essential" not in loop.compile(loop.graph).text
    step = next(s for s in loop.traj.steps if s.action == "resolve-in-image")
    assert step.outcome == "ok" and step.detail["built_pure"] == ["pyyaml"]


@pytest.mark.parametrize(
    "wheels", [{"pyyaml": ["PyYAML-6.0.1-cp311-cp311-linux_x86_64.whl"]}, {}], ids=["platform-wheel", "no-build"]
)
def test_a_pin_with_no_wheel_that_is_not_pure_python_leaves_the_plan_as_it_was(loop, monkeypatch, wheels):
    loop.engine = _Engine({})
    session = _ResolveSession("requests==2.31.0\npyyaml==6.0.1\n", wheels)
    _wheel_less_plan(loop, monkeypatch, session, ["pyyaml"])
    before = loop.compile(loop.graph).text
    loop._lock_from_plan()
    assert loop._planlock is None and "config:requirements-lock" not in loop.graph.nodes
    assert loop.graph.meta["resolution"]["unbuilt"] == ["pyyaml"]  # the graph is as the plan left it
    assert loop.compile(loop.graph).text == before and "build-essential" in before
    step = next(s for s in loop.traj.steps if s.action == "resolve-in-image")
    assert step.outcome == "failed" and "pyyaml" in step.detail["not_pure"]


def test_no_container_resolution_when_the_plan_lock_is_refused_for_another_reason(loop, monkeypatch):
    loop.engine = _Engine({})
    session = _ResolveSession("requests==2.31.0\n", {})
    opened = _wheel_less_plan(loop, monkeypatch, session, ["pyyaml"])
    # a direct URL requirement is resolved only in the image: the lock could not cover it anyway
    loop.graph.meta["resolution"]["not_on_host"] = [{"requirement": "x @ https://e.org/x.whl", "why": "URL"}]
    loop._lock_from_plan()
    assert opened == [] and loop._planlock is None


def test_a_resolution_in_a_container_is_kept_for_the_same_inputs_and_image(loop, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    loop.engine = _Engine({})
    session = _ResolveSession("requests==2.31.0\npyyaml==6.0.1\n", {"pyyaml": ["PyYAML-6.0.1-py3-none-any.whl"]})
    opened = _wheel_less_plan(loop, monkeypatch, session, ["pyyaml"])
    ids = {"python:3.11-slim": "sha256:" + "1" * 64}
    loop.engine.image_id = lambda tag: ids.get(tag)

    def again() -> dict:
        loop.graph.meta["resolution"].update(unbuilt=["pyyaml"], pins={"requests": "2.31.0"})
        loop._complete_in_image()
        assert loop.graph.meta["resolution"]["pins"] == {"pyyaml": "6.0.1", "requests": "2.31.0"}
        return [s for s in loop.traj.steps if s.action == "resolve-in-image"][-1].detail

    assert "cached" not in again() and len(opened) == 1
    assert again()["cached"] is True and len(opened) == 1  # the same inputs on the same image
    ids["python:3.11-slim"] = "sha256:" + "2" * 64  # another base image: resolved again
    assert "cached" not in again() and len(opened) == 2
    loop.settings = dataclasses.replace(
        loop.settings, output=dataclasses.replace(loop.settings.output, refresh_lock=True)
    )
    assert "cached" not in again() and len(opened) == 3  # --refresh-lock asks the index again


def _summary_only(log: str) -> TargetOutcome:
    """A repository's own runtests.py: Django's runner at its default verbosity says no test
    by name, only its closing summary; no JUnit."""
    return TargetOutcome("done", log=log, collect_exit=0, test_exit=1)


def test_a_test_script_that_prints_only_unittest_s_summary_still_gets_the_lock_first(loop):
    """wagtailmenus runs `python runtests.py`: 175 tests ran, a few failed, and no test is named
    in the output. Its tests passed all the same, so the lock is drafted from the working image
    and the replay builds the locked Dockerfile, instead of replaying the ranges (a slow pip
    resolution) and locking in a build after it."""
    loop.engine = _Engine({WORK: SET, REPLAY: SET})
    working = Workspace(WORK, SimpleNamespace(text=loop.compile(loop.graph).text))
    working.outcome = _summary_only("....F..\nRan 175 tests in 38.2s\n\nFAILED (failures=3, errors=1, skipped=2)\n")
    pending = loop._lock_first(working)
    assert pending is not None and WORK in loop.engine.frozen
    # the locked replay passes as many: 169 each (175 ran, 2 skipped, 4 did not pass)
    loop.replay_with(_summary_only("Ran 175 tests in 37.0s\n\nFAILED (failures=3, errors=1, skipped=2)\n"))
    ws = loop._hold_locked_replay(pending, loop.replay(), working)
    assert len(loop.replays) == 1 and "--require-hashes" in loop.replays[0]
    assert ws.tag == REPLAY and loop._prelocked is not None


def test_a_summary_with_no_test_passed_drafts_no_lock(loop):
    loop.engine = _Engine({WORK: SET})
    working = Workspace(WORK, SimpleNamespace(text=loop.compile(loop.graph).text))
    working.outcome = _summary_only("Ran 4 tests in 0.2s\n\nFAILED (errors=3, expected failures=1)\n")
    assert loop._lock_first(working) is None and loop.engine.frozen == []


def test_passed_count_reads_the_runner_s_summary_when_no_test_is_named():
    from bot.loop.target import passed_count

    assert passed_count(_outcome(3)) == 3
    assert passed_count(_summary_only("Ran 10 tests in 1.0s\n\nOK\n")) == 10
    assert passed_count(_summary_only("Ran 10 tests in 1.0s\n\nOK (skipped=4)\n")) == 6
    assert passed_count(_summary_only("Ran 10 tests in 1.0s\n\nFAILED (failures=2, unexpected successes=1)\n")) == 7
    assert passed_count(_summary_only("===== 5 passed, 1 failed, 2 skipped in 0.50s =====\n")) == 5
    assert passed_count(_summary_only("Traceback (most recent call last):\nImportError\n")) == 0


# psycopg and redis are what the plan names; python-discovery and its filelock were left by a
# repair's older pin (django-bootstrap5: virtualenv went back to 2024, python-discovery stayed)
LEFT_BEHIND = (
    '[["psycopg", "3.2.3", false, false, ["psycopg-binary", "typing-extensions"]],'
    ' ["psycopg-binary", "3.2.3", false, false, []],'
    ' ["typing-extensions", "4.12.2", false, true, []],'
    ' ["redis", "5.2.0", false, true, ["async-timeout"]],'
    ' ["python-discovery", "1.9.9", false, true, ["filelock", "platformdirs"]],'
    ' ["filelock", "3.15.3", false, true, []],'
    ' ["pip", "24.0", false, true, []]]'
)
CLEAN = (
    '[["psycopg", "3.2.3", false, false, ["psycopg-binary", "typing-extensions"]],'
    ' ["psycopg-binary", "3.2.3", false, false, []],'
    ' ["typing-extensions", "4.12.2", false, true, []],'
    ' ["redis", "5.2.0", false, true, ["async-timeout"]],'
    ' ["pip", "24.0", false, true, []]]'
)


def test_what_nothing_requires_stays_out_of_the_lock_and_the_replay_s_tests_prove_it(loop):
    loop.engine = _Engine({WORK: LEFT_BEHIND, REPLAY: CLEAN})
    working = _working(loop)
    pending = loop._lock_first(working)
    assert pending is not None
    assert pending.working.unrequired == {"filelock": "3.15.3", "python-discovery": "1.9.9"}
    text = (loop.repo / ".devcontainer" / LOCK_NAME).read_text()
    assert "psycopg==3.2.3" in text and "typing-extensions==4.12.2" in text and "redis==5.2.0" in text
    assert "python-discovery" not in text and "filelock" not in text
    assert any("left out of the lock: filelock 3.15.3, python-discovery 1.9.9" in n for n in pending.draft.notes)
    # not a change of pins alone: the clean replay runs the tests, no build-only proof
    assert not loop._needs_no_test(pending)
    loop.replay_with(_outcome(3))
    ws = loop._hold_locked_replay(pending, loop.replay(), working)
    assert ws.tag == REPLAY and loop._prelocked is not None and loop._prelocked.status == "locked"


def test_a_listing_without_requirements_leaves_nothing_out():
    """An image listed by an older reader (no requirements per distribution): nothing is
    called unrequired, so nothing is dropped on a guess."""
    listed = vlock.parse_freeze_output("SETUPBOT-DISTS:" + SET)
    assert vlock.unrequired(listed, set(), vlock.InstalledSet()) == {}


def test_the_reader_lists_each_distribution_s_requirements_on_a_real_interpreter():
    """FREEZE_SCRIPT run by this interpreter: pytest requires pluggy, and what pytest needs is
    never called unrequired when the plan names pytest."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", vlock.FREEZE_SCRIPT], capture_output=True, text=True, timeout=120)
    listed = vlock.parse_freeze_output(out.stdout)
    assert listed.ok and "pluggy" in listed.requires["pytest"]
    left = vlock.unrequired(listed, {"pytest"}, vlock.InstalledSet())
    assert "pytest" not in left and "pluggy" not in left and "iniconfig" not in left
    assert left  # this interpreter has more than pytest and what it needs
