"""How runner and service containers are confined (SECURITY.md S7-S8).

The capability set is the smallest with which apt-get, dpkg and pip work as root inside the
container (measured: apt drops to the _apt user, dpkg chowns and sets modes on unpacked files,
setuid helpers keep their bits, and the timeout path kills processes of other users). Everything
else in Docker's default set (NET_RAW, MKNOD, SYS_CHROOT, AUDIT_WRITE, SETPCAP, SETFCAP,
NET_BIND_SERVICE) is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.config import EngineSettings

PACKAGE_MANAGER_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL")
SECURITY_OPTIONS = ("no-new-privileges",)


@dataclass(frozen=True)
class Limits:
    memory: str
    pids: int
    cpus: float

    @classmethod
    def from_settings(cls, engine: EngineSettings) -> "Limits":
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
