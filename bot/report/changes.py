"""What changed between two recorded environments (the committed plan JSON), in a reviewer's
words: requirements, runtime and services as a diff, and whether a pull request breaks the
environment the base branch had.

Both sides are plan JSON documents as ``bot.outputs.render_plan_json`` writes them
(``{"plan": ..., "inputs": ..., "verified": ...}``); either may be missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.report.model import verdict_at_least

# Node types a reviewer cares about; IMPORT, TARGET and CONFIG are how the plan got there.
SHOWN_TYPES = {"PACKAGE": "package", "TOOL": "tool", "SYSTEMLIB": "system package"}


def _plan(doc: dict[str, Any] | None) -> dict[str, Any]:
    return (doc or {}).get("plan") or {}


def environment_lines(doc: dict[str, Any] | None) -> list[str]:
    """One line per thing the environment holds: ``runtime python 3.13 (python:3.13-slim)``,
    ``package six>=1.16``, ``system package libxml2-dev``, ``service postgres (postgres:17)``."""
    plan = _plan(doc)
    if not plan:
        return []
    lines = []
    if plan.get("python"):
        lines.append(f"runtime python {plan['python']} ({plan.get('base_image', '')})")
    for node in (plan.get("graph") or {}).get("nodes") or []:
        kind = SHOWN_TYPES.get(str(node.get("type", "")))
        if kind is None or (kind != "system package" and node.get("action") is None):
            continue
        attrs = node.get("attrs") or {}
        name = attrs.get("spec") if kind == "package" and attrs.get("spec") else node.get("name", "")
        if node.get("action") == "project":
            name = f"{node.get('name', '')} (the project itself)"
        lines.append(f"{kind} {name}")
    for svc in plan.get("services") or []:
        lines.append(f"service {svc.get('name', '')} ({svc.get('image', '')})")
    return sorted(set(lines), key=lambda s: (not s.startswith("runtime"), s))


def environment_diff(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str]:
    """``+ line`` / ``- line`` for what was added or removed (empty when nothing changed)."""
    before, after = set(environment_lines(old)), set(environment_lines(new))
    return [f"- {x}" for x in sorted(before - after)] + [f"+ {x}" for x in sorted(after - before)]


def _names(doc: dict[str, Any] | None, kind: str) -> set[str]:
    prefix = kind + " "
    return {line[len(prefix) :].split(" ", 1)[0] for line in environment_lines(doc) if line.startswith(prefix)}


@dataclass
class Comparison:
    """A pull request's environment against the base branch's verified one."""

    regression: bool
    summary: str
    details: list[str] = field(default_factory=list)
    diff: list[str] = field(default_factory=list)


def compare_with_base(
    base: dict[str, Any] | None,
    head: dict[str, Any] | None,
    *,
    head_verdict: str,
    head_replay_ok: bool | None,
    gate: str,
    base_branch: str = "main",
    failure: str = "",
) -> Comparison:
    """Did the change break what ``base_branch`` had? A regression is: the base's recorded
    environment replayed and was at or above the gate, and the pull request's is not."""
    diff = environment_diff(base, head)
    verified = (base or {}).get("verified") or {}
    base_verdict = str(verified.get("verdict", ""))
    base_ok = bool(verified.get("replay_ok")) and verdict_at_least(base_verdict, gate)
    head_ok = bool(head_replay_ok) and verdict_at_least(head_verdict, gate)
    if not base:
        return Comparison(False, f"{base_branch} has no recorded environment to compare with", [], diff)
    if not base_ok:
        return Comparison(
            False,
            f"{base_branch}'s recorded environment did not pass the {gate} gate "
            f"(verdict {base_verdict or 'unknown'}); nothing to regress from",
            [],
            diff,
        )
    if head_ok:
        text = f"keeps the environment {base_branch} had (verdict {base_verdict} → {head_verdict})"
        return Comparison(False, text, [], diff)
    added = sorted(_names(head, "package") - _names(base, "package"))
    system_added = sorted(_names(head, "system package") - _names(base, "system package"))
    what = []
    if added:
        what.append("adds " + ", ".join(f"`{a}`" for a in added))
        if not system_added:
            what[-1] += " but no system package"
    elif diff:
        what.append("changes " + "; ".join(d[2:] for d in diff[:3]))
    broken = (
        (f"the clean replay fails ({failure})" if failure else "the clean replay fails")
        if not head_replay_ok
        else f"the verdict drops to {head_verdict}, below the {gate} gate"
    )
    sentence = f"This pull request {' and '.join(what) + ': ' if what else 'breaks the environment: '}{broken}."
    details = [
        f"{base_branch} had verdict {base_verdict} with a passing clean replay",
        f"this pull request: verdict {head_verdict}, clean replay "
        f"{'passed' if head_replay_ok else 'failed' if head_replay_ok is False else 'not run'}",
    ]
    return Comparison(True, sentence, details, diff)
