"""Each charge the prosecutor can bring, against real commands run by a local interpreter on
small projects written into tmp_path (the container version runs the same commands)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

from bot.junit import TestResults, parse_junit
from bot.verify.facts import CoreRequirement, RepoFacts
from bot.verify.prosecutor import LocalExecutor, check_entry_points, check_imports, check_pip, check_test_run, prosecute


def _executor(tmp_path: Path, extra_path: Path | None = None) -> LocalExecutor:
    env = dict(os.environ)
    env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (tmp_path, extra_path) if p)
    (tmp_path / "bin").mkdir(exist_ok=True)
    return LocalExecutor(tmp_path, env)


def _script(tmp_path: Path, name: str, body: str) -> None:
    path = tmp_path / "bin" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)


def test_core_dependency_that_does_not_import_is_charged(tmp_path):
    (tmp_path / "brokendep").mkdir()
    (tmp_path / "brokendep" / "__init__.py").write_text("import module_that_is_not_there_xyz\n")
    (tmp_path / "brokendep-1.0.dist-info").mkdir()
    (tmp_path / "brokendep-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: brokendep\nVersion: 1.0\n"
    )
    (tmp_path / "brokendep-1.0.dist-info" / "top_level.txt").write_text("brokendep\n")
    (tmp_path / "brokendep-1.0.dist-info" / "RECORD").write_text("brokendep/__init__.py,,\n")
    facts = RepoFacts(
        core=[
            CoreRequirement("brokendep"),
            CoreRequirement("packaging"),
            CoreRequirement("not-installed-dist-xyz"),
            CoreRequirement("never-on-this-python", 'python_version < "3.0"'),
        ]
    )
    charges, summary = check_imports(_executor(tmp_path), facts, sys.executable)
    by_subject = {c.subject: c for c in charges}
    assert set(by_subject) == {"brokendep", "not-installed-dist-xyz"}
    assert "module_that_is_not_there_xyz" in by_subject["brokendep"].evidence
    assert by_subject["brokendep"].command == [sys.executable, "-c", "import brokendep"]
    assert "not installed" in by_subject["not-installed-dist-xyz"].evidence
    assert summary["failed"] == 2


def test_the_project_itself_not_importing_is_critical(tmp_path):
    (tmp_path / "myproj").mkdir()
    (tmp_path / "myproj" / "__init__.py").write_text("raise RuntimeError('needs config')\n")
    charges, _ = check_imports(_executor(tmp_path), RepoFacts(own_modules=["myproj"]), sys.executable)
    assert len(charges) == 1 and charges[0].severity == "critical" and charges[0].details["own"]
    assert "needs config" in charges[0].evidence


def test_console_script_and_readme_command_must_launch_with_help(tmp_path):
    _script(tmp_path, "good-tool", "import sys; print('usage'); sys.exit(0)\n")
    _script(tmp_path, "bad-tool", "import yaml_missing_xyz\n")
    (tmp_path / "pkgcli").mkdir()
    (tmp_path / "pkgcli" / "__init__.py").write_text("")
    (tmp_path / "pkgcli" / "__main__.py").write_text("import sys; sys.exit(3)\n")
    facts = RepoFacts(
        console_scripts={"good-tool": "x:main", "bad-tool": "y:main", "missing-tool": "z:main"},
        readme_commands=[["python", "-m", "pkgcli"]],
    )
    charges, summary = check_entry_points(_executor(tmp_path), facts, sys.executable)
    subjects = {c.subject for c in charges}
    assert subjects == {"bad-tool", "missing-tool", "python -m pkgcli"}
    bad = next(c for c in charges if c.subject == "bad-tool")
    assert bad.command == ["bad-tool", "--help"] and "yaml_missing_xyz" in bad.evidence
    assert summary == {"checked": 4, "failed": 3}


def test_pip_check_not_clean_is_charged(tmp_path):
    info = tmp_path / "needy-1.0.dist-info"
    info.mkdir()
    info.joinpath("METADATA").write_text(
        "Metadata-Version: 2.1\nName: needy\nVersion: 1.0\nRequires-Dist: absent-dist-for-pip-check-xyz>=1\n"
    )
    charges, summary = check_pip(_executor(tmp_path), sys.executable)
    assert charges and charges[0].kind == "pip_check"
    assert any("absent-dist-for-pip-check-xyz" in p for p in charges[0].details["problems"])
    assert summary["clean"] is False


JUNIT = """<?xml version="1.0"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_ok"/>
<testcase classname="tests.test_a" name="test_skip"><skipped message="needs network access"/></testcase>
<testcase classname="tests.test_a" name="test_bad"><failure message="AssertionError: 1 != 2">...</failure></testcase>
</testsuite></testsuites>"""


def test_lifecycle_charges():
    assert check_test_run(None)[0][0].kind == "lifecycle_incomplete"
    no_junit = TestResults(junit_found=False, exit_code=1)
    assert [c.kind for c in check_test_run(no_junit)[0]] == ["lifecycle_incomplete"]
    crashed = parse_junit(JUNIT)
    crashed.exit_code = 3
    kinds = [c.kind for c in check_test_run(crashed)[0]]
    assert "lifecycle_incomplete" in kinds
    timed_out = parse_junit(JUNIT)
    timed_out.timed_out, timed_out.exit_code = True, 137
    charge = check_test_run(timed_out)[0][0]
    assert charge.kind == "lifecycle_incomplete" and "timed out" in charge.evidence


def test_no_tests_and_all_skipped_and_failures():
    empty = parse_junit('<testsuites><testsuite name="pytest"/></testsuites>')
    empty.exit_code = 5
    assert [c.kind for c in check_test_run(empty)[0]] == ["no_tests"]
    skipped = parse_junit(
        '<testsuite><testcase classname="t" name="a"><skipped message="no db"/></testcase></testsuite>'
    )
    assert [c.kind for c in check_test_run(skipped)[0]] == ["all_skipped"]
    normal = parse_junit(JUNIT)
    normal.exit_code = 1
    charges, summary = check_test_run(normal)
    assert [c.kind for c in charges] == ["tests_failed"]
    assert charges[0].details["tests"] == ["tests.test_a::test_bad"]
    assert summary["passed"] == 1 and summary["skipped"] == 1


def test_clean_environment_has_no_charges(tmp_path):
    _script(tmp_path, "fine", "print('usage: fine')\n")
    (tmp_path / "okproj").mkdir()
    (tmp_path / "okproj" / "__init__.py").write_text("VALUE = 1\n")
    facts = RepoFacts(core=[CoreRequirement("packaging")], own_modules=["okproj"], console_scripts={"fine": "x:y"})
    results = parse_junit('<testsuite><testcase classname="t" name="a"/></testsuite>')
    prosecution = prosecute(
        _executor(tmp_path), facts, results, python=sys.executable, checks=("imports", "entry_points", "tests")
    )
    assert prosecution.charges == []
    assert prosecution.checks["imports"]["checked"] == 2


def test_a_poetry_dependency_for_older_pythons_only_keeps_its_marker(tmp_path):
    """proselint declares importlib-resources = { version = "^6.0", python = "<3.9" }: on a
    3.11 image it is not installed, and the prosecutor must not charge it as a core import."""
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [tool.poetry]
            name = "proselint"
            [tool.poetry.dependencies]
            python = "^3.8.1"
            click = "^8.0.0"
            importlib-resources = { version = "^6.0", python = "<3.9" }
            tomli = { version = "*", markers = "python_version < '3.11'" }
            """
        )
    )
    facts = RepoFacts.from_repo(tmp_path)
    markers = {c.name: c.marker for c in facts.core}
    assert markers["click"] == ""
    assert markers["importlib-resources"] == 'python_version < "3.9"'
    assert markers["tomli"] == 'python_version < "3.11"'
    charges, _ = check_imports(_executor(tmp_path), RepoFacts(core=facts.core[1:]), sys.executable)
    assert [c.subject for c in charges] == []  # neither is for this Python
