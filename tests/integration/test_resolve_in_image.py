"""The plan's resolution completed in a real container on the base image (bot.loop.inimage):
uv resolves there what the host may not build, and each pin with no wheel on the index is built
there alone. flashtext has only an sdist and is pure Python; mysqlclient has only an sdist
that needs a compiler and a client library the base image lacks."""

from __future__ import annotations

import pytest

from bot.config import load_settings
from bot.engine import Engine
from bot.graph.resolve import wheel_less
from bot.loop.inimage import resolve_in_image

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture
def engine(docker_available):
    e = Engine.from_settings(load_settings(None))
    yield e
    e.clean(e.run_id)


def test_an_sdist_only_pure_python_pin_is_resolved_and_built_pure(engine):
    with engine.session("python:3.11-slim", name_hint="resolve") as session:
        got = resolve_in_image(
            session, ["flashtext==2.7", "six>=1.16"], [], wheel_less=lambda pins: wheel_less(pins, "3.11")
        )
    assert got.error == "" and got.not_pure == {}
    assert got.pins["flashtext"] == "2.7" and "six" in got.pins
    assert got.pure == ["flashtext"] and got.ok


def test_an_sdist_only_pin_that_needs_a_compiler_is_not_pure(engine):
    with engine.session("python:3.11-slim", name_hint="resolve") as session:
        got = resolve_in_image(session, ["mysqlclient==2.2.4"], [], wheel_less=lambda pins: wheel_less(pins, "3.11"))
    assert got.pins == {"mysqlclient": "2.2.4"}
    assert list(got.not_pure) == ["mysqlclient"] and not got.ok
    assert "did not build on the base image" in got.not_pure["mysqlclient"]
