"""Unit tests cannot start a container by accident: the engine refuses inside them."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from bot.config import load_settings


def test_engine_calls_are_refused_in_unit_tests():
    if not shutil.which("docker"):
        pytest.skip("no docker CLI on PATH: nothing to guard")
    from bot.engine import Engine

    engine = Engine.from_settings(load_settings(None, environ={}))  # construction touches nothing
    with pytest.raises(RuntimeError, match="unit tests must not use the container engine"):
        engine.ping()
    with pytest.raises(RuntimeError):
        engine.client.container.list()
    with pytest.raises(RuntimeError):
        subprocess.run(["docker", "ps"])
