""".ci/run's non-root path, run for real as a non-root user with passwordless sudo (as on
GitHub's ubuntu-latest) in its dry-run mode: every privileged command goes through sudo, the
sudo prefix really yields root, and a user with neither root nor sudo is told so.

The users and their sudoers entry are made by the test and removed afterwards."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def unavailable(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def privileged() -> list[str]:
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ["sudo", "-n"]
    unavailable("creating test users needs root or passwordless sudo")
    return []


@pytest.fixture
def ci_copy():
    """.ci/ where any user can read it (the checkout may sit under a private home)."""
    top = Path(tempfile.mkdtemp(prefix="setupbot-ci-copy-", dir="/tmp"))
    shutil.copytree(ROOT / ".ci", top / ".ci")
    for path in [top, *top.rglob("*")]:
        path.chmod(0o755)
    yield top
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def users():
    if not shutil.which("sudo") or not shutil.which("useradd"):
        unavailable("sudo and useradd are needed (.ci/run installs sudo)")
    prefix = privileged()
    made: list[str] = []
    sudoers: list[Path] = []

    def make(with_sudo: bool) -> str:
        name = f"sbci{secrets.token_hex(3)}"
        subprocess.run(
            [*prefix, "useradd", "--no-create-home", "--shell", "/bin/bash", name], check=True, capture_output=True
        )
        made.append(name)
        if with_sudo:
            entry = Path("/etc/sudoers.d") / name
            tmp = Path(tempfile.mkdtemp()) / name
            tmp.write_text(f"{name} ALL=(ALL) NOPASSWD: ALL\n")
            subprocess.run([*prefix, "install", "-m", "0440", str(tmp), str(entry)], check=True)
            sudoers.append(entry)
        return name

    yield prefix, make
    for entry in sudoers:
        subprocess.run([*prefix, "rm", "-f", str(entry)], capture_output=True)
    for name in made:
        subprocess.run([*prefix, "userdel", name], capture_output=True)


def run_as(prefix: list[str], user: str, top: Path) -> subprocess.CompletedProcess[str]:
    switch = ["runuser", "-u", user, "--"] if not prefix else [*prefix, "-u", user, "--"]
    return subprocess.run(
        [*switch, "env", "-i", f"PATH={PATH}", "HOME=/tmp", "CIRUN_DRY_RUN=1", "bash", str(top / ".ci" / "run")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/tmp",
    )


def test_ci_run_as_a_sudo_capable_user_takes_root_through_sudo(users, ci_copy):
    prefix, make = users
    r = run_as(prefix, make(with_sudo=True), ci_copy)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "privileged prefix: sudo -n -E env PATH=" in out
    assert "the privileged prefix runs as uid 0" in out
    root_lines = [line for line in out.splitlines() if line.startswith("as_root:")]
    assert any("apt-get install" in line for line in root_lines), out
    assert any("images bootstrap" in line for line in root_lines), out
    assert any("chown postgres" in line for line in root_lines), out
    assert all(line.startswith("as_root: sudo -n") for line in root_lines), root_lines
    assert "as_postgres:" in out and "runuser" not in out


def test_ci_run_without_root_or_sudo_says_so(users, ci_copy):
    prefix, make = users
    r = run_as(prefix, make(with_sudo=False), ci_copy)
    assert r.returncode == 1
    assert "no passwordless sudo" in r.stderr
