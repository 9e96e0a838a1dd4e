"""The development stage (issue 16, item 6 and item 4): git and the non-root user sit in a last
stage on top of the tested one. The loop builds, tests and replays the tested stage alone; the
development stage is built once, on the base image beside the first build, and its git is
pinned to the version that build installed."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from bot.compile import compile_dockerfile
from bot.compile.dockerfile import without_dev_stage
from bot.compile.plan import make_plan
from bot.config import load_settings
from bot.engine.dockerfile import base_images, from_lines
from bot.engine.results import BuildResult, ExecResult
from bot.errors import EngineError
from bot.graph.mapping import Registry
from bot.graph.model import dev_stage_only
from bot.loop.devstage import DevStageBuild, dev_packages, dev_part, on_base, on_image
from bot.loop.orchestrator import SetupLoop
from bot.loop.records import RunRecord
from bot.loop.trajectory import Budget
from bot.report.model import from_pipeline

REPOS = Path(__file__).parents[1] / "fixtures" / "repos"
GIT = "1:2.39.5-0+deb12u2"


def _plan(repo: Path):
    return make_plan(
        repo, load_settings(repo, environ={}), available_pythons=["3.11"], registry=Registry(enabled=False)
    )


def _repo(tmp_path: Path, name: str = "plan-ci-services") -> Path:
    repo = tmp_path / "r"
    shutil.copytree(REPOS / name, repo)
    return repo


def test_git_and_the_user_are_a_stage_on_top_of_the_tested_one(tmp_path):
    text = compile_dockerfile(_plan(_repo(tmp_path)).graph).text
    froms = from_lines(text)
    assert [f.stage_ref for f in froms] == [False, True]
    assert text.count("FROM python:3.11-slim AS env") == 1 and "\nFROM env AS dev\n" in text
    tested, dev = without_dev_stage(text), text.split("FROM env AS dev")[1]
    assert "git" not in tested.replace("github", "") and "useradd" not in tested
    assert "install -y --no-install-recommends git" in dev and "RUN useradd --create-home dev" in dev
    # the tests' command stays the tested stage's; the engine pulls one image, not the stage
    assert 'CMD ["python", "-m", "pytest", "tests"]' in tested and "CMD" not in dev
    assert base_images(text) == ["python:3.11-slim"]
    # what the loop builds: up to the tested stage's CMD, its comment and the dev stage left out
    cut = without_dev_stage(text)
    assert text.startswith(cut) and cut.rstrip().endswith('CMD ["python", "-m", "pytest", "tests"]')
    assert "development container" not in cut and "FROM env" not in cut
    assert without_dev_stage(cut) == cut


def test_git_that_a_dependency_needs_is_in_the_tested_stage(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    (repo / "requirements.txt").write_text("tool @ git+https://example.org/tool.git@v1\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    graph = _plan(repo).graph
    git = graph.nodes["systemlib:git"]
    assert not dev_stage_only(git) and dev_stage_only(graph.nodes["config:dev-user"])
    text = compile_dockerfile(graph).text
    tested, dev = without_dev_stage(text), text.split("FROM env AS dev")[1]
    assert "--no-install-recommends git" in tested and "git" not in dev and "useradd" in dev
    assert dev_packages(graph) == []


class _Engine:
    """Builds record their Dockerfile; the development image has git at GIT."""

    def __init__(self, ok: bool = True, gate: threading.Event | None = None) -> None:
        self.builds: list[tuple[str, str]] = []
        self.ok = ok
        self.gate = gate

    def build(self, context, text, tag, no_cache=False, timeout=None):
        if self.gate is not None:
            self.gate.wait(10)
        self.builds.append((tag, text))
        return BuildResult(self.ok, tag, "" if self.ok else "E: Unable to locate package git", 0.1)

    def run_once(self, image, argv, timeout=300, env=None, network="none"):
        assert argv[:2] == ["dpkg-query", "-W"]
        return ExecResult(list(argv), 0, f"git={GIT}\n", 0.1)


@pytest.fixture
def loop(tmp_path):
    repo = _repo(tmp_path)
    settings = load_settings(repo, environ={})
    lp = SetupLoop.__new__(SetupLoop)
    lp.repo, lp.settings, lp.compile = repo, settings, compile_dockerfile
    lp.plan = SimpleNamespace(graph=_plan(repo).graph, services=[], env={})
    lp.record = RunRecord(repo="r", run_id="x")
    lp.traj = lp.record.trajectory
    lp.budget = Budget(max_steps=20, wall_clock=3600, command_timeout=300)
    lp._final, lp._dev_build = False, None
    return lp


def test_the_build_beside_the_first_tests_is_used_and_git_is_pinned_to_what_it_installed(loop):
    gate = threading.Event()
    loop.engine = _Engine(gate=gate)
    text = loop.compile(loop.graph).text
    loop._dev_build = DevStageBuild(loop.engine, loop.repo, text, "setupbot-loop-x:dev-2", ["git"])
    assert loop._dev_build.result(timeout=0.05) is None  # still building: the tests run meanwhile
    gate.set()
    loop._settle_dev_stage()
    # one build, the whole Dockerfile (its last stage is the development one)
    assert loop.engine.builds == [("setupbot-loop-x:dev-2", text)]
    assert loop.record.replay["dev_stage"]["ok"] and loop.record.replay["dev_stage"]["versions"] == {"git": GIT}
    after = loop.compile(loop.graph).text
    assert f"--no-install-recommends git={GIT}" in after.split("FROM env AS dev")[1]
    assert without_dev_stage(after) == without_dev_stage(text)  # the tested stage is what was replayed
    assert loop._dev_build is None and "dev_stage_seconds" in loop.record.timings


def test_a_lock_applied_later_keeps_the_first_images_dev_stage_build(loop):
    """The development stage installs the same git on the same base whatever the Python
    packages below it: a tested stage that changed since (the lock) does not rebuild it."""
    loop.engine = _Engine()
    first = loop.compile(loop.graph).text.replace("pytest", "pytest-old")
    loop._dev_build = DevStageBuild(loop.engine, loop.repo, first, "setupbot-loop-x:dev-1", ["git"])
    loop._settle_dev_stage()
    assert [tag for tag, _ in loop.engine.builds] == ["setupbot-loop-x:dev-1"]
    assert loop.record.replay["dev_stage"]["on"] == "the run's first tested image, beside its tests"


def test_a_dev_stage_or_base_that_changed_since_is_built_again_on_the_final_image(loop):
    loop.engine = _Engine()
    final = loop.compile(loop.graph).text
    for stale in (final.replace("useradd --create-home dev", "useradd dev"), final.replace("3.11-slim", "3.12-slim")):
        loop.engine.builds.clear()
        loop.graph.nodes["systemlib:git"].attrs.pop("version", None)  # as planned, before the pin
        loop._dev_build = DevStageBuild(loop.engine, loop.repo, stale, "setupbot-loop-x:dev-1", ["git"])
        loop._settle_dev_stage()
        assert [tag for tag, _ in loop.engine.builds] == ["setupbot-loop-x:dev-1", "setupbot-loop-x:dev-final"]
        assert loop.engine.builds[1][1] == final
        assert loop.record.replay["dev_stage"]["on"] == "the final tested image"


def test_a_dev_stage_that_changed_goes_on_the_final_tested_image_as_built(loop):
    """The tested image of the replay is there: the stage is built on it alone, not the whole
    Dockerfile, whose tested layers a --no-cache replay left out of the cache."""
    loop.engine = _Engine()
    loop.engine.image_exists = lambda tag: tag == "setupbot-loop-x:replay"
    loop.record.replay["tag"] = "setupbot-loop-x:replay"
    final = loop.compile(loop.graph).text
    stale = final.replace("useradd --create-home dev", "useradd dev")
    loop._dev_build = DevStageBuild(loop.engine, loop.repo, stale, "setupbot-loop-x:dev-1", ["git"])
    loop._settle_dev_stage()
    tag, text = loop.engine.builds[1]
    assert tag == "setupbot-loop-x:dev-final"
    assert text.lstrip("#\n ").count("FROM ") == 1 and "FROM setupbot-loop-x:replay AS dev" in text
    assert (
        text.strip()
        == final[len(without_dev_stage(final)) :]
        .replace("FROM env AS dev", "FROM setupbot-loop-x:replay AS dev")
        .strip()
    )
    assert "useradd --create-home dev" in text and "COPY" not in text
    assert loop.record.replay["dev_stage"]["versions"] == {"git": GIT}
    # an image that is gone (cleaned up): the whole Dockerfile, as before
    loop.engine.builds.clear()
    loop.record.replay["tag"] = "setupbot-loop-x:gone"
    loop.graph.nodes["systemlib:git"].attrs.pop("version", None)  # as planned, before the pin
    loop._dev_build = DevStageBuild(loop.engine, loop.repo, stale, "setupbot-loop-x:dev-1", ["git"])
    loop._settle_dev_stage()
    assert loop.engine.builds[1][1] == final


def test_a_dev_stage_that_does_not_build_is_said_and_pins_nothing(loop):
    loop.engine = _Engine(ok=False)
    loop._settle_dev_stage()
    assert loop.record.replay["dev_stage"]["ok"] is False
    assert any("development stage" in w and "Unable to locate package git" in w for w in loop.record.warnings)
    assert "git=" not in loop.compile(loop.graph).text


@pytest.mark.parametrize("where", ["beside the tests", "on the final image"])
def test_an_engine_failure_in_the_dev_stage_build_ends_the_run(loop, where):
    """A connection reset while the development stage builds says nothing of the stage: the run
    ends with the engine's error, as on any other build, instead of succeeding with a warning."""

    class _Broken(_Engine):
        def build(self, context, text, tag, no_cache=False, timeout=None):
            raise EngineError("the engine failed: connection reset by peer", "Check that the engine is healthy.")

    loop.engine = _Broken()
    if where == "beside the tests":
        text = loop.compile(loop.graph).text
        loop._dev_build = DevStageBuild(loop.engine, loop.repo, text, "setupbot-loop-x:dev-1", ["git"])
    with pytest.raises(EngineError, match="connection reset"):
        loop._settle_dev_stage()
    assert "dev_stage" not in loop.record.replay


