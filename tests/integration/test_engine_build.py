"""Image builds through the engine: CA trusted without touching the Dockerfile, logs kept,
failing Dockerfiles reported (not raised)."""

from __future__ import annotations

import subprocess

import pytest

from bot.config import load_settings
from bot.engine import Engine

pytestmark = pytest.mark.slow


@pytest.fixture
def engine(docker_available):
    e = Engine.from_settings(load_settings(None))
    yield e
    e.clean(e.run_id)


def _history(tag: str) -> str:
    return subprocess.run(
        ["docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", tag],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_from_python_stand_in_pip_install_six_builds(engine, tmp_path):
    text = "FROM python:3.13-slim\nRUN pip install six\nRUN python -c 'import six'\n"
    log = tmp_path / "logs" / "build.log"
    r = engine.build(tmp_path, text, f"setupbot-test/six:{engine.run_id}", log_path=log)
    assert r.ok, r.log[-3000:]
    assert r.ca_bases == {}  # the stand-in already trusts the CA
    assert "Successfully installed six" in log.read_text()  # the kept build log
    assert engine.image_exists(r.tag) and engine.image_labels(r.tag)["setupbot.run"] == engine.run_id
    res = engine.run_once(r.tag, ["python", "-c", "import six; print('six', six.__version__)"])
    assert res.exit_code == 0 and res.output.startswith("six 1."), res.output


def test_build_from_a_base_without_the_ca_gets_a_transient_derivative(engine, tmp_path):
    assert engine.ca is not None
    base = "setupbot/rootfs:bookworm"  # imported rootfs: no CA of its own
    text = (
        f"FROM {base}\n"
        "RUN apt-get update && apt-get install -y --no-install-recommends python3-venv\n"
        "RUN python3 -m venv /v && /v/bin/pip install six && /v/bin/python -c 'import six'\n"
    )
    (tmp_path / "Dockerfile").write_text(text)
    r = engine.build(tmp_path, text, f"setupbot-test/ca:{engine.run_id}", no_cache=True)
    assert r.ok, r.log[-3000:]
    assert list(r.ca_bases) == [base]
    # the repository's Dockerfile is untouched, and the derivative is shared by every run: no
    # run label, so no run's cleanup pulls it from under another (`setupbot clean --all` does)
    assert (tmp_path / "Dockerfile").read_text() == text
    derivative = r.ca_bases[base]
    labels = engine.image_labels(derivative)
    assert "setupbot.run" not in labels and labels["setupbot.shared"] == "1"


def test_failing_dockerfile_is_a_result_not_an_exception(engine, tmp_path):
    r = engine.build(
        tmp_path, "FROM debian:bookworm-slim\nRUN echo broken-step && exit 3\n", f"setupbot-test/broken:{engine.run_id}"
    )
    assert not r.ok
    assert "broken-step" in r.log and r.seconds > 0


def test_missing_base_image_fails_the_build_with_the_reason_in_the_log(engine, tmp_path):
    r = engine.build(tmp_path, "FROM nosuchorg/nosuchimage:1\n", f"setupbot-test/none:{engine.run_id}")
    assert not r.ok and "nosuchorg/nosuchimage" in r.log


def test_no_cache_rebuilds_every_step(engine, tmp_path):
    text = "FROM debian:bookworm-slim\nRUN date +%s%N > /stamp\n"
    tag = f"setupbot-test/stamp:{engine.run_id}"
    first = engine.build(tmp_path, text, tag)
    cached = engine.build(tmp_path, text, tag)
    assert first.ok and cached.ok
    assert "Using cache" in cached.log
    fresh = engine.build(tmp_path, text, tag, no_cache=True)
    assert fresh.ok and "Using cache" not in fresh.log


def test_a_build_whose_pip_resolver_backtracks_is_stopped_after_the_grace_with_the_reason(docker_available, tmp_path):
    """pip says its resolver is taking longer than usual and goes on: the engine stops the build
    once engine.resolver_grace has passed, long before build_timeout, and says why."""
    import time

    from bot.loop.diagnose import diagnose

    settings = load_settings(None, overrides={"engine": {"resolver_grace": 5, "build_timeout": 900}})
    e = Engine.from_settings(settings)
    said = (
        "INFO: pip is looking at multiple versions of sympy to determine which version is compatible. "
        "INFO: This is taking longer than usual. You might need to provide the dependency resolver "
        "with stricter constraints to reduce runtime."
    )
    text = f"FROM python:3.13-slim\nRUN echo '{said}' && sleep 600\n"
    try:
        started = time.monotonic()
        r = e.build(tmp_path, text, f"setupbot-test/backtrack:{e.run_id}")
        assert not r.ok and "[setupbot] build stopped: pip's resolver was still backtracking 5s" in r.log, r.log[-2000:]
        assert time.monotonic() - started < 300  # stopped by the watch, not by the 600 s sleep
        assert [(s.kind, s.key) for s in diagnose(r.log)] == [("resolver_backtracking", "sympy")]
    finally:
        e.clean(e.run_id)
