"""A pin with no wheel for the newest offered Python (torch 2.2.2 has none for 3.13): the plan
takes the newest older offered Python on which the dependencies resolve, and says why; a failure
that is not about the Python keeps the choice."""

from __future__ import annotations

from pathlib import Path

from bot.compile import plan as plan_mod
from bot.graph.resolve import Resolution

ABI = (
    "  × No solution found when resolving dependencies:\n"
    "  ╰─▶ Because torch==2.2.2 has no wheels with a matching Python ABI tag and you require torch==2.2.2, "
    "we can conclude that your requirements are unsatisfiable.\n"
    "      hint: You require CPython 3.13 (`cp313`), but we only found wheels for `torch` (v2.2.2) with the "
    "following Python ABI tags: `cp38`, `cp39`, `cp310`, `cp311`, `cp312`"
)


def _repo(tmp_path: Path) -> Path:
    (tmp_path / "requirements.txt").write_text("torch==2.2.2\nrequests\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("import torch\n\ndef test_x():\n    assert torch\n")
    return tmp_path


def _fake(fails_on: set[str], error: str = ABI):
    calls: list[str] = []

    def compile_(specs, python, **kw):
        calls.append(python)
        if python in fails_on:
            return Resolution(False, error=error)
        return Resolution(True, {"torch": "2.2.2", "requests": "2.32.3"})

    return compile_, calls


def test_no_wheel_for_the_newest_python_takes_the_newest_older_one_that_resolves(tmp_path, monkeypatch):
    compile_, calls = _fake({"3.13"})
    monkeypatch.setattr(plan_mod, "uv_compile", compile_)
    monkeypatch.setattr(plan_mod, "sdist_only", lambda *a, **k: None)
    p = plan_mod.make_plan(_repo(tmp_path), None, ["3.11", "3.12", "3.13"])
    rt = p.graph.runtime
    assert rt.attrs["version"] == "3.12" and p.graph.meta["resolution"]["ok"]
    assert calls == ["3.13", "3.12"]
    assert "not 3.13" in rt.attrs["reason"] and "cp312" in rt.attrs["reason"]
    assert any(w.message.startswith("Python 3.12 instead of 3.13") for w in p.warnings)
    assert "FROM python:3.12-slim" in p.dockerfile.text


def test_a_failure_that_is_not_about_the_python_keeps_the_choice(tmp_path, monkeypatch):
    conflict = "Because a==1 depends on b<2 and c==1 depends on b>=2, a==1 and c==1 are incompatible."
    compile_, calls = _fake({"3.13"}, conflict)
    monkeypatch.setattr(plan_mod, "uv_compile", compile_)
    p = plan_mod.make_plan(_repo(tmp_path), None, ["3.11", "3.13"])
    assert p.graph.runtime.attrs["version"] == "3.13" and calls == ["3.13"]


def test_no_older_python_resolves_either_keeps_the_first_plan_and_its_warning(tmp_path, monkeypatch):
    compile_, calls = _fake({"3.11", "3.13"})
    monkeypatch.setattr(plan_mod, "uv_compile", compile_)
    p = plan_mod.make_plan(_repo(tmp_path), None, ["3.11", "3.13"])
    assert p.graph.runtime.attrs["version"] == "3.13" and calls == ["3.13", "3.11"]
    assert any("could not resolve the dependencies for Python 3.13" in w.message for w in p.warnings)


def _sdist_world(wheels_for: dict[str, set[str]]):
    """Resolution succeeds everywhere; a distribution in ``wheels_for`` has wheels only for those
    Pythons (none: an sdist only), so the main resolution reports it unbuilt on the others."""
    calls: list[tuple[str, bool]] = []

    def compile_(specs, python, **kw):
        only_binary = bool(kw.get("only_binary"))
        calls.append((python, only_binary))
        names = {s.split("==")[0].split(">")[0].strip().lower() for s in specs}
        if only_binary:
            return Resolution(all(python in wheels_for.get(n, {python}) for n in names))
        unbuilt = sorted(n for n in names if n in wheels_for and python not in wheels_for[n])
        return Resolution(True, {"requests": "2.32.3"}, unbuilt=unbuilt)

    return compile_, calls


def _pinned_repo(tmp_path: Path) -> Path:
    (tmp_path / "requirements.txt").write_text("lxml==4.9.1\ndocopt==0.6.2\nrequests\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("import lxml, docopt\n")
    return tmp_path


def test_a_pin_that_compiles_on_the_newest_python_but_has_a_wheel_for_an_older_one_moves_the_python(
    tmp_path, monkeypatch
):
    """lxml==4.9.1 resolves for 3.13 only as an sdist (its C code predates 3.13) and has a 3.11
    wheel: the plan takes 3.11 and says why; docopt, an sdist for every Python, does not count."""
    compile_, calls = _sdist_world({"lxml": {"3.9", "3.10", "3.11"}, "docopt": set()})
    monkeypatch.setattr(plan_mod, "uv_compile", compile_)
    monkeypatch.setattr(plan_mod, "sdist_only", lambda *a, **k: None)
    p = plan_mod.make_plan(_pinned_repo(tmp_path), None, ["3.10", "3.11", "3.12", "3.13"])
    rt = p.graph.runtime
    assert rt.attrs["version"] == "3.11", rt.attrs
    assert rt.attrs["reason"] == (
        "the newest offered on which the pins install from wheels "
        "(lxml==4.9.1 has a wheel for Python 3.11 and none for 3.13)"
    )
    assert ("3.12", True) in calls and ("3.11", True) in calls  # 3.12 was asked first, and had none
    assert any(w.message.startswith("Python 3.11 instead of 3.13: lxml==4.9.1") for w in p.warnings)
    assert "FROM python:3.11-slim" in p.dockerfile.text
    assert p.graph.meta["available_pythons"] == ["3.10", "3.11", "3.12", "3.13"]


def test_a_pin_with_no_wheel_for_any_python_keeps_the_newest(tmp_path, monkeypatch):
    compile_, calls = _sdist_world({"docopt": set(), "lxml": {"3.9", "3.10", "3.11", "3.12", "3.13"}})
    monkeypatch.setattr(plan_mod, "uv_compile", compile_)
    monkeypatch.setattr(plan_mod, "sdist_only", lambda *a, **k: None)
    p = plan_mod.make_plan(_pinned_repo(tmp_path), None, ["3.11", "3.12", "3.13"])
    assert p.graph.runtime.attrs["version"] == "3.13"
    # asked about docopt on at most three older Pythons, and planned nothing again
    assert [c for c in calls if not c[1]] == [("3.13", False)]
    assert not any("instead of 3.13" in w.message for w in p.warnings)


def test_a_dependency_of_a_dependency_with_no_wheel_for_this_python_tries_an_older_one(tmp_path, monkeypatch):
    """uv's --no-build resolution fails on a transitive sdist-only distribution (chroma-hnswlib
    has no cp313 wheel): the newest older Python on which everything resolves from wheels."""
    no_build = (
        "  × No solution found when resolving dependencies:\n"
        "  ╰─▶ Because chroma-hnswlib==0.7.6 has no usable wheels and chromadb==0.5.5 depends on "
        "chroma-hnswlib==0.7.6, we can conclude that chromadb==0.5.5 cannot be used.\n"
        "      hint: Wheels are required for `chroma-hnswlib` because building from source is disabled "
        "for all packages (i.e., with `--no-build`)"
    )
    compile_, calls = _fake({"3.13"}, no_build)
    monkeypatch.setattr(plan_mod, "uv_compile", compile_)
    monkeypatch.setattr(plan_mod, "sdist_only", lambda *a, **k: None)
    p = plan_mod.make_plan(_repo(tmp_path), None, ["3.11", "3.13"])
    assert p.graph.runtime.attrs["version"] == "3.11" and calls == ["3.13", "3.11"]
    assert any("Wheels are required for `chroma-hnswlib`" in w.message for w in p.warnings)