def test_the_report_says_what_the_dev_stage_holds_and_that_no_test_runs_in_it():
    replay = {"ok": True, "dev_stage": {"ok": True, "tag": "t", "seconds": 40.0, "versions": {"git": GIT}}}
    data = from_pipeline(run_record={"replay": replay})
    claims = {p.claim: p for p in data.proven}
    assert "clean replay: the compiled Dockerfile's tested stage rebuilt from scratch and ran the tests" in claims
    item = claims[f"development stage: git {GIT} and the non-root user on top of the tested image"]
    assert item.proven and "no test runs in it" in item.reason
    # the run's first image was the replay: the report says so, and not that it was rebuilt
    first = from_pipeline(run_record={"replay": {**replay, "first_build": True, "build_seconds": 80.0}})
    [claim] = [p.claim for p in first.proven if p.claim.startswith("clean replay")]
    assert "built from scratch (no step from the engine's cache) as the run's first image" in claim
    assert "needed no repair" in claim and "rebuilt" not in claim
    failed = {"ok": True, "dev_stage": {"ok": False, "tag": "t", "seconds": 9.0, "log_tail": "E: no git"}}
    [bad] = from_pipeline(run_record={"replay": failed}).unproven_items
    assert bad.claim.startswith("development stage") and bad.reason == "it did not build: E: no git"


