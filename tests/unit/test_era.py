"""The repository's era: reference dates and resolution with --exclude-newer."""

from __future__ import annotations

import shutil
import subprocess
from types import SimpleNamespace

import pytest

from bot.graph.era import Era, normalise_date, reference_date, resolve_era
from bot.graph.resolve import Resolution


def test_normalise_date():
    assert normalise_date("2024-05-21T22:07:21+02:00") == "2024-05-21T20:07:21Z"
    assert normalise_date("2024-11-29T16:55:57Z") == "2024-11-29T16:55:57Z"
    assert normalise_date("2024-03-09") == "2024-03-09T23:59:59Z"
    assert normalise_date("last tuesday") == ""
    assert normalise_date("") == ""


def _settings(as_of=""):
    return SimpleNamespace(target=SimpleNamespace(as_of=as_of))


def test_reference_date_prefers_the_setting_then_the_commit(tmp_path):
    assert reference_date(tmp_path, _settings()) == ("", "")
    assert reference_date(tmp_path, _settings("2023-01-02")) == ("2023-01-02T23:59:59Z", "target.as_of")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    env = {
        "GIT_AUTHOR_DATE": "2022-06-01T10:00:00+00:00",
        "GIT_COMMITTER_DATE": "2022-06-01T10:00:00+00:00",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "PATH": "/usr/bin:/bin",
    }
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, env=env)
    (tmp_path / "f").write_text("x")
    subprocess.run(["git", "-C", str(tmp_path), "add", "f"], check=True, env=env)
    subprocess.run(["git", "-C", str(tmp_path), "commit", "-qm", "c"], check=True, env=env)
    assert reference_date(tmp_path, _settings()) == ("2022-06-01T10:00:00Z", "the commit date of HEAD")
    assert reference_date(tmp_path, _settings("2021-01-01"))[1] == "target.as_of"


def test_drifted_compares_with_current_pins():
    era = Era(date="2024-01-01T00:00:00Z", resolution=Resolution(True, {"attrs": "23.1.0", "six": "1.16.0"}))
    assert era.drifted({"attrs": "25.3.0", "six": "1.16.0"}) == {"attrs": "23.1.0"}
    assert era.drifted({}) == {"attrs": "23.1.0", "six": "1.16.0"}
    assert era.version_of("Attrs") == "23.1.0"
    assert Era(date="x", resolution=Resolution(False, error="boom")).pins == {}


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
def test_resolve_era_against_pypi():
    """A real resolution: attrs as of 2021-01-01 is 20.3.0 (released 2020-11-05; 21.1.0 came
    in May 2021)."""
    era = resolve_era(["attrs"], "3.11", "2021-01-01T00:00:00Z", "test")
    if era.resolution is not None and not era.resolution.ok and "connect" in era.resolution.error.lower():
        pytest.skip(f"PyPI is not reachable: {era.resolution.error[:200]}")
    assert era.pins == {"attrs": "20.3.0"}
    assert resolve_era([], "3.11", "2021-01-01T00:00:00Z").resolution is None
