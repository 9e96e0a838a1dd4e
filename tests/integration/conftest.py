"""Integration tests use the real container engine. Every test here is marked `docker`;
they skip (with a reason) when no engine answers, and CI always has one."""

from __future__ import annotations

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
        pytest.skip("no container engine answers `docker info`")
    return True
