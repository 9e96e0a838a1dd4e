"""DepGraph, import->distribution map, runtime choice and uv resolution; the plan that views the
graph and compiles its Dockerfile is bot.compile.plan (docs/architecture.md, "DepGraph and plan")."""

from bot.evidence.model import ScanWarning, ServiceRequirement
from bot.graph.model import DepGraph, Node

Warning = ScanWarning  # noqa: A001 - the contract's name

__all__ = ["DepGraph", "Node", "ServiceRequirement", "Warning"]
