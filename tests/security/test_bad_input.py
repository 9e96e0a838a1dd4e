"""Bad input (SECURITY.md, last item; P4): every case in tests/fixtures/bad-input gets a clear
message naming the file, the plan is still produced, and nothing crashes. No engine: the plan
runs without resolution and with the Pythons given."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from bot.compile.plan import make_plan
from bot.config import load_settings

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "bad-input"
PYTHONS = ["3.11", "3.13"]

# case -> the files a warning must name (empty: the case needs no warning, only a plan)
EXPECTED = {
    "malformed-pyproject": ["pyproject.toml"],
    "malformed-setup-cfg": ["setup.cfg"],
    "malformed-requirements": ["requirements.txt", "missing-include.txt"],
    "malformed-workflow": [".github/workflows/ci.yml"],
    "malformed-compose": ["docker-compose.yml"],
    "malformed-json": ["Pipfile.lock"],
    "malformed-tox": ["tox.ini"],
    "wrong-types": ["pyproject.toml"],
    "binary-manifests": ["pyproject.toml", "requirements.txt", "setup.py", "Pipfile.lock"],
    "non-utf8": ["requirements.txt", "setup.cfg", "pyproject.toml"],
    "yaml-bomb": ["docker-compose.yml"],
    "empty-files": ["setup.py"],
    "no-manifest": ["."],
    "no-tests": ["."],
}


def _plan(repo: Path):
    started = time.monotonic()
    plan = make_plan(repo, load_settings(None), available_pythons=PYTHONS, resolve=False)
    return plan, time.monotonic() - started


def _assert_usable(plan, seconds: float) -> None:
    assert plan.dockerfile.text.lstrip().startswith("#") and "\nFROM python:3." in plan.dockerfile.text
    assert plan.python in PYTHONS
    assert plan.test_command
    assert seconds < 30
    for w in plan.warnings:
        # a scanner that raised is caught by scan_repository; for bad input that is a crash
        assert "scanner failed" not in str(w), str(w)


def test_corpus_has_every_case():
    assert sorted(p.name for p in CORPUS.iterdir() if p.is_dir()) == sorted(EXPECTED)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_bad_input_gets_a_warning_naming_the_file_and_a_plan(case, tmp_path):
    repo = tmp_path / case
    shutil.copytree(CORPUS / case, repo, symlinks=True)
    plan, seconds = _plan(repo)
    _assert_usable(plan, seconds)
    named = {w.file for w in plan.warnings}
    for file in EXPECTED[case]:
        assert file in named, f"no warning names {file}: {[str(w) for w in plan.warnings]}"
    for w in plan.warnings:
        assert w.message.strip(), w


def test_symlinks_out_of_the_repository_are_never_followed(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(CORPUS / "no-tests", repo)
    outside = tmp_path / "outside.toml"
    outside.write_text('[project]\nname = "stolen"\ndependencies = ["exfiltrated-package"]\n')
    os.symlink("/etc/shadow", repo / "requirements.txt")
    os.symlink("/etc/passwd", repo / "requirements-dev.txt")
    (repo / "pyproject.toml").unlink()
    os.symlink(outside, repo / "pyproject.toml")
    os.symlink("/", repo / "tests")  # a directory link: the import walk must not leave
    os.symlink("../../..", repo / "up")
    plan, seconds = _plan(repo)
    _assert_usable(plan, seconds)
    messages = [str(w) for w in plan.warnings]
    for name in ("requirements.txt", "requirements-dev.txt", "pyproject.toml"):
        assert any(m.startswith(name) and "outside the repository" in m for m in messages), messages
    text = plan.dockerfile.text + str(plan.graph.to_json())
    assert "exfiltrated-package" not in text and "/bin/bash" not in text and "root:x:0" not in text


def test_a_10_mb_readme_is_skipped_and_capped_before_any_prompt(tmp_path):
    from bot.loop.llm import PROMPT_CAP, README_CAP, _readme, build_messages

    repo = tmp_path / "repo"
    shutil.copytree(CORPUS / "no-tests", repo)
    line = "Run `pip install huge-readme-package` then `pytest`. " * 4 + "\n"
    with open(repo / "README.md", "w") as fh:
        while fh.tell() < 10 * 1024 * 1024:
            fh.write(line)
    plan, seconds = _plan(repo)
    _assert_usable(plan, seconds)
    assert any(w.file == "README.md" and "larger than" in w.message for w in plan.warnings), [
        str(w) for w in plan.warnings
    ]
    # P4: what the planner would send is bounded, whatever the size of the README or the log
    readme = _readme(repo)
    assert len(readme) <= 2 * README_CAP
    messages = build_messages({"log": "x" * (10 * 1024 * 1024), "readme": readme})
    assert sum(len(m["content"]) for m in messages) < PROMPT_CAP + README_CAP + 5_000


def test_plan_command_reports_and_goes_on(tmp_path, capsys):
    """The user-facing path: `setupbot plan` on a broken repository exits 0 and prints the warning."""
    from bot.cli import main

    repo = tmp_path / "repo"
    shutil.copytree(CORPUS / "malformed-pyproject", repo)
    code = main(["plan", str(repo), "--no-resolve"]) if _has_no_resolve() else main(["plan", str(repo)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "pyproject.toml" in out.out + out.err and "malformed TOML" in out.out + out.err


def _has_no_resolve() -> bool:
    from bot.cli import build_parser

    return "--no-resolve" in build_parser()._subparsers._group_actions[0].choices["plan"].format_help()
