"""How runner and service containers are confined (SECURITY.md S7-S8).

The capability set is the smallest with which apt-get, dpkg and pip work as root inside the
container. Measured here (apt-get install of ssl-cert, redis-server and libpq-dev, pip install):
without DAC_OVERRIDE, SETUID or SETGID `apt-get update` fails (apt drops to the _apt user);
without CHOWN or FOWNER maintainer scripts fail (groupadd, chmod/chown of service directories);
FSETID keeps setgid bits on binaries whose group is not root's (crontab, ssh-agent). Everything
else in Docker's default set (KILL, NET_RAW, MKNOD, SYS_CHROOT, AUDIT_WRITE, SETPCAP, SETFCAP,
NET_BIND_SERVICE) is dropped; timeouts kill through the engine, not from inside.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.config import EngineSettings

PACKAGE_MANAGER_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID")
SECURITY_OPTIONS = ("no-new-privileges",)


@dataclass(frozen=True)
class Limits:
    memory: str
    pids: int
    cpus: float

    @classmethod
    def from_settings(cls, engine: EngineSettings) -> Limits:
        return cls(memory=engine.memory, pids=int(engine.pids_limit), cpus=float(engine.cpus))


def hardened_create_kwargs(limits: Limits, cap_add: tuple[str, ...] = ()) -> dict:
    """Keyword arguments for python-on-whales ``container.create`` that every container the
    engine starts gets: no privileged mode, no engine socket, no host mounts."""
    caps = tuple(dict.fromkeys((*PACKAGE_MANAGER_CAPS, *cap_add)))
    return {
        "privileged": False,
        "cap_drop": ["ALL"],
        "cap_add": list(caps),
        "security_options": list(SECURITY_OPTIONS),
        "pids_limit": limits.pids,
        "memory": limits.memory,
        "memory_swap": limits.memory,  # no swap beyond the memory limit
        "cpus": limits.cpus,
        # tini as PID 1 reaps orphans, so killed processes do not pile up as zombies and eat
        # the pids limit.
        "init": True,
    }
