"""The plan's resolution completed in a container (bot.loop.inimage): what the container prints
is read as data, and only a wheel tagged none-any counts as pure Python."""

from __future__ import annotations

import json

import pytest

from bot.engine.results import ExecResult
from bot.errors import SetupbotError
from bot.loop.inimage import is_pure_wheel, parse_pins, read_marked, resolve_in_image


def test_pins_are_name_and_version_lines_and_nothing_else():
    compiled = "\n".join(
        [
            "requests==2.31.0",
            "PyYAML==6.0.1 ; python_version >= '3.8'",
            "uvicorn[standard]==0.30.0",
            "--index-url https://example.invalid/simple",
            "evil @ https://example.invalid/evil.whl",
            "bad==not a version",
            "../../etc==1.0",
            "# a comment==1.0",
        ]
    )
    assert parse_pins(compiled) == {"requests": "2.31.0", "pyyaml": "6.0.1", "uvicorn": "0.30.0"}


def test_a_set_too_large_to_be_one_is_refused():
    with pytest.raises(SetupbotError, match="more than"):
        parse_pins("\n".join(f"p{i}==1.0" for i in range(2500)))


@pytest.mark.parametrize(
    ("name", "pure"),
    [
        ("flashtext-2.7-py3-none-any.whl", True),
        ("six-1.16.0-py2.py3-none-any.whl", True),
        ("PyYAML-6.0.1-cp311-cp311-linux_x86_64.whl", False),
        ("thing-1.0-py3-abi3-any.whl", False),
        ("thing-1.0.tar.gz", False),
    ],
)
def test_only_a_none_any_wheel_is_pure(name, pure):
    assert is_pure_wheel(name) is pure


@pytest.mark.parametrize(
    "output", ["no mark at all", "SETUPBOT-RESOLVED:{not json", 'SETUPBOT-RESOLVED:["a list"]'], ids=str
)
def test_output_without_a_readable_result_is_an_error(output):
    assert "error" in read_marked(output)


class _Session:
    def __init__(self, *answers: dict | str, timed_out: bool = False) -> None:
        self.answers, self.timed_out = list(answers), timed_out
        self.specs: list[dict] = []

    def exec(self, argv, env=None, timeout=None):
        self.specs.append(json.loads(env["SETUPBOT_RESOLVE"]))
        answer = self.answers.pop(0)
        text = answer if isinstance(answer, str) else "SETUPBOT-RESOLVED:" + json.dumps(answer)
        return ExecResult(list(argv), 0, text, 1.0, timed_out=self.timed_out)


def test_a_set_whose_wheel_less_pins_build_pure_is_complete():
    s = _Session({"compiled": "a==1.0\nb==2.0\n"}, {"wheels": {"b": {"files": ["b-2.0-py3-none-any.whl"]}}})
    got = resolve_in_image(s, ["a", "b>=2"], ["a<2"], wheel_less=lambda pins: ["b"])
    assert got.ok and got.pins == {"a": "1.0", "b": "2.0"} and got.pure == ["b"]
    assert s.specs[0] == {"mode": "compile", "requirements": ["a", "b>=2"], "constraints": ["a<2"]}
    assert s.specs[1] == {"mode": "build", "build": [["b", "2.0"]]}


def test_with_every_pin_on_a_wheel_nothing_is_built():
    s = _Session({"compiled": "a==1.0\n"})
    got = resolve_in_image(s, ["a"], [], wheel_less=lambda pins: [])
    assert got.ok and len(s.specs) == 1


@pytest.mark.parametrize(
    ("answers", "wheel_less", "why"),
    [
        (({"error": "uv pip compile: No solution found"},), [], "No solution found"),
        (({"compiled": "# nothing\n"},), [], "named no distribution"),
        (({"compiled": "a==1.0\n"},), None, "could not be told"),
    ],
)
def test_a_resolution_that_does_not_complete_says_why(answers, wheel_less, why):
    got = resolve_in_image(_Session(*answers), ["a"], [], wheel_less=lambda pins: wheel_less)
    assert not got.ok and why in got.error


def test_a_container_that_runs_out_of_time_is_an_error():
    got = resolve_in_image(_Session("", timed_out=True), ["a"], [], wheel_less=lambda pins: [], timeout=5)
    assert not got.ok and "timed out after 5s" in got.error


@pytest.mark.parametrize(
    ("files", "why"),
    [(["b-2.0-cp311-cp311-linux_x86_64.whl"], "built for this platform"), ([], "did not build")],
)
def test_a_wheel_less_pin_that_is_not_pure_python_keeps_the_set_incomplete(files, why):
    s = _Session({"compiled": "a==1.0\nb==2.0\n"}, {"wheels": {"b": {"files": files, "error": "gcc: not found"}}})
    got = resolve_in_image(s, ["a", "b"], [], wheel_less=lambda pins: ["b"])
    assert not got.ok and why in got.not_pure["b"]


def test_only_a_resolution_that_says_something_of_its_inputs_is_kept(monkeypatch, tmp_path):
    from bot.loop.inimage import InImageResolution, cache_key, load_cached, store

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    key = cache_key(["a"], [], "3.11", "sha256:1", [])
    assert key != cache_key(["a"], [], "3.11", "sha256:2", [])  # the base image is an input
    store(key, InImageResolution(error="timed out after 300s"))
    assert load_cached(key) is None
    store(key, InImageResolution(pins={"a": "1.0", "b": "2.0"}, not_pure={"b": "it did not build"}))
    got = load_cached(key)
    assert got is not None and got.pins == {"a": "1.0", "b": "2.0"} and not got.ok and "b" in got.not_pure
    (tmp_path / "setupbot" / "resolutions" / f"{key}.json").write_text("{not json")
    assert load_cached(key) is None


def test_a_resolution_in_a_container_expires_with_the_hosts_resolutions(monkeypatch, tmp_path):
    """One reader and writer keep both kinds of resolution: the same folder, the same day."""
    from bot.graph import resolve
    from bot.loop.inimage import InImageResolution, cache_key, load_cached, store

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    key = cache_key(["a"], [], "3.11", "sha256:1", [])
    store(key, InImageResolution(pins={"a": "1.0"}, pure=["a"]))
    assert list((tmp_path / "setupbot" / "resolutions").iterdir()) == [
        tmp_path / "setupbot" / "resolutions" / f"{key}.json"
    ]
    got = load_cached(key)
    assert got is not None and got.pins == {"a": "1.0"} and got.pure == ["a"]
    monkeypatch.setattr(resolve, "CACHE_SECONDS", -1)  # a day has gone by
    assert load_cached(key) is None
    (tmp_path / "setupbot" / "resolutions" / f"{key}.json").write_text('["a list, not an entry"]')
    monkeypatch.setattr(resolve, "CACHE_SECONDS", 3600)
    assert load_cached(key) is None
