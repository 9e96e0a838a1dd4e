"""The declared and pipreqs baselines: what they read and the Dockerfile they render."""

from __future__ import annotations

import json
import re
import sys
import textwrap

from bot.bench.baselines import (
    declared_extras,
    find_requirement_files,
    is_installable_project,
    parse_pipreqs_output,
    produce_declared,
    produce_pipreqs,
    render_baseline,
)


def _run_lines(dockerfile: str) -> list[list[str]]:
    """The exec-form RUN instructions as argv lists."""
    return [json.loads(line[4:]) for line in dockerfile.splitlines() if line.startswith("RUN ")]


def test_declared_installs_requirement_files_then_project_with_test_extras(tmp_path):
    (tmp_path / "requirements.txt").write_text("requests\n")
    (tmp_path / "requirements-dev.txt").write_text("-r requirements.txt\npytest-cov\n")
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "test.txt").write_text("hypothesis\n")
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent("""
        [build-system]
        requires = ["setuptools"]
        [project]
        name = "demo"
        version = "1"
        [project.optional-dependencies]
        Testing = ["pytest"]
        docs = ["sphinx"]
        dev = ["ruff"]
    """)
    )
    produced = produce_declared(tmp_path)
    assert produced.ok
    runs = _run_lines(produced.dockerfile)
    assert runs == [
        ["python", "-m", "pip", "install", "--no-cache-dir", "-r", "requirements-dev.txt"],
        ["python", "-m", "pip", "install", "--no-cache-dir", "-r", "requirements.txt"],
        ["python", "-m", "pip", "install", "--no-cache-dir", "-r", "requirements/test.txt"],
        ["python", "-m", "pip", "install", "--no-cache-dir", "-e", ".[Testing,dev]"],
        ["python", "-m", "pip", "install", "--no-cache-dir", "pytest"],
    ]
    assert "FROM python:3.11-slim" in produced.dockerfile
    assert produced.details["extras"] == ["Testing", "dev"]


def test_extras_from_setup_cfg_setup_py_and_poetry(tmp_path):
    (tmp_path / "setup.cfg").write_text("[options.extras_require]\ntest =\n  pytest\nyaml = pyyaml\n")
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\nsetup(extras_require=dict(tests=['x'], speed=['y']))\n"
    )
    extras, warnings = declared_extras(tmp_path)
    assert extras == {"test", "yaml", "tests", "speed"} and warnings == []
    poetry = tmp_path / "p"
    poetry.mkdir()
    (poetry / "pyproject.toml").write_text("[tool.poetry]\nname='x'\n[tool.poetry.extras]\ntesting=['a']\n")
    assert declared_extras(poetry)[0] == {"testing"}
    assert is_installable_project(poetry)


def test_tool_only_pyproject_is_not_installed_and_bad_toml_is_a_warning(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.black]\nline-length = 100\n")
    assert not is_installable_project(tmp_path)
    produced = produce_declared(tmp_path)
    assert [r[-1] for r in _run_lines(produced.dockerfile)] == ["pytest"]
    (tmp_path / "pyproject.toml").write_text("[project\nname=")
    extras, warnings = declared_extras(tmp_path)
    assert extras == set() and warnings and warnings[0].startswith("pyproject.toml")


def test_requirement_dir_symlink_is_ignored(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.txt").write_text("x\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "requirements").symlink_to(elsewhere)
    assert find_requirement_files(repo) == []


def test_pipreqs_names_go_to_pip_as_quoted_argv_only_when_well_formed():
    packages, dropped = parse_pipreqs_output("numpy\nPyYAML==6.0\nrequests[socks]\n\n$(touch /tmp/pwned)\nnumpy\n")
    assert packages == ["numpy", "PyYAML", "requests[socks]"]
    assert dropped == ["$(touch /tmp/pwned)"]
    text = render_baseline("pipreqs", packages=['a"b', "numpy"])
    run = _run_lines(text)[0]
    assert run[-2:] == ['a"b', "numpy"]  # JSON-quoted: no shell ever sees it


def test_pipreqs_failure_is_a_result_with_the_reason(tmp_path, monkeypatch):
    # A stand-in executable that fails like pipreqs does on a syntax error in the repository.
    fake = tmp_path / "bin" / "pipreqs"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport sys\nprint('SyntaxError: bad file', file=sys.stderr)\nsys.exit(1)\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{__import__('os').environ['PATH']}")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    produced = produce_pipreqs(tmp_path, scratch, timeout=30)
    assert not produced.ok and re.search(r"exited 1: .*SyntaxError", produced.reason)


def test_pipreqs_success_renders_the_inferred_packages(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "pipreqs"
    fake.parent.mkdir()
    # Writes what pipreqs writes to --savepath.
    fake.write_text(
        f"#!{sys.executable}\nimport sys\na = sys.argv\n"
        "open(a[a.index('--savepath') + 1], 'w').write('numpy\\nPyYAML\\n')\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{__import__('os').environ['PATH']}")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    produced = produce_pipreqs(tmp_path, scratch, timeout=30)
    assert produced.ok, produced.reason
    assert _run_lines(produced.dockerfile)[0][-2:] == ["numpy", "PyYAML"]
    assert "-e" not in produced.dockerfile


def test_pipreqs_asks_its_own_default_index_unless_given_one(tmp_path):
    from bot.bench.baselines import _pipreqs_argv

    argv = _pipreqs_argv(tmp_path, tmp_path / "r.txt", None)
    assert "--pypi-server" not in argv and argv[-1] == str(tmp_path)
    argv = _pipreqs_argv(tmp_path, tmp_path / "r.txt", "http://127.0.0.1:9/pypi/")
    assert argv[argv.index("--pypi-server") + 1] == "http://127.0.0.1:9/pypi/"
