"""Shared helpers for the security tests (SECURITY.md; which test shows what: docs/security.md).

Tests here that use the container engine carry an explicit ``@pytest.mark.docker``; the others
are unit tests and the engine guard in tests/conftest.py applies to them.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import threading
from collections.abc import Iterable
from pathlib import Path

REPOS = Path(__file__).parent.parent / "fixtures" / "repos"

# Values nobody would type: if one shows up anywhere, it leaked.
TOKEN_SENTINEL = "ghp_SENTINELtokenZZ9f3a1c7e5b2d4086"
LLM_KEY_SENTINEL = "sk-SENTINELllmkeyQQ71d0c4b9e2a6f835"


def secret_forms(secret: str) -> list[str]:
    """The secret and the base64 forms it takes in git/basic auth headers and env dumps."""
    raw = secret.encode()
    forms = [secret]
    for prefix in (b"", b"x-access-token:", b"x-oauth-basic:", b":"):
        forms.append(base64.b64encode(prefix + raw).decode().rstrip("="))
    # the same bytes at the other two alignments, for a secret inside a longer encoded text
    for pad in (b"a", b"aa"):
        enc = base64.b64encode(pad + raw).decode().rstrip("=")
        forms.append(enc[4:-4])
    return forms


def assert_no_secret(where: str, text: str, secrets: Iterable[str] = (TOKEN_SENTINEL, LLM_KEY_SENTINEL)) -> None:
    for secret in secrets:
        for form in secret_forms(secret):
            assert form not in text, f"a secret ({form[:12]}...) leaked into {where}"


def copy_repo(name: str, dest: Path) -> Path:
    """A fixture repository as a fresh git checkout (no remote, no credentials)."""
    repo = dest / name
    shutil.copytree(REPOS / name, repo, symlinks=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "fixture"], check=True)
    return repo


def docker(*args: str, check: bool = True) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check, timeout=120).stdout


def leftovers(run_id: str) -> dict[str, list[str]]:
    label = f"label=setupbot.run={run_id}"
    return {
        "containers": docker("ps", "-aq", "--filter", label).split(),
        "networks": docker("network", "ls", "-q", "--filter", label).split(),
        "volumes": docker("volume", "ls", "-q", "--filter", label).split(),
        "images": docker("images", "-aq", "--filter", label).split(),
    }


class ContainerWatcher:
    """Inspects every container carrying the run's label while the run goes on (some live only
    for a second: image probes, service health checks)."""

    def __init__(self, run_id: str, interval: float = 0.5) -> None:
        self.run_id = run_id
        self.interval = interval
        self.seen: dict[str, dict] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> ContainerWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.poll()

    def poll(self) -> None:
        ids = docker("ps", "-aq", "--no-trunc", "--filter", f"label=setupbot.run={self.run_id}", check=False).split()
        new = [i for i in ids if i not in self.seen]
        if not new:
            return
        r = subprocess.run(["docker", "inspect", *new], capture_output=True, text=True, timeout=120)
        try:
            for info in json.loads(r.stdout or "[]"):
                self.seen[info["Id"]] = info
        except json.JSONDecodeError:
            pass  # a container vanished between ps and inspect; the next poll sees the others

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()


ALLOWED_CAPS = {"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID"}
# Services may add a few (e.g. a database dropping to its own user); never these.
NEVER_CAPS = {
    "SYS_ADMIN",
    "NET_ADMIN",
    "SYS_PTRACE",
    "SYS_MODULE",
    "DAC_READ_SEARCH",
    "SYS_RAWIO",
    "ALL",
    "SYS_TIME",
    "MKNOD",
    "NET_RAW",
    "BPF",
    "PERFMON",
    "SYS_BOOT",
}


def is_build_step(info: dict) -> bool:
    """A classic-builder intermediate container (it carries the run's label from the build's
    LABEL step); the engine's own containers are named setupbot-<run id>-<n>-<role>."""
    return not info.get("Name", "").lstrip("/").startswith("setupbot-")


def assert_build_step_confined(info: dict) -> None:
    """What a build step gets (docs/security.md, Builds): no privileges, the runner's memory and
    CPU limits, no mounts. Capabilities stay the engine's default set."""
    name = info.get("Name", info["Id"][:12])
    host = info["HostConfig"]
    assert host.get("Privileged") is False, f"{name} is privileged"
    assert (host.get("Memory") or 0) > 0, f"build step {name} has no memory limit"
    assert (host.get("CpuQuota") or 0) > 0 or (host.get("NanoCpus") or 0) > 0, f"build step {name} has no CPU limit"
    assert host.get("NetworkMode") != "host" and not host.get("Binds") and not info.get("Mounts"), name


def assert_hardened(info: dict) -> None:
    """SECURITY.md S7 on one `docker inspect` document."""
    name = info.get("Name", info["Id"][:12])
    host = info["HostConfig"]
    assert host.get("Privileged") is False, f"{name} is privileged"
    assert [c.upper().removeprefix("CAP_") for c in host.get("CapDrop") or []] == ["ALL"], (
        f"{name}: {host.get('CapDrop')}"
    )
    added = {c.upper().removeprefix("CAP_") for c in host.get("CapAdd") or []}
    assert not added & NEVER_CAPS, f"{name} adds {added & NEVER_CAPS}"
    assert len(added) <= 8, f"{name} adds {sorted(added)}"
    assert any(o.startswith("no-new-privileges") for o in host.get("SecurityOpt") or []), (
        f"{name}: {host.get('SecurityOpt')}"
    )
    assert (host.get("PidsLimit") or 0) > 0, f"{name} has no pids limit"
    assert (host.get("Memory") or 0) > 0, f"{name} has no memory limit"
    assert (host.get("NanoCpus") or 0) > 0 or (host.get("CpuQuota") or 0) > 0, f"{name} has no CPU limit"
    assert host.get("NetworkMode") != "host", f"{name} shares the host network"
    assert host.get("PidMode") in ("", None), f"{name} shares a PID namespace: {host.get('PidMode')}"
    assert host.get("IpcMode") not in ("host",), f"{name} shares the host IPC namespace"
    for bind in host.get("Binds") or []:
        assert bind.endswith(":ro"), f"{name} has a writable bind mount {bind}"
    for mount in info.get("Mounts") or []:
        assert "docker.sock" not in (mount.get("Source") or "") + (mount.get("Destination") or ""), (
            f"{name} mounts the engine socket"
        )
        if mount.get("Type") == "bind":
            assert mount.get("RW") is False, f"{name} has a writable host mount {mount.get('Source')}"
    labels = info["Config"].get("Labels") or {}
    assert labels.get("setupbot") == "1" and labels.get("setupbot.run"), f"{name} is not labelled"
