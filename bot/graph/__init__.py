"""DepGraph, import->distribution map, runtime choice, uv resolution and the plan
(docs/architecture.md, "DepGraph and plan")."""

from bot.evidence.model import ScanWarning, ServiceRequirement
from bot.graph.model import DepGraph, Node
from bot.graph.plan import Plan, make_plan

Warning = ScanWarning  # noqa: A001 - the contract's name

__all__ = ["DepGraph", "Node", "Plan", "ServiceRequirement", "Warning", "make_plan"]
