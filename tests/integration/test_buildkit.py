"""Builds under BuildKit, where the engine has buildx: logs read like the classic builder's (so
diagnosis works), the no-cache replay rebuilds, snapshots still commit, the result says which
limit did not hold, and cache mounts are the run's own. CI's engine has only the classic
builder, so .ci/run gives these tests Debian's buildx plugin (the ``buildx_config`` fixture)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from bot.config import load_settings
from bot.engine import Engine
from bot.engine.core import BUILDKIT_LIMITS_NOTE
from bot.loop.diagnose import diagnose

FAILING = """\
FROM python:3.11-slim
RUN echo step-one-ran
RUN python -c "import nosuchmodule_for_setupbot"
"""
PASSING = """\
FROM python:3.11-slim
RUN echo built-at-$(date +%s%N) > /stamp
"""


@pytest.fixture(scope="module")
def engine(buildx_config):
    e = Engine.from_settings(load_settings(None, overrides={"engine": {"memory": "1g"}}))
    assert e.buildkit_available()
    yield e
    e.clean(e.run_id)


def test_buildkit_log_is_plain_and_diagnosable_and_the_limit_gap_is_said(engine, tmp_path):
    result = engine.build(tmp_path, FAILING, f"setupbot-test/buildkit:{engine.run_id}-fail")
    assert not result.ok
    assert "step-one-ran" in result.log
    assert not any(line.startswith("#") and "ModuleNotFoundError" in line for line in result.log.splitlines())
    kinds = {(s.kind, s.key) for s in diagnose(result.log)}
    assert any("nosuchmodule_for_setupbot" in str(key) for _, key in kinds), kinds
    assert result.limits_note == BUILDKIT_LIMITS_NOTE


def test_buildkit_no_cache_replay_rebuilds_and_snapshots_commit(engine, tmp_path):
    tag = f"setupbot-test/buildkit:{engine.run_id}-ok"
    first = engine.build(tmp_path, PASSING, tag)
    assert first.ok, first.log[-2000:]
    stamp1 = engine.run_once(tag, ["cat", "/stamp"]).output
    cached = engine.build(tmp_path, PASSING, tag)
    assert cached.ok, cached.log[-2000:]
    stamp2 = engine.run_once(tag, ["cat", "/stamp"]).output
    # The engine says which steps came from the cache, and the image agrees with it. (Another
    # test on the same engine may evict the cache between the two builds: then the step ran
    # again and the engine must say so, which is what the loop reads.)
    assert cached.cached_steps is not None
    assert (stamp2 == stamp1) == (cached.cached_steps >= 1), (cached.cached_steps, stamp1, stamp2)
    replay = engine.build(tmp_path, PASSING, tag, no_cache=True)
    assert replay.ok and replay.cached_steps == 0
    assert engine.run_once(tag, ["cat", "/stamp"]).output not in (stamp1, stamp2)
    with engine.session(tag) as session:
        session.exec(["sh", "-c", "echo changed > /stamp"])
        session.snapshot("after change")
        session.exec(["sh", "-c", "echo later > /stamp"])
        session.rollback()
        assert session.exec(["cat", "/stamp"]).output.strip() == "changed"


RUST_CRATE = Path(__file__).resolve().parents[1] / "fixtures" / "repos" / "rust-crate"


def _rust_dockerfile(engine) -> str:
    from test_rust_engine import _standins

    from bot.ecosystems.rust.compile import compile_dockerfile
    from bot.ecosystems.rust.graph import RUNTIME
    from bot.ecosystems.rust.prove import make_plan

    # CI makes the stand-in beforehand; alone, or on a worker that runs first, the test makes it
    _standins(engine, ["1.85"])
    plan = make_plan(RUST_CRATE, ["1.85"])
    plan.graph.nodes[RUNTIME].attrs["cache_mounts"] = True  # what the Rust loop sets under BuildKit
    return compile_dockerfile(plan.graph).text


def _cache_records(engine) -> list[str]:
    from bot.engine.core import cache_records
    from bot.engine.dockerfile import CACHE_SCOPE

    du = engine.run_cli(["buildx", "du", "--verbose", "--filter", "type=exec.cachemount"], check=False)
    return cache_records(du.stdout, f"{CACHE_SCOPE}{engine.run_id}")


def test_rust_cache_mounts_keep_crates_and_target_between_builds_and_stay_the_runs_own(engine, tmp_path):
    """The loop's next trial after a repair ahead of the fetch (an apt package) downloads
    nothing and compiles only what changed; the image still holds the crates and target/, so
    the tests run offline without compiling the dependency; the clean replay starts from empty
    caches; and cleaning the run removes its caches."""
    repo = tmp_path / "crate"
    shutil.copytree(RUST_CRATE, repo)
    text = _rust_dockerfile(engine)
    assert "--mount=type=cache,id=cargo-registry," in text and "--mount=type=cache,id=cargo-target-rust-crate," in text
    tag = f"setupbot-test/buildkit:{engine.run_id}-rust"

    first = engine.build(repo, text, tag)
    assert first.ok, first.log[-3000:]
    assert "Downloaded itoa" in first.log and "Compiling itoa" in first.log
    tests = engine.run_once(tag, ["sh", "-c", "cargo test --locked --offline 2>&1"], network="none", timeout=600)
    assert tests.exit_code == 0, tests.output[-3000:]
    assert "Compiling itoa" not in tests.output and "test result: ok" in tests.output

    # a trial whose repair sits ahead of the fetch (here an ENV line), with a changed source file
    trial = text.replace("WORKDIR /workspace", "ENV SETUPBOT_TRIAL=2\nWORKDIR /workspace", 1)
    lib = repo / "src" / "lib.rs"
    lib.write_text(lib.read_text() + "\n// changed by the test\n")
    second = engine.build(repo, trial, tag)
    assert second.ok, second.log[-3000:]
    assert "cargo fetch --locked" in second.log  # the fetch ran again ...
    assert "Downloaded itoa" not in second.log  # ... from the cache
    assert "Compiling rust-crate" in second.log and "Compiling itoa" not in second.log

    replay = engine.build(repo, trial, tag, no_cache=True)
    assert replay.ok, replay.log[-3000:]
    assert "Downloaded itoa" in replay.log and "Compiling itoa" in replay.log  # empty caches

    assert len(_cache_records(engine)) >= 4  # registry and target, for the trials and the replay
    assert engine.prune_cache_mounts(engine.run_id) >= 4
    assert _cache_records(engine) == []


def test_python_installs_keep_pips_downloads_between_builds_and_out_of_the_image(buildx_config, tmp_path):
    """Under BuildKit the Python Dockerfile's pip steps keep their downloads in the run's cache
    mounts: the next trial after a repair ahead of them (an ENV line) downloads nothing, the
    image holds no pip cache, the clean replay downloads again, and cleaning the run removes
    the caches. The wheel comes from an index on 127.0.0.1 that sends PyPI's Cache-Control
    (pip keeps only what the response lets it keep; this machine's proxy drops that header)."""
    from doubles.package_index import PYPI_FILE_CACHE_CONTROL, publish, serve

    from bot.compile import compile_dockerfile
    from bot.compile.plan import make_plan
    from bot.graph.mapping import Registry
    from bot.graph.model import Node

    engine = Engine.from_settings(load_settings(None, overrides={"engine": {"memory": "1g", "network_mode": "host"}}))
    assert engine.buildkit_available()
    if not engine.image_exists("python:3.11-slim"):
        pytest.fail("python:3.11-slim is missing: run `setupbot images bootstrap` (CI does)")
    index, repo = tmp_path / "index", tmp_path / "repo"
    publish(index, "tinypkg", "1.0")
    (repo / "tests").mkdir(parents=True)
    (repo / "requirements.txt").write_text("tinypkg>=1.0\n")
    (repo / "tests" / "test_tiny.py").write_text("import tinypkg\n")
    wheel = "/simple/tinypkg/tinypkg-1.0-py3-none-any.whl"
    tag = f"setupbot-test/buildkit:{engine.run_id}-python"
    try:
        with serve(index, cache_control=PYPI_FILE_CACHE_CONTROL) as (url, requests):
            graph = make_plan(
                repo, load_settings(repo), available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False)
            ).graph
            graph.nodes["tool:pytest"].action = None  # not on this index, and not what is measured
            for var, value in (("PIP_INDEX_URL", url), ("PIP_TRUSTED_HOST", "127.0.0.1")):
                attrs = {"kind": "env", "value": value}
                graph.add(Node(f"config:env:{var}", "CONFIG", var, "SATISFIED", action="env", attrs=attrs))
            graph.runtime.attrs["cache_mounts"] = True  # what the loop sets under BuildKit
            text = compile_dockerfile(graph).text
            assert "--mount=type=cache,id=pip,target=/root/.cache/pip" in text and "--no-cache-dir" not in text

            first = engine.build(repo, text, tag)
            assert first.ok, first.log[-3000:]
            assert requests.count(wheel) == 1
            empty = engine.run_once(tag, ["sh", "-c", "ls -A /root/.cache/pip 2>/dev/null | wc -l"]).output.strip()
            assert empty == "0"  # the cache stayed in the mount

            trial = text.replace("WORKDIR /workspace", "ENV SETUPBOT_TRIAL=2\nWORKDIR /workspace", 1)
            second = engine.build(repo, trial, tag)
            assert second.ok, second.log[-3000:]
            assert re.search(r"Using cached \S*tinypkg-1.0-py3", second.log)  # the install step ran again ...
            assert requests.count(wheel) == 1  # ... and downloaded nothing

            replay = engine.build(repo, trial, tag, no_cache=True)
            assert replay.ok, replay.log[-3000:]
            assert requests.count(wheel) == 2  # the replay's caches start empty
            assert engine.run_once(tag, ["python", "-c", "import tinypkg"]).exit_code == 0

        assert len(_cache_records(engine)) >= 2  # the trials' and the replay's pip caches
        assert engine.prune_cache_mounts(engine.run_id) >= 2
        assert _cache_records(engine) == []
    finally:
        engine.clean(engine.run_id)


def test_a_cache_mount_from_another_build_is_not_shared(engine, tmp_path):
    """A Dockerfile that names another project's cache id gets a cache of this run's own: what a
    hostile repository's build wrote there never reaches another run's build."""
    poison = (
        "FROM debian:bookworm-slim\nRUN --mount=type=cache,id=cargo-target-victim,target=/c echo poisoned > /c/mark\n"
    )
    other = Engine.from_settings(load_settings(None))
    try:
        assert other.build(tmp_path, poison, f"setupbot-test/buildkit:{other.run_id}-poison").ok
        reader = "FROM debian:bookworm-slim\nRUN --mount=type=cache,id=cargo-target-victim,target=/c cat /c/mark 2>&1 || echo clean > /seen\n"
        probe = engine.build(tmp_path, reader, f"setupbot-test/buildkit:{engine.run_id}-reader")
        assert probe.ok, probe.log[-2000:]
        assert (
            engine.run_once(f"setupbot-test/buildkit:{engine.run_id}-reader", ["cat", "/seen"]).output.strip()
            == "clean"
        )
    finally:
        other.clean(other.run_id)
