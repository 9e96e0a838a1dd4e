"""S5/S12 for the action itself: the job that holds the write token installs setupbot's
dependencies only from a lock with hashes, and zizmor and actionlint find nothing in the action
and the workflows."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
CI = os.environ.get("CI") == "true"  # in CI a missing linter fails the test instead of skipping it
LOCK = ROOT / "requirements" / "action.txt"
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def _locked() -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) from the lock."""
    out: dict[str, tuple[str, list[str]]] = {}
    text = LOCK.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)(.*)$", line.strip())
        if m:
            out[canonicalize_name(m.group(1))] = (m.group(2), re.findall(r"--hash=sha256:([0-9a-f]{64})", m.group(3)))
    return out


def _install_script() -> str:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    step = next(s for s in action["runs"]["steps"] if s.get("name") == "Install setupbot")
    return step["run"]


def test_the_action_installs_from_the_hashed_lock_then_setupbot_without_resolving():
    script = _install_script()
    commands = [c for c in script.replace("\\\n", " ").splitlines() if c.strip()]
    assert len(commands) == 2, commands
    deps, own = commands
    assert "--require-hashes" in deps and "--only-binary :all:" in deps and "requirements/action.txt" in deps
    assert "--no-deps" in own and "--no-build-isolation" in own and "--editable" in own
    # no other pip install anywhere in the action
    assert script.count("pip install") == 2


def test_every_dependency_and_the_build_backend_are_pinned_with_hashes():
    import tomllib

    locked = _locked()
    assert locked and all(hashes for _, hashes in locked.values()), [n for n, (_, h) in locked.items() if not h]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = [Requirement(r) for r in project["project"]["dependencies"]]
    needed += [Requirement(r) for r in project["build-system"]["requires"]]
    for req in needed:
        name = canonicalize_name(req.name)
        assert name in locked, f"{req} is not in {LOCK.name}: regenerate it (command in its header)"
        assert req.specifier.contains(locked[name][0], prereleases=True), (str(req), locked[name][0])
        for extra in req.extras:  # psycopg[binary] -> psycopg-binary
            assert canonicalize_name(f"{req.name}-{extra}") in locked, f"{req}: extra {extra} not locked"


@pytest.mark.skipif(shutil.which("zizmor") is None and not CI, reason="zizmor is not installed (pip install -e .[dev])")
def test_zizmor_finds_nothing_in_the_action_and_the_workflows():
    r = subprocess.run(
        ["zizmor", "--offline", "--no-progress", "action.yml", ".github/workflows/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


@pytest.mark.skipif(
    shutil.which("actionlint") is None and not CI, reason="actionlint is not installed (pip install -e .[dev])"
)
def test_actionlint_finds_nothing_in_the_workflows():
    r = subprocess.run(
        ["actionlint", "-no-color", *[str(w) for w in WORKFLOWS]], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
