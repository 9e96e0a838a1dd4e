"""Integration tests use the real container engine. Every test here is marked `docker`;
they skip (with a reason) when no engine answers, and CI always has one."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def _engine_available(kind: str) -> bool:
    if not shutil.which(kind):
        return False
    try:
        return subprocess.run([kind, "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def docker_available() -> bool:
    if not _engine_available("docker"):
        if os.environ.get("CI") == "true":  # CI always has an engine: its absence is a failure
            pytest.fail("no container engine answers `docker info` (CI=true)")
        pytest.skip("no container engine answers `docker info`")
    return True


# A small engine and a plain pytest image, shared by the verification tests (sibling repositories
# and the verdict tiers): the prosecutor and judge need nothing but pytest in the image.
PYTEST_IMAGE = """\
FROM python:3.11-slim
RUN pip install --no-cache-dir pytest
WORKDIR /workspace
"""


@pytest.fixture(scope="module")
def verify_engine(docker_available):
    from bot.config import load_settings
    from bot.engine import Engine

    if subprocess.run(["docker", "image", "inspect", "python:3.11-slim"], capture_output=True).returncode:
        pytest.fail("python:3.11-slim is missing: run `setupbot images bootstrap` first (CI does)")
    e = Engine.from_settings(load_settings(None, overrides={"engine": {"memory": "1g"}}))
    yield e
    e.clean(e.run_id)


@pytest.fixture(scope="module")
def plain_pytest_image(verify_engine, tmp_path_factory):
    tag = f"setupbot-test/verify-pytest:{verify_engine.run_id}"
    result = verify_engine.build(tmp_path_factory.mktemp("pytest-image"), PYTEST_IMAGE, tag)
    assert result.ok, result.log[-3000:]
    return tag


# One fresh engine and one local registry for the tests that play a new runner (the action run
# and the Dev Containers client): a real registry on 127.0.0.1 holding the stand-ins under
# official names, and a second Docker daemon whose store starts empty and which pulls official
# names through that registry as a mirror. Shared so the second test reuses the first one's
# pulled images and build cache. The shared engine's own tags are never touched.
MIRRORED = {"python:3.11-slim": "python:3.11-slim", "python:3.13-slim": "python:3.13-slim", "redis:7": "redis:8"}


def unavailable(reason: str):
    """Missing infrastructure fails under CI=true and skips elsewhere."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def runner_world(tmp_path_factory, docker_available):
    """(registry address, {official name: pushed digest}, environment of the fresh engine)."""
    from doubles.engines import Unavailable, fresh_engine, local_registry, push_as

    missing = [
        s
        for s in set(MIRRORED.values())
        if subprocess.run(["docker", "image", "inspect", s], capture_output=True).returncode
    ]
    if missing:
        unavailable(
            f"stand-ins missing on the shared engine ({', '.join(sorted(missing))}): run `setupbot images bootstrap`"
        )
    root = tmp_path_factory.mktemp("runner-world")
    try:
        with local_registry(root / "registry") as registry:
            digests = {name: push_as(None, local, registry, name) for name, local in MIRRORED.items()}
            with fresh_engine(root / "engine", registry_mirror=registry) as env:
                yield registry, digests, env
    except Unavailable as exc:
        unavailable(str(exc))


@pytest.fixture
def host_engine(docker_available):
    """An engine whose builds use the host's network: they reach a package index a test serves
    on 127.0.0.1 (the lock tests)."""
    import subprocess

    from bot.config import load_settings
    from bot.engine import Engine

    if subprocess.run(["docker", "image", "inspect", "python:3.11-slim"], capture_output=True).returncode:
        pytest.fail("python:3.11-slim is missing: run `setupbot images bootstrap` first (CI does)")
    e = Engine.from_settings(load_settings(None, overrides={"engine": {"memory": "1g", "network_mode": "host"}}))
    yield e
    e.clean(e.run_id)


@pytest.fixture(scope="module")
def buildx_config(docker_available):
    """The engine's CLI with buildx, so builds run under BuildKit: the CLI's own plugin (GitHub's
    ubuntu-latest), or the private Docker config folder with Debian's plugin that .ci/run
    prepares (SETUPBOT_TEST_BUILDX_CONFIG), set as DOCKER_CONFIG while the module runs. Without
    either: a failure under CI=true, else a skip."""
    if subprocess.run(["docker", "buildx", "version"], capture_output=True).returncode == 0:
        yield None
        return
    folder = os.environ.get("SETUPBOT_TEST_BUILDX_CONFIG", "")
    if not folder:
        if os.environ.get("CI") == "true":
            pytest.fail("no buildx for the BuildKit tests: .ci/run prepares one (SETUPBOT_TEST_BUILDX_CONFIG)")
        pytest.skip("no buildx: source .ci/buildx.sh to get Debian's plugin in a private Docker config folder")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DOCKER_CONFIG", folder)
        yield folder
