"""Egress of runner containers (SECURITY.md S15).

Runners need the package registries, so they cannot be cut off. What they never need is the
cloud metadata service and other link-local addresses (169.254.0.0/16) or the host itself
(the bridge gateway and every other address of the host: an engine API on tcp, a database or
cache bound on the host). Where the bot runs as root next to a Docker engine that keeps its rules
in this network namespace (a DOCKER-USER chain), each run gets its own bridge network with a
bridge interface named after the run, and two rules scoped to that interface:

  DOCKER-USER  -i <if> -d 169.254.0.0/16 -j DROP      (forwarded: link-local, metadata)
  INPUT        -i <if> -j DROP                        (addressed to the host: the gateway)

The rules carry the comment ``setupbot:<run id>`` and are removed with the run (and by
``setupbot clean``). Where this cannot be done the guard says why, and the run's report says
that egress is open. The rest of the LAN stays reachable either way: the registries may be
behind it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass, field

from bot.hostenv import host_env

log = logging.getLogger(__name__)

LINK_LOCAL = "169.254.0.0/16"


@dataclass
class EgressFacts:
    """What holds for this run's runners, for the report."""

    guarded: bool
    network: str | None = None
    blocked: list[str] = field(default_factory=list)
    open: list[str] = field(default_factory=list)
    why: str = ""

    def to_json(self) -> dict:
        return {
            "guarded": self.guarded,
            "network": self.network,
            "blocked": self.blocked,
            "open": self.open,
            "why": self.why,
        }

    def report_line(self) -> str:
        if self.guarded:
            return f"egress: runners cannot reach {', '.join(self.blocked)}; still open: {', '.join(self.open)}"
        return f"egress is open: runners can reach link-local addresses (cloud metadata), the host and the LAN ({self.why})"


def comment(run_id: str) -> str:
    return f"setupbot:{run_id}"


def interface_name(run_id: str) -> str:
    # at most 15 characters (IFNAMSIZ - 1); unique per run
    return "sbx" + hashlib.sha256(run_id.encode()).hexdigest()[:10]


def _iptables(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["iptables", "-w", "10", *args], capture_output=True, text=True, timeout=30, env=host_env())


def why_not(kind: str) -> str:
    """Why the guard cannot be set up here, or ""."""
    if kind != "docker":
        return f"the {kind} engine keeps no DOCKER-USER chain"
    if os.geteuid() != 0:
        return "setupbot does not run as root, so it cannot add firewall rules"
    if shutil.which("iptables") is None:
        return "iptables is not installed"
    r = _iptables("-S", "DOCKER-USER")
    if r.returncode != 0:
        return "the engine's DOCKER-USER chain is not in this network namespace (a remote or rootless engine)"
    return ""


def add_rules(run_id: str, interface: str) -> None:
    tag = comment(run_id)
    for chain, rule in (
        ("DOCKER-USER", ["-i", interface, "-d", LINK_LOCAL, "-j", "DROP"]),
        ("INPUT", ["-i", interface, "-j", "DROP"]),
    ):
        r = _iptables("-I", chain, "1", *rule, "-m", "comment", "--comment", tag)
        if r.returncode != 0:
            remove_rules(run_id)
            raise OSError(f"iptables -I {chain}: {r.stderr.strip()[-300:]}")


def remove_rules(run_id: str | None = None) -> int:
    """Delete this run's rules (every setupbot rule without ``run_id``); the number removed."""
    if os.geteuid() != 0 or shutil.which("iptables") is None:
        return 0
    removed = 0
    for chain in ("DOCKER-USER", "INPUT"):
        r = _iptables("-S", chain)
        if r.returncode != 0:
            continue
        for line in r.stdout.splitlines():
            if not line.startswith(f"-A {chain} "):
                continue
            marker = f'--comment "{comment(run_id)}"' if run_id else '--comment "setupbot:'
            marker_bare = f"--comment {comment(run_id)}" if run_id else "--comment setupbot:"
            if marker not in line and marker_bare not in line:
                continue
            args = line.split()[2:]
            args = [a.strip('"') for a in args]
            if _iptables("-D", chain, *args).returncode == 0:
                removed += 1
    return removed
