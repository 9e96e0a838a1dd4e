"""A classic build whose cached parent layer vanished mid-build (another run's clean pruned it)
is redone once; any other failed build is reported as it is, never retried."""

from __future__ import annotations

import shutil

import pytest

from bot.config import load_settings
from bot.engine import core
from bot.engine.capture import Captured

LOST = (
    "Step 4/9 : RUN pip install pytest\n ---> Using cache\n"
    "failed to export image: failed to set parent sha256:638ed47a65213cd851c614f0a5b9a6c67185ceb782a93f356643ddb2d41588fd: "
    "unknown parent image ID sha256:638ed47a65213cd851c614f0a5b9a6c67185ceb782a93f356643ddb2d41588fd\n"
)


@pytest.fixture
def engine(monkeypatch, tmp_path):
    if shutil.which("docker") is None:
        pytest.skip("Engine() needs a docker binary on PATH to name")
    e = core.Engine(load_settings(None, environ={}), run_id="lostparent", environ={})
    monkeypatch.setattr(e, "buildkit_available", lambda: False)
    monkeypatch.setattr(e, "egress_network", lambda: "bridge")
    return e


def _script(monkeypatch, outcomes):
    calls = []

    def fake(argv, env=None, timeout=None, watch=None):
        calls.append(argv)
        code, text = outcomes[len(calls) - 1]
        return Captured(code, text, False, len(text))

    monkeypatch.setattr(core, "run_capped", fake)
    return calls


# seen in CI: a concurrent clean removed the layer the next step's container stands on
LOST_STEP = (
    "Step 4/9 : WORKDIR /workspace\n"
    'unable to find image "sha256:d6cd5e0bedeca19fd3be55a91d4e851015d3ab3477141c73d7e8a4a61b90170b"\n'
)


def test_lost_parent_is_recognised_and_nothing_else_is():
    assert core.lost_cache_parent(LOST)
    assert core.lost_cache_parent(LOST_STEP)
    # a base image named by its tag or digest that is not there is the user's to fix, not a retry
    assert not core.lost_cache_parent('unable to find image "python:3.11-slim"\n')
    assert not core.lost_cache_parent('unable to find image "python@sha256:' + "a" * 64 + '"\n')
    assert not core.lost_cache_parent("ERROR: Could not find a version that satisfies the requirement nope\n")
    assert not core.lost_cache_parent("unknown parent image ID\n")  # only the builder's own sentence


def test_a_build_that_lost_its_cached_parent_is_redone_once_with_no_cache(engine, monkeypatch, tmp_path):
    """The redo stands on no cached layer: a plain redo lost its parent again in CI, when a
    parallel test's clean removed the next shared layer."""
    calls = _script(monkeypatch, [(1, LOST), (0, "Successfully built abc\n")])
    result = engine.build_raw(tmp_path, "FROM scratch\n", "t:1", {})
    assert result.ok and len(calls) == 2
    assert "--no-cache" not in calls[0] and [a for a in calls[1] if a != "--no-cache"] == calls[0]
    # the redo's command line is the one a --no-cache build is given, not an edit of the first
    assert calls[1] == engine._build_argv(
        engine_dockerfile(calls[0]), tmp_path, ["t:1"], {}, build_args=None, no_cache=True, buildkit=False
    )


def engine_dockerfile(argv):
    """The Dockerfile path a build command line names (a temporary file of build_raw's)."""
    from pathlib import Path

    return Path(argv[argv.index("-f") + 1])


def test_it_is_redone_only_once(engine, monkeypatch, tmp_path):
    calls = _script(monkeypatch, [(1, LOST), (1, LOST), (0, "")])
    result = engine.build_raw(tmp_path, "FROM scratch\n", "t:1", {})
    assert not result.ok and len(calls) == 2 and "unknown parent image ID" in result.log


def test_an_ordinary_failed_build_is_not_retried(engine, monkeypatch, tmp_path):
    calls = _script(monkeypatch, [(1, "ERROR: No matching distribution found for nope\n"), (0, "")])
    result = engine.build_raw(tmp_path, "FROM scratch\n", "t:1", {})
    assert not result.ok and len(calls) == 1
