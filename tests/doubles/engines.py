"""Real infrastructure for the image-source tests, started and stopped by the test itself.

- ``local_registry``: Debian's ``docker-registry`` (distribution) on 127.0.0.1:<free port>,
  storing under a temporary directory. Engines treat 127.0.0.0/8 as an insecure registry, so
  no TLS is needed.
- ``fresh_engine``: a second Docker daemon with its own data root, exec root, pid file, unix
  socket and bridge: an engine whose store holds no image at all, like a new runner's, without
  touching the engine other tests share. Its bridge gets outbound NAT through rules this
  helper adds and removes itself (the daemon's own iptables management stays off, so the
  shared daemon's chains are never rewritten).

Both need root (or passwordless sudo for the daemon) and are skipped -- failed under CI=true --
by the callers when they cannot start.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

REGISTRY_BINARY = "/usr/bin/docker-registry"


class Unavailable(RuntimeError):
    """The infrastructure cannot start on this machine (the reason is the message)."""


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _sudo() -> list[str]:
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ["sudo", "-n"]
    raise Unavailable("needs root or passwordless sudo")


def _wait(check, timeout: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    raise Unavailable(f"{what} did not come up within {timeout:.0f}s\n{tail}")


@contextlib.contextmanager
def local_registry(root: Path) -> Iterator[str]:
    """Yields ``127.0.0.1:PORT`` of a running registry with an empty store."""
    if not os.path.exists(REGISTRY_BINARY):
        raise Unavailable(f"{REGISTRY_BINARY} is missing (Debian package docker-registry)")
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = root / "config.yml"
    config.write_text(
        json.dumps(
            {  # YAML is a superset of JSON
                "version": 0.1,
                "log": {"level": "warn"},
                "storage": {"filesystem": {"rootdirectory": str(root / "data")}, "delete": {"enabled": True}},
                "http": {"addr": f"127.0.0.1:{port}"},
            }
        )
    )
    log = root / "registry.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [REGISTRY_BINARY, "serve", str(config)], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def up() -> bool:
        if proc.poll() is not None:
            raise Unavailable(f"docker-registry exited:\n{log.read_text(errors='replace')[-2000:]}")
        try:
            with opener.open(f"http://127.0.0.1:{port}/v2/", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        _wait(up, 30, "docker-registry", log)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def push_as(engine_env: dict[str, str] | None, local: str, registry: str, name: str) -> str:
    """Push the local image ``local`` to ``registry`` under the official ``name``
    (``python:3.13-slim`` -> ``REGISTRY/library/python:3.13-slim``); the temporary registry-named
    tag is removed again, the local image keeps its own tags. Returns the pushed digest."""
    repo, _, tag = name.partition(":")
    target = f"{registry}/{repo if '/' in repo else 'library/' + repo}:{tag or 'latest'}"
    env = {**os.environ, **(engine_env or {})}
    subprocess.run(["docker", "tag", local, target], check=True, env=env, capture_output=True)
    try:
        out = subprocess.run(["docker", "push", target], check=True, env=env, capture_output=True, text=True).stdout
    finally:
        subprocess.run(["docker", "rmi", "--no-prune", target], env=env, capture_output=True)
    digest = next((w for line in out.splitlines() for w in line.split() if w.startswith("sha256:")), "")
    return digest


@contextlib.contextmanager
def fresh_engine(root: Path, registry_mirror: str = "") -> Iterator[dict[str, str]]:
    """Yields the environment (DOCKER_HOST) of a second, empty Docker daemon. With
    ``registry_mirror`` (``127.0.0.1:PORT``) the daemon pulls official images through it, as a
    runner configured with a pull-through cache does."""
    dockerd = shutil.which("dockerd")
    if not dockerd:
        raise Unavailable("dockerd is not installed")
    sudo = _sudo()
    root.mkdir(parents=True, exist_ok=True)
    driver = (
        subprocess.run(["docker", "info", "--format", "{{.Driver}}"], capture_output=True, text=True).stdout.strip()
        or "overlay2"
    )
    suffix = secrets.token_hex(3)
    bridge = f"sbt{suffix}"
    # Every network of this daemon (its default bridge and the ones compose creates) comes from
    # one /16, so a handful of rules on that range give them all outbound NAT and forwarding.
    octet = 200 + int(suffix, 16) % 50
    pool = f"10.{octet}.0.0/16"
    subnet = f"10.{octet}.0"
    # Unix socket paths are capped at 108 bytes, and containerd puts its socket under the exec
    # root: pytest's tmp_path is too deep for that, so the exec root and the API socket live in a
    # short folder of their own.
    short = Path(tempfile.mkdtemp(prefix="sbe-", dir="/tmp"))
    sock = short / "docker.sock"
    exec_root = short / "exec"
    config = root / "daemon.json"
    # The shared daemon's /etc/docker/daemon.json must not apply (its data-root would clash).
    daemon: dict = {"storage-driver": driver, "mtu": 1400, "default-address-pools": [{"base": pool, "size": 24}]}
    if registry_mirror:
        daemon["registry-mirrors"] = [f"http://{registry_mirror}"]
    config.write_text(json.dumps(daemon))
    rules = [
        ["iptables", "-t", "nat", "-I", "POSTROUTING", "-s", pool, "!", "-d", pool, "-j", "MASQUERADE"],
        ["iptables", "-I", "FORWARD", "-s", pool, "-j", "ACCEPT"],
        [
            "iptables",
            "-I",
            "FORWARD",
            "-d",
            pool,
            "-m",
            "conntrack",
            "--ctstate",
            "RELATED,ESTABLISHED",
            "-j",
            "ACCEPT",
        ],
    ]
    added: list[list[str]] = []
    log = root / "dockerd.log"
    proc = None

    def run(argv: list[str]) -> None:
        r = subprocess.run([*sudo, *argv], capture_output=True, text=True)
        if r.returncode != 0:
            raise Unavailable(f"{' '.join(argv)}: {r.stderr.strip()}")

    try:
        run(["ip", "link", "add", bridge, "type", "bridge"])
        run(["ip", "addr", "add", f"{subnet}.1/24", "dev", bridge])
        run(["ip", "link", "set", bridge, "up"])
        for rule in rules:
            run(rule)
            added.append(rule)
        argv = [
            *sudo,
            dockerd,
            "--config-file",
            str(config),
            "--data-root",
            str(root / "data"),
            "--exec-root",
            str(exec_root),
            "--pidfile",
            str(root / "docker.pid"),
            "-H",
            f"unix://{sock}",
            "--bridge",
            bridge,
            "--iptables=false",
            "--ip-masq=false",
        ]
        if sudo:
            argv += ["--group", str(os.getgid())]
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        env = {"DOCKER_HOST": f"unix://{sock}"}

        def up() -> bool:
            if proc.poll() is not None:
                raise Unavailable(f"dockerd exited:\n{log.read_text(errors='replace')[-3000:]}")
            return (
                subprocess.run(
                    ["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, env={**os.environ, **env}
                ).returncode
                == 0
            )

        _wait(up, 60, "the second dockerd", log)
        yield env
    finally:
        if proc is not None:
            pid_file = root / "docker.pid"
            pid = int(pid_file.read_text()) if pid_file.exists() else proc.pid
            subprocess.run([*sudo, "kill", "-TERM", str(pid)], capture_output=True)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                subprocess.run([*sudo, "kill", "-KILL", str(pid)], capture_output=True)
                proc.wait()
        for rule in reversed(added):
            subprocess.run([*sudo, *[("-D" if a == "-I" else a) for a in rule]], capture_output=True)
        subprocess.run([*sudo, "ip", "link", "del", bridge], capture_output=True)
        subprocess.run([*sudo, "rm", "-rf", str(root / "data"), str(short)], capture_output=True)