def test_a_builder_stage_added_before_the_tested_one_leaves_the_dev_stage_as_it_was(loop):
    """The lock's builder stage (FROM python:3.11-slim AS wheels) comes first in the final
    Dockerfile; the development stage still rests on the same base, so the build beside the
    first tests stands. Another base under the tested stage does not."""
    final = loop.compile(loop.graph).text
    staged = "FROM python:3.11-slim AS wheels\nRUN pip wheel --wheel-dir=/wheels x\n\n" + final
    assert dev_part(staged) == dev_part(final)
    assert dev_part(final.replace("3.11-slim AS env", "3.12-slim AS env")) != dev_part(final)


def test_the_dev_stage_alone_on_the_base_image_is_its_own_steps_from_that_image(loop):
    text = loop.compile(loop.graph).text
    build_text, base = on_base(text)
    assert base == "python:3.11-slim"
    assert build_text.lstrip("#\n ").count("FROM ") == 1 and "FROM python:3.11-slim AS dev" in build_text
    assert build_text.strip() == on_image(text, "python:3.11-slim").strip()
    assert "useradd --create-home dev" in build_text and "COPY" not in build_text and "pip" not in build_text
    # a tested stage that starts from another stage waits for the image
    assert (
        on_base(text.replace("FROM python:3.11-slim AS env", "FROM python:3.11-slim AS wheels\nFROM wheels AS env"))
        is None
    )


def test_the_dev_stage_builds_beside_the_first_build_not_after_it(loop):
    """The first build takes a minute or more; the development stage (apt-get, git) waits on
    the Debian archive, not on that build. duckdb_engine: the stage took 79 s after a 64 s first
    build and its 16 s of tests, 62 s of the run spent on it alone."""
    dev_started = threading.Event()

    class _Parallel(_Engine):
        def build(self, context, text, tag, no_cache=False, timeout=None):
            if ":dev-" in tag:
                dev_started.set()
            else:  # the tested stage's build finishes only once the stage's build has begun
                assert dev_started.wait(10), "the development stage waited for the first build"
            return super().build(context, text, tag, no_cache, timeout)

    loop.engine = _Parallel()
    loop.n_builds, loop.config_env = 0, {}
    loop._pin_base = lambda: None
    loop._build_timeout = lambda: 60.0
    loop._start_runner = lambda ws, purpose="build", beside=None: False
    ws = loop.open_workspace()
    assert ws.outcome.note != "the image build failed"
    loop._settle_dev_stage()
    tags = [t for t, _ in loop.engine.builds]
    assert sorted(tags) == ["setupbot-loop-x:dev-1", "setupbot-loop-x:work-1"]  # no second stage build
    dev_text = dict(loop.engine.builds)["setupbot-loop-x:dev-1"]
    assert "FROM python:3.11-slim AS dev" in dev_text and "COPY" not in dev_text
    assert loop.record.replay["dev_stage"]["on"] == (
        "the tested stage's base image (python:3.11-slim), beside the run's first build"
    )
    assert f"git={GIT}" in loop.compile(loop.graph).text.split("FROM env AS dev")[1]


