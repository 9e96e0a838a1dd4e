"""What the setup report needs, as one plain dataclass.

``ReportData`` is filled by small adapters from the plan, the run record and the verification
record when those exist (``from_pipeline``), and stays constructible by hand so the report, the
PR body and the job summary can be rendered and tested without running a setup.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable

VERDICT_TIERS = ("Full", "Mostly", "Partial", "Shallow", "Failed")


@dataclass
class ProofItem:
    """One thing that was (or was not) proven, and why."""

    claim: str
    proven: bool
    reason: str = ""


@dataclass
class TestCounts:
    collected: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0


@dataclass
class ServiceUse:
    name: str
    image: str = ""
    healthy: bool = True
    tests: list[str] = field(default_factory=list)   # tests that needed this service


@dataclass
class SiblingRepo:
    name: str
    source: str = ""
    healthy: bool = True
    tests: list[str] = field(default_factory=list)


@dataclass
class Charge:
    """A prosecutor charge and the judge's ruling on it."""

    charge: str
    ruling: str            # "upheld" | "dismissed"
    reason: str = ""


@dataclass
class RequirementRow:
    type: str
    name: str
    state: str
    evidence: str = ""     # "file:line"
    dockerfile_line: str = ""


@dataclass
class Repair:
    description: str
    unit_ids: list[str] = field(default_factory=list)


@dataclass
class ReportData:
    repository: str = ""
    verdict: str = "Shallow"
    tier_reason: str = ""
    proven: list[ProofItem] = field(default_factory=list)
    replay_ok: bool | None = None
    replay_detail: str = ""
    tests: TestCounts = field(default_factory=TestCounts)
    services: list[ServiceUse] = field(default_factory=list)
    siblings: list[SiblingRepo] = field(default_factory=list)
    charges: list[Charge] = field(default_factory=list)
    requirements: list[RequirementRow] = field(default_factory=list)
    repairs: list[Repair] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)   # phase -> seconds
    image_size: int | None = None                              # bytes
    llm_tokens: int = 0
    degraded: bool = False
    python: str = ""
    base_image: str = ""
    test_command: list[str] = field(default_factory=list)
    output_dir: str = ".devcontainer"
    reproduce: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)             # files setupbot wrote / proposes
    pending_changes: dict[str, str] = field(default_factory=dict)  # hand-written file -> diff

    def __post_init__(self) -> None:
        if self.verdict not in VERDICT_TIERS:
            # An unknown verdict is shown as-is but never upgraded to a tier it did not earn.
            self.tier_reason = self.tier_reason or f"unrecognised verdict {self.verdict!r}"
        if not self.reproduce:
            self.reproduce = default_reproduce(self.output_dir, self.test_command)

    @property
    def proven_items(self) -> list[ProofItem]:
        return [p for p in self.proven if p.proven]

    @property
    def unproven_items(self) -> list[ProofItem]:
        return [p for p in self.proven if not p.proven]

    @property
    def total_seconds(self) -> float:
        return round(sum(self.timings.values()), 1)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def default_reproduce(output_dir: str, test_command: Iterable[str]) -> list[str]:
    """Two commands a reviewer can paste: build the image, run the tests in it."""
    import shlex

    cmd = list(test_command) or ["python", "-m", "pytest"]
    return [
        f"docker build -f {shlex.quote(output_dir.rstrip('/') + '/Dockerfile')} -t setupbot-env .",
        f"docker run --rm setupbot-env {shlex.join(cmd)}",
    ]


# ---------------------------------------------------------------- adapters
# The producers (plan, run record, verification record) are owned elsewhere; the adapters read
# them by attribute with getattr defaults so a missing field shows as "not recorded" in the
# report instead of crashing the run.

