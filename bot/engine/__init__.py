"""Containers, snapshots, builds, networks, offline images, CA injection, cleanup.

See docs/architecture.md, "Engine", for the contract.
"""

from bot.engine.core import ContainerHandle, Engine, new_run_id
from bot.engine.results import BuildResult, ExecResult

__all__ = ["Engine", "RunnerSession", "ExecResult", "BuildResult", "ContainerHandle", "new_run_id"]


def __getattr__(name: str):
    if name == "RunnerSession":
        from bot.engine.session import RunnerSession

        return RunnerSession
    raise AttributeError(name)