def test_a_replay_whose_dev_stage_changed_builds_it_beside_its_tests_on_the_replay_image(loop):
    """importlib_metadata: a repair put git into the tested stage, so the development stage no
    longer installs it and the one built beside the first build is stale. The replay's image
    is built: the stage goes on it while the replay's tests run, not 6 s after them."""
    tests_running = threading.Event()

    class _Replay(_Engine):
        def build(self, context, text, tag, no_cache=False, timeout=None):
            if ":dev-" in tag:  # built only once the replay's tests have started
                assert tests_running.wait(10), "the development stage waited for the replay's tests"
            return super().build(context, text, tag, no_cache, timeout)

    loop.engine = _Replay()
    loop.engine.image_exists = lambda tag: True
    loop.n_builds, loop.config_env = 1, {}
    loop._pin_base = lambda: None
    loop._build_timeout = lambda: 60.0

    def start_runner(ws, purpose="build", beside=None):
        tests_running.set()
        return False

    loop._start_runner = start_runner
    final = loop.compile(loop.graph).text
    stale = DevStageBuild(
        loop.engine, loop.repo, final.replace("useradd --create-home dev", "useradd dev"), "t:stale-1", []
    )
    assert stale.result(timeout=10) is not None
    loop._dev_build = stale
    ws = loop.open_workspace(no_cache=True, purpose="replay")
    assert ws.tag == "setupbot-loop-x:replay-2"
    loop.record.replay["tag"] = ws.tag
    loop._settle_dev_stage()
    tags = [t for t, _ in loop.engine.builds]
    assert tags == ["t:stale-1", "setupbot-loop-x:replay-2", "setupbot-loop-x:dev-2"]  # no dev-final after
    assert "FROM setupbot-loop-x:replay-2 AS dev" in dict(loop.engine.builds)["setupbot-loop-x:dev-2"]
    assert loop.record.replay["dev_stage"]["on"] == "the clean replay's image, beside its tests"
    # a development stage the replay shares with the running build is left to it
    loop.engine.builds.clear()
    same = DevStageBuild(loop.engine, loop.repo, loop.compile(loop.graph).text, "t:same-3", [])
    same.result(timeout=10)
    loop._dev_build = same
    loop.open_workspace(no_cache=True, purpose="replay")
    assert loop._dev_build is same and [t for t, _ in loop.engine.builds if "dev" in t] == []


def test_the_services_start_beside_the_image_build_and_a_failed_build_closes_them(loop):
    """A workspace's services do not depend on its image: they start while it builds, and the
    runner takes them once the build is done. A build that fails closes them with the workspace."""
    services_started = threading.Event()
    closed = []

    class _Slow(_Engine):
        def build(self, context, text, tag, no_cache=False, timeout=None):
            if ":dev-" not in tag:  # the image's build ends only once the services have started
                assert services_started.wait(10), "the services waited for the image's build"
            return super().build(context, text, tag, no_cache, timeout)

    def start_services(ws, env):
        ws.stack.callback(closed.append, ws.tag)
        services_started.set()
        env["DATABASE_URL"] = "postgresql://postgres@postgres/db"
        return "net-1"

    loop.engine = _Slow()
    loop.n_builds, loop.config_env = 0, {}
    loop._pin_base = lambda: None
    loop._build_timeout = lambda: 60.0
    loop._service_requirements = lambda: ["postgres"]
    loop._start_services = start_services
    sessions = []

    class _Session:
        def __init__(self, tag, env, network):
            sessions.append((tag, env, network))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    loop.engine.session = lambda tag, env=None, network=None: _Session(tag, env, network)
    loop.evaluate = lambda ws: ws.outcome
    ws = loop.open_workspace()
    assert sessions == [("setupbot-loop-x:work-1", {"DATABASE_URL": "postgresql://postgres@postgres/db"}, "net-1")]
    assert ws.session is not None and closed == []
    ws.close()
    assert closed == ["setupbot-loop-x:work-1"]
    # a failed build: the services started beside it are closed, and no runner starts
    services_started.clear()
    loop.engine.ok = False
    sessions.clear()
    failed = loop.open_workspace()
    assert failed.outcome.note == "the image build failed" and sessions == []
    assert closed == ["setupbot-loop-x:work-1", "setupbot-loop-x:work-2"]
