"""Security tests (SECURITY.md). Engine-using tests carry @pytest.mark.docker explicitly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# tests/ for the doubles, this folder for sec_helpers
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def docker_available() -> bool:
    try:
        ok = subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        pytest.skip("no container engine answers `docker info`")
    return True