def _get(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _evidence_text(evidence: Any) -> str:
    if not evidence:
        return ""
    first = evidence[0]
    if isinstance(first, (list, tuple)) and len(first) >= 2:
        return f"{first[0]}:{first[1]}"
    return str(first)


def requirement_rows(plan: Any) -> list[RequirementRow]:
    """The requirements table: every graph node except the target, with the Dockerfile line
    (from ``CompiledDockerfile.lines`` provenance) that each one produced."""
    graph = _get(plan, "graph")
    dockerfile = _get(plan, "dockerfile")
    line_of: dict[str, str] = {}
    for line in _get(dockerfile, "lines", []) or []:
        for node_id in _get(line, "node_ids", []) or []:
            line_of.setdefault(node_id, _get(line, "text", "").strip())
    nodes = _get(graph, "nodes", {}) or {}
    if isinstance(nodes, dict):
        nodes = list(nodes.values())
    rows = []
    for node in nodes:
        node_type = str(getattr(_get(node, "type"), "value", _get(node, "type", "")))
        if node_type.upper() == "TARGET":
            continue
        state = str(getattr(_get(node, "state"), "value", _get(node, "state", "")))
        rows.append(RequirementRow(type=node_type, name=str(_get(node, "name", "")), state=state,
                                   evidence=_evidence_text(_get(node, "evidence", [])),
                                   dockerfile_line=line_of.get(_get(node, "id", ""), "")))
    return rows


def from_pipeline(plan: Any = None, run_record: Any = None, verification: Any = None, *,
                  repository: str = "", output_dir: str = ".devcontainer",
                  image_size: int | None = None) -> ReportData:
    """Build ``ReportData`` from whatever of the plan, run record and verification record exist."""
    data = ReportData(repository=repository, output_dir=output_dir, image_size=image_size)
    if plan is None:
        plan = _get(run_record, "plan")
    if plan is not None:
        data.python = str(_get(plan, "python", "") or "")
        data.base_image = str(_get(plan, "base_image", "") or "")
        data.test_command = list(_get(plan, "test_command", []) or [])
        data.requirements = requirement_rows(plan)
        for w in _get(plan, "warnings", []) or []:
            if isinstance(w, (list, tuple)) and len(w) == 3:
                file, line, message = w
            else:
                file, line, message = _get(w, "file"), _get(w, "line"), _get(w, "message", w)
            data.warnings.append(f"{file}:{line}: {message}" if file else str(message))
        for svc in _get(plan, "services", []) or []:
            data.services.append(ServiceUse(name=str(_get(svc, "name", "")),
                                            image=str(_get(svc, "image", "") or "")))
    if run_record is not None:
        replay = _get(run_record, "replay")
        if replay is not None:
            data.replay_ok = bool(_get(replay, "ok", False))
            data.replay_detail = str(_get(replay, "detail", "") or "")
        tests = _get(run_record, "tests")
        if tests is not None:
            data.tests = TestCounts(**{k: int(_get(tests, k, 0) or 0)
                                       for k in ("collected", "passed", "failed", "skipped", "errors")})
        for repair in _get(run_record, "repairs", []) or []:
            data.repairs.append(Repair(description=str(_get(repair, "description", repair)),
                                       unit_ids=[str(u) for u in (_get(repair, "unit_ids", []) or [])]))
        data.timings = {str(k): float(v) for k, v in (_get(run_record, "timings", {}) or {}).items()}
        data.llm_tokens = int(_get(run_record, "llm_tokens", 0) or 0)
        data.degraded = bool(_get(run_record, "degraded", False))
    if verification is not None:
        data.verdict = str(_get(verification, "verdict", data.verdict))
        data.tier_reason = str(_get(verification, "reason", "") or "")
        for c in _get(verification, "charges", []) or []:
            data.charges.append(Charge(charge=str(_get(c, "charge", c)),
                                       ruling=str(_get(c, "ruling", "")),
                                       reason=str(_get(c, "reason", "") or "")))
        for p in _get(verification, "proven", []) or []:
            data.proven.append(ProofItem(claim=str(_get(p, "claim", p)), proven=bool(_get(p, "proven", True)),
                                         reason=str(_get(p, "reason", "") or "")))
        for s in _get(verification, "siblings", []) or []:
            data.siblings.append(SiblingRepo(name=str(_get(s, "name", s)), source=str(_get(s, "source", "") or ""),
                                             healthy=bool(_get(s, "healthy", True)),
                                             tests=list(_get(s, "tests", []) or [])))
        used = {str(_get(s, "name", "")): s for s in (_get(verification, "services", []) or [])}
        for svc in data.services:
            if svc.name in used:
                svc.healthy = bool(_get(used[svc.name], "healthy", True))
                svc.tests = list(_get(used[svc.name], "tests", []) or [])
    data.reproduce = default_reproduce(output_dir, data.test_command)
    return data
