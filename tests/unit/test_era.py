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


def test_a_named_distribution_gets_its_own_release_of_the_date_before_the_sets_pin(monkeypatch):
    """dishka at its December 2024 commit: faststream.broker is gone from faststream 0.7. The era
    set, resolved on the host where nothing is built, held faststream[nats] at 0.1.6 (2023),
    because nats-py has only an sdist; faststream's own release of that date is 0.5.33. That
    comes first, and the set's pin stays as the next candidate."""
    import bot.graph.era as era_mod
    from bot.loop.era import _named_era_pins

    asked = []

    def alone(requirements, python, **kw):
        asked.append((tuple(requirements), python, kw.get("exclude_newer"), kw.get("no_deps")))
        return Resolution(True, {"faststream": "0.5.33"})

    monkeypatch.setattr(era_mod, "uv_compile", alone)
    era = Era(
        date="2024-12-06T14:56:26Z",
        source="target.as_of",
        python="3.13",
        resolution=Resolution(True, {"faststream": "0.1.6"}),
    )
    cands = _named_era_pins(era, "faststream", "0.1.6", "0.7.8")
    assert [c.describe() for c in cands] == ["pip_constraint faststream==0.5.33", "pip_constraint faststream==0.1.6"]
    assert (
        cands[0].why
        == "faststream 0.5.33 was its newest release on 2024-12-06 (target.as_of); 0.7.8 is newer than the repository"
    )
    assert "with the rest of the requirements as of 2024-12-06" in cands[1].why
    assert asked == [(("faststream",), "3.13", "2024-12-06T14:56:26Z", True)]
    era.release_of("FastStream")  # asked once per distribution
    assert len(asked) == 1
    # the two agree: one candidate, worded as before
    same = _named_era_pins(era, "faststream", "0.5.33", "0.7.8")
    assert [c.why for c in same] == [
        "faststream 0.5.33 was current on 2024-12-06 (target.as_of); 0.7.8 is newer than the repository"
    ]
    # installed at its own release already: only the set's pin is left to try
    assert [c.describe() for c in _named_era_pins(era, "faststream", "0.1.6", "0.5.33")] == [
        "pip_constraint faststream==0.1.6"
    ]
    # a partial era (each requirement resolved alone) asks nothing more
    partial = Era(date="d", python="3.13", resolution=Resolution(True, {"six": "1.16.0"}), partial=True)
    assert partial.release_of("six") == "1.16.0" and len(asked) == 1


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
def test_a_distributions_own_release_of_a_date_against_pypi():
    """faststream's newest release before 2024-12-06T14:56Z with a wheel for Python 3.13 is
    0.5.33 (uploaded 2024-12-05; 0.5.34 came in January 2025)."""
    era = Era(date="2024-12-06T14:56:26Z", python="3.13", resolution=Resolution(True, {"faststream": "0.1.6"}))
    assert era.release_of("faststream") == "0.5.33"


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
def test_resolve_era_against_pypi():
    """A real resolution: attrs as of 2021-01-01 is 20.3.0 (released 2020-11-05; 21.1.0 came
    in May 2021)."""
    era = resolve_era(["attrs"], "3.11", "2021-01-01T00:00:00Z", "test")
    if era.resolution is not None and not era.resolution.ok and "connect" in era.resolution.error.lower():
        pytest.skip(f"PyPI is not reachable: {era.resolution.error[:200]}")
    assert era.pins == {"attrs": "20.3.0"}
    assert resolve_era([], "3.11", "2021-01-01T00:00:00Z").resolution is None
