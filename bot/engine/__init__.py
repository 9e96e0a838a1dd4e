"""Containers, snapshots, builds, networks, offline images, CA injection, cleanup.

See docs/architecture.md, "Engine", for the contract.
"""

from bot.engine.core import ContainerHandle, Engine, new_run_id
from bot.engine.results import BuildResult, ExecResult
from bot.engine.session import RunnerSession

__all__ = ["Engine", "RunnerSession", "ExecResult", "BuildResult", "ContainerHandle", "new_run_id"]
