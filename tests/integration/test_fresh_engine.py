"""A fresh engine with neither images nor a registry: `setupbot run` stops with a clear error
that names the fix, not a traceback (the second daemon of tests/doubles/engines.py has an empty
store; images.registry points at a port where nothing listens)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from doubles.engines import Unavailable, free_port, fresh_engine

# A second Docker daemon each: one worker runs them one after the other (and the action run and
# the Dev Containers client share the session's `runner_world` there).
pytestmark = pytest.mark.xdist_group("second-dockerd")
ROOT = Path(__file__).resolve().parents[2]


def test_empty_store_and_no_registry_is_a_clear_error(tmp_path, docker_available):
    try:
        with fresh_engine(tmp_path / "engine") as engine_env:
            repo = tmp_path / "hello-app"
            shutil.copytree(ROOT / "examples" / "hello-app", repo)
            env = {
                **os.environ,
                **engine_env,
                "SETUPBOT_IMAGES_REGISTRY": f"127.0.0.1:{free_port()}",
                "SETUPBOT_IMAGES_SOURCE": "auto",
                "HOME": str(tmp_path),
            }
            r = subprocess.run(
                [sys.executable, "-m", "bot", "run", str(repo)],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                cwd=ROOT,
            )
    except Unavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    out = r.stdout + r.stderr
    assert r.returncode == 6, out[-3000:]
    assert "Traceback" not in out
    assert "does not answer" in out  # said once, plainly
    assert out.count("does not answer") == 1
    assert "setupbot images bootstrap" in out  # the fix
    assert not (repo / ".devcontainer").exists()
