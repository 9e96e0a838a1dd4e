"""What the setup report needs, as one plain dataclass.

``ReportData`` is filled by small adapters from the plan, the run record and the verification
record when those exist (``from_pipeline``), and stays constructible by hand so the report, the
PR body and the job summary can be rendered and tested without running a setup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.graph.lock import lock_summary
from bot.graph.model import DepGraph
from bot.junit import TestCounts

VERDICT_TIERS = ("Full", "Mostly", "Partial", "Shallow", "Failed")


@dataclass
class ProofItem:
    """One thing that was (or was not) proven, and why."""

    claim: str
    proven: bool
    reason: str = ""


@dataclass
class ServiceUse:
    name: str
    image: str = ""
    healthy: bool = True
    tests: list[str] = field(default_factory=list)  # tests that needed this service


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
    ruling: str  # "upheld" | "dismissed"
    reason: str = ""


@dataclass
class RequirementRow:
    type: str
    name: str
    state: str
    evidence: str = ""  # "file:line"
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
    # whether the prosecutor and the judge ran: without them the verdict stays at its floor
    # (Shallow) whatever the tests did, and the report says that instead of what Shallow means
    judged: bool = True
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
    timings: dict[str, float] = field(default_factory=dict)  # phase -> seconds
    image_size: int | None = None  # bytes
    llm_tokens: int = 0
    degraded: bool = False
    refused_actions: list[str] = field(default_factory=list)  # LLM replies refused by validation (P2)
    # Keys of the repository's .github/setupbot.yml that only the operator may set (S11)
    refused_config: list[str] = field(default_factory=list)
    python: str = ""
    # the lead runtime when it is not Python ("Rust 1.85"); the report names it instead of Python
    runtime: str = ""
    # the lead ecosystem when the plan names it ("rust"); "" for a Python plan
    ecosystem: str = ""
    base_image: str = ""
    base_image_digest: str = ""  # registry images only
    base_image_origin: str = ""  # "registry" | "standin" | "local" | "not resolved"
    test_command: list[str] = field(default_factory=list)
    output_dir: str = ".devcontainer"
    reproduce: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # files setupbot wrote / proposes
    pending_changes: dict[str, str] = field(default_factory=dict)  # hand-written file -> diff
    not_written: dict[str, str] = field(default_factory=dict)  # path setupbot may not write -> why
    gate: str = "Mostly"  # publish.min_verdict
    lock: dict[str, Any] = field(default_factory=dict)  # bot.graph.lock.lock_summary
    # the stage timeline SVG next to the report (a file name in ``output_dir``), when one was written
    timeline: str = ""

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
    def at_gate(self) -> bool:
        """The verdict is at or above ``gate`` (Full > Mostly > Partial > Shallow > Failed)."""
        return verdict_at_least(self.verdict, self.gate)

    @property
    def proven_ok(self) -> bool:
        """Only then may a title, body or summary say "proven" or "verified"."""
        return bool(self.replay_ok) and self.at_gate

    @property
    def bootstrap_command(self) -> str:
        """The command that builds the offline stand-in of this plan's base image: another
        ecosystem's images are built only when it is named."""
        extra = f" --ecosystem {self.ecosystem}" if self.ecosystem and self.ecosystem != "python" else ""
        return f"setupbot images bootstrap{extra}"

    @property
    def lock_unit(self) -> str:
        """What the lock pins, in the ecosystem's own word (Python: distributions; Rust: crates)."""
        return str(self.lock.get("unit") or "distributions")

    @property
    def total_seconds(self) -> float:
        # The run's own total when it has one: its parts (plan, build, ...) are inside it.
        for key in ("total_seconds", "total"):
            if key in self.timings:
                return round(float(self.timings[key]), 1)
        return round(sum(self.timings.values()), 1)


def verdict_at_least(verdict: str, gate: str) -> bool:
    if verdict not in VERDICT_TIERS:
        return False
    floor = gate if gate in VERDICT_TIERS else "Mostly"
    return VERDICT_TIERS.index(verdict) <= VERDICT_TIERS.index(floor)


def default_reproduce(output_dir: str, test_command: Iterable[str], services: bool = False) -> list[str]:
    """Two commands a reviewer can paste: build (and start the services), run the tests."""
    import shlex

    cmd = list(test_command) or ["python", "-m", "pytest"]
    if services:
        compose = shlex.quote(output_dir.rstrip("/") + "/compose.yaml")
        return [
            f"docker compose -f {compose} up -d --build --wait",
            f"docker compose -f {compose} exec app {shlex.join(cmd)}",
        ]
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
    """``file:line`` of the first piece of evidence (``file`` alone when it has no line)."""
    if not evidence:
        return ""
    first = evidence[0]
    if isinstance(first, (list, tuple)) and len(first) >= 2:
        return f"{first[0]}:{first[1]}" if first[1] not in (None, "", 0) else str(first[0])
    file, line = _get(first, "file"), _get(first, "line")
    if file:
        return f"{file}:{line}" if line else str(file)
    return str(first)


def _unused_extras(nodes: list[Any], edges: list[Any]) -> dict[str, str]:
    """{node id: extra} for what is UNKNOWN only because it belongs to an optional extra the plan did
    not install (the project goes in with its test extras alone): the package, and an import
    that maps to nothing else. The table says so, where a bare UNKNOWN left the reader guessing."""
    extra_of: dict[str, str] = {}
    unknown: set[str] = set()
    for node in nodes:
        state = str(getattr(_get(node, "state"), "value", _get(node, "state", "")))
        if state != "UNKNOWN" or _get(node, "action"):
            continue
        unknown.add(_get(node, "id", ""))
        group = str((_get(node, "attrs", {}) or {}).get("group") or "")
        if group.startswith("extra:"):
            extra_of[_get(node, "id", "")] = group.removeprefix("extra:")
    targets: dict[str, set[str]] = {}
    for edge in edges:
        src, dst, kind = (list(edge) + ["", "", ""])[:3]
        if kind == "mapping" and src in unknown:
            targets.setdefault(src, set()).add(dst)
    for src, dsts in targets.items():
        extras = {extra_of.get(d) for d in dsts}
        if len(extras) == 1 and None not in extras:
            extra_of[src] = extras.pop() or ""
    return extra_of


def requirement_rows(plan: Any) -> list[RequirementRow]:
    """The requirements table: every graph node except the target, with the Dockerfile line
    (from ``CompiledDockerfile.lines`` provenance) that each one produced. Reads a ``Plan`` or
    its JSON form (``plan.to_json()``, as the run record keeps it)."""
    graph = _get(plan, "graph")
    if isinstance(plan, dict):
        lines = plan.get("dockerfile_lines", []) or []
    else:
        lines = _get(_get(plan, "dockerfile"), "lines", []) or []
    line_of: dict[str, str] = {}
    for line in lines:
        for node_id in _get(line, "node_ids", []) or []:
            line_of.setdefault(node_id, str(_get(line, "text", "")).strip())
    nodes = _get(graph, "nodes", {}) or {}
    if isinstance(nodes, dict):
        nodes = list(nodes.values())
    unused_extra = _unused_extras(nodes, _get(graph, "edges", []) or [])
    rows = []
    for node in nodes:
        node_type = str(getattr(_get(node, "type"), "value", _get(node, "type", "")))
        if node_type.upper() == "TARGET":
            continue
        state = str(getattr(_get(node, "state"), "value", _get(node, "state", "")))
        dropped = (_get(node, "attrs", {}) or {}).get("dropped")
        if dropped and not _get(node, "action"):
            # planned, then left out of the final Dockerfile (build-essential when every locked
            # distribution has a wheel or is pure Python): no line installs it
            state = f"left out: {dropped}"
        elif _get(node, "id", "") in unused_extra:
            state = f"not installed: optional extra '{unused_extra[_get(node, 'id', '')]}' (not a test extra)"
        rows.append(
            RequirementRow(
                type=node_type,
                name=str(_get(node, "name", "")),
                state=state,
                evidence=_evidence_text(_get(node, "evidence", [])),
                dockerfile_line=line_of.get(_get(node, "id", ""), ""),
            )
        )
    return rows


def _test_counts(tests: Any) -> TestCounts:
    """From ``TestResults`` (outcomes by test id), its JSON summary, or plain counts."""
    outcomes = _get(tests, "outcomes")
    if isinstance(outcomes, dict) and outcomes:
        values = list(outcomes.values())
        return TestCounts(
            collected=len(values),
            passed=values.count("passed"),
            failed=values.count("failed"),
            skipped=values.count("skipped"),
            errors=values.count("error"),
        )
    summary = _get(tests, "summary", tests)
    summary = summary() if callable(summary) else summary

    def n(*keys):
        return int(next((_get(summary, k) for k in keys if _get(summary, k) is not None), 0) or 0)

    return TestCounts(
        collected=n("collected", "total"),
        passed=n("passed"),
        failed=n("failed"),
        skipped=n("skipped"),
        errors=n("errors", "error"),
    )


def _warning_text(w: Any) -> str:
    if isinstance(w, str):
        return w
    if isinstance(w, (list, tuple)) and len(w) == 3:
        file, line, message = w
    else:
        file, line, message = _get(w, "file"), _get(w, "line"), _get(w, "message", w)
    if not file:
        return str(message)
    return f"{file}:{line}: {message}" if line else f"{file}: {message}"


def _add_warnings(data: Any, items: Any) -> None:
    """The warnings of one source, each said once: the plan's reach the run record and the
    verification again."""
    seen = set(data.warnings)
    for w in items or []:
        text = _warning_text(w)
        if text not in seen:
            seen.add(text)
            data.warnings.append(text)


def _lock_summary(plan: Any) -> dict[str, Any]:
    graph = _get(plan, "graph")
    if isinstance(graph, dict):
        try:
            graph = DepGraph.from_json(graph)
        except (KeyError, TypeError, ValueError):
            return {}
    return lock_summary(graph) if graph is not None else {}


def from_pipeline(
    plan: Any = None,
    run_record: Any = None,
    verification: Any = None,
    *,
    repository: str = "",
    output_dir: str = ".devcontainer",
    image_size: int | None = None,
) -> ReportData:
    """Build ``ReportData`` from whatever of the plan (``bot.graph.Plan`` or its JSON), the run
    record (``bot.loop.RunRecord``) and the verification record (``bot.verify.VerificationRecord``)
    exist. Missing parts show as "not run" in the report."""
    data = ReportData(repository=repository, output_dir=output_dir, image_size=image_size)
    if plan is None:
        plan = _get(run_record, "plan") or None
    if plan is not None:
        _add_plan(data, plan)
    if run_record is not None:
        _add_run_record(data, run_record)
    if verification is None:
        data.judged = False
        data.tier_reason = data.tier_reason or "no prosecutor and judge: they did not run"
    else:
        _add_verification(data, verification, run_record)
    data.reproduce = default_reproduce(output_dir, data.test_command)
    return data


def _add_plan(data: ReportData, plan: Any) -> None:
    """What the plan decided: Python, base image, test command, requirements, lock, services."""
    data.python = str(_get(plan, "python", "") or "")
    data.runtime = str(_get(plan, "runtime", "") or "")
    data.ecosystem = str(_get(plan, "ecosystem", "") or "")
    data.base_image = str(_get(plan, "base_image", "") or "")
    data.base_image_digest = str(_get(plan, "base_image_digest", "") or "")
    data.base_image_origin = str(_get(plan, "base_image_origin", "") or "")
    data.test_command = list(_get(plan, "test_command", []) or [])
    data.requirements = requirement_rows(plan)
    # an ecosystem whose lock is not a graph node of Python's (Cargo.lock) says it itself
    data.lock = dict(_get(plan, "lock_summary", None) or _lock_summary(plan))
    _add_warnings(data, _get(plan, "warnings", []))
    for svc in _get(plan, "services", []) or []:
        data.services.append(ServiceUse(name=str(_get(svc, "name", "")), image=str(_get(svc, "image", "") or "")))


def _add_run_record(data: ReportData, run_record: Any) -> None:
    """What the loop did: the clean replay, test counts, repairs, timings, LLM use, members."""
    replay = _get(run_record, "replay") or None
    if replay is not None:
        _add_replay(data, replay)
    tests = _get(run_record, "tests")
    if tests is not None:
        data.tests = _test_counts(tests)
    if replay is not None and not data.tests.collected:
        # a runner that names no test (a runtests.py that prints only "Ran 175 tests" and
        # "FAILED (failures=46)"): the replay's record has the counts of its summary
        data.tests = _test_counts(_get(replay, "tests") or {})
    for repair in _get(run_record, "repairs", []) or []:
        data.repairs.append(_repair_entry(repair))
    data.timings.update({str(k): float(v) for k, v in (_get(run_record, "timings", {}) or {}).items()})
    usage = _get(run_record, "llm_usage", {}) or {}
    data.llm_tokens = int(_get(usage, "tokens", 0) or _get(run_record, "llm_tokens", 0) or 0)
    data.degraded = bool(_get(run_record, "degraded", False))
    for refusal in _get(usage, "refusals", []) or []:
        data.refused_actions.append(f"{_get(refusal, 'reason', refusal)} — reply: {_get(refusal, 'reply', '')}"[:400])
    _add_warnings(data, _get(run_record, "warnings", []))
    for m in _get(run_record, "members", []) or []:
        # a workspace: every member with the results of its own tests
        t = _get(m, "tests", {}) or {}
        ran = int(t.get("passed", 0)) + int(t.get("failed", 0)) + int(t.get("error", 0))
        name = f"member {_get(m, 'name', '')} ({_get(m, 'path', '')})"
        ci = "tested by CI" if _get(m, "tested_by_ci") else "no workflow names it"
        if not ran and not int(t.get("skipped", 0)):
            # installed and importable, but its folder holds no test: nothing to prove it by
            data.proven.append(ProofItem(f"{name}: installed; no test was collected from it", False, ci))
            continue
        data.proven.append(
            ProofItem(
                f"{name}: {t.get('passed', 0)} passed, "
                f"{t.get('failed', 0)} failed, {t.get('error', 0)} errors, {t.get('skipped', 0)} skipped",
                ran > 0,
                ci,
            )
        )
    for item in _get(run_record, "unresolved", []) or []:
        data.proven.append(
            ProofItem(
                str(_get(item, "message", "") or _get(item, "key", item)),
                False,
                _unresolved_reason(
                    str(_get(item, "kind", "") or ""),
                    str(_get(item, "category", "") or ""),
                    str(_get(item, "key", "") or ""),
                ),
            )
        )


def _unresolved_reason(kind: str, category: str, key: str) -> str:
    """Why the loop left a failure, in the reviewer's words: a host outside that did not answer
    is named, with where the setup can be proven instead."""
    if kind == "external_network":
        where = f"{key}, outside the container," if key else "a host outside the container"
        return f"it reaches {where} which does not answer where setupbot ran; prove it where it does"
    return category or "unresolved by the loop"


def _add_replay(data: ReportData, replay: Any) -> None:
    """The clean replay's outcome, as a proof item (its duration goes to the timings only)."""
    data.replay_ok = bool(_get(replay, "ok", False))
    parts = [
        f"{k.replace('_', ' ')} {_get(replay, k)}" for k in ("collect_exit", "test_exit") if _get(replay, k) is not None
    ]
    # the replay's duration is a timing: it goes to the PR body and the job summary
    # (through ``timings``), never into the committed report
    if _get(replay, "seconds") is not None and "replay_seconds" not in data.timings:
        data.timings["replay_seconds"] = float(_get(replay, "seconds"))
    if _get(replay, "note"):
        parts.append(str(_get(replay, "note")))  # e.g. the test run timed out
    data.replay_detail = str(_get(replay, "detail", "") or ", ".join(parts))
    dev = _get(replay, "dev_stage") or None
    stage = "'s tested stage" if dev is not None else ""
    if _get(replay, "first_build", False):
        # the run's first image was already a from-scratch build of the final Dockerfile
        what = (
            f"clean replay: the compiled Dockerfile{stage} built from scratch (no step from the "
            "engine's cache) as the run's first image, which ran the tests and needed no repair"
        )
    elif _get(replay, "fresh_container", False):
        # that image again, in a fresh container: the repairs since changed no layer
        what = (
            f"clean replay: the compiled Dockerfile{stage} built from scratch (no step from the "
            "engine's cache) as the run's first image; the repairs since changed only the test "
            "command or the tests' variables, no layer, and a fresh container on that image ran the tests"
        )
    else:
        what = f"clean replay: the compiled Dockerfile{stage} rebuilt from scratch and ran the tests"
    data.proven.append(ProofItem(what, data.replay_ok, data.replay_detail))
    if dev is not None:
        data.proven.append(_dev_stage_item(dev))


def _dev_stage_item(dev: Any) -> ProofItem:
    """The development stage (git and the user on top of the tested stage): built, or why not."""
    versions = _get(dev, "versions", {}) or {}
    what = ", ".join(f"{name} {version}" for name, version in sorted(versions.items())) or "git"
    if _get(dev, "ok", False):
        return ProofItem(
            f"development stage: {what} and the non-root user on top of the tested image",
            True,
            f"built on {_get(dev, 'on', '') or 'a tested image of the run'}; no test runs in it, the editor does",
        )
    return ProofItem(
        "development stage: git and the non-root user on top of the tested image",
        False,
        "it did not build: " + str(_get(dev, "log_tail", "") or "no log"),
    )


def _repair_entry(repair: Any) -> Repair:
    """One repair the loop applied: what it did, for which failure, and why it applies."""
    cand = _get(repair, "candidate")
    if cand is None:
        return Repair(str(_get(repair, "description", repair)), [str(u) for u in (_get(repair, "unit_ids", []) or [])])
    describe = getattr(cand, "describe", None)
    text = describe() if callable(describe) else str(_get(cand, "why", cand))
    # what failed, and why this fix applies: the reviewer checks the reason, not the verb
    sig = _get(repair, "signature")
    sig_text = sig.describe() if hasattr(sig, "describe") else ""
    why = str(_get(cand, "why", "") or "")
    if sig_text or why:
        text += " — " + "; ".join(t for t in (f"for {sig_text}" if sig_text else "", why) if t)
    unit = _get(cand, "unit_id")
    return Repair(text, [str(unit)] if unit else [])


def _add_verification(data: ReportData, verification: Any, run_record: Any) -> None:
    """What verification found: the verdict, charges and rulings, services, siblings, proofs."""
    verdict = _get(verification, "verdict", {})
    if isinstance(verdict, str):
        data.verdict = verdict
    elif verdict:
        data.verdict = str(_get(verdict, "tier", data.verdict))
        data.tier_reason = "; ".join(str(r) for r in (_get(verdict, "reasons", []) or []))
    _add_charges(data, verification)
    needed = _get(_get(verification, "attribution", {}) or {}, "needed", {}) or {}
    _add_verified_services(data, verification, needed)
    for s in _get(verification, "siblings", []) or []:
        name = str(_get(s, "name", ""))
        data.siblings.append(
            SiblingRepo(
                name=name,
                source=str(_get(s, "source", "") or ""),
                healthy=bool(_get(s, "healthy", True)),
                tests=list(needed.get(name, _get(s, "tests", []) or [])),
            )
        )
    for p in _get(verification, "proven", []) or []:
        data.proven.append(
            ProofItem(str(_get(p, "claim", p)), bool(_get(p, "proven", True)), str(_get(p, "reason", "") or ""))
        )
    for r in data.charges:
        if r.ruling == "dismissed":
            data.proven.append(ProofItem(f"charge answered: {r.charge}", True, r.reason))
        elif r.ruling == "upheld":
            data.proven.append(ProofItem(f"charge stands: {r.charge}", False, r.reason))
    _add_warnings(data, _get(verification, "warnings", []))
    if run_record is None:
        tests = _get(verification, "tests_with_siblings")
        if tests:
            data.tests = _test_counts(tests)


def _add_charges(data: ReportData, verification: Any) -> None:
    """The prosecutor's charges with the judge's rulings (an unruled charge says so)."""
    charges = {str(_get(c, "id", i)): c for i, c in enumerate(_get(verification, "charges", []) or [])}
    rulings = _get(verification, "rulings", []) or []
    ruled = set()
    for r in rulings:
        c = charges.get(str(_get(r, "charge_id", "")), {})
        ruled.add(str(_get(r, "charge_id", "")))
        subject = _get(c, "subject", "")
        data.charges.append(
            Charge(
                charge=f"{_get(r, 'kind', _get(c, 'kind', ''))}{': ' + str(subject) if subject else ''}",
                ruling=str(_get(r, "decision", "")),
                reason=str(_get(r, "reason", "") or "") + _dismissed_summary(_get(r, "dismissed_tests", {}) or {}),
            )
        )
    for cid, c in charges.items():
        if cid not in ruled:
            data.charges.append(Charge(f"{_get(c, 'kind', '')}: {_get(c, 'subject', '')}", "not ruled", ""))


# Why the judge set a failing test aside, in the reviewer's words (bot.verify.judge's rules).
DISMISSAL_WORDS = {
    "own_assertion": "their own assertions failed",
    "external_cause": "they reach outside the container",
    "not_reproduced": "they passed when run again",
}


def _dismissed_summary(dismissed: Mapping[str, str]) -> str:
    """Which failing tests a ruling set aside, and by which rule: the reviewer sees what was
    waved through ("own_assertion: test_md::test_parsing ×4, ...") and can disagree."""
    if not dismissed:
        return ""
    by_rule: dict[str, dict[str, int]] = {}
    for test, rule_ in dismissed.items():
        short = test.split("[", 1)[0].rsplit(".", 1)[-1]
        names = by_rule.setdefault(str(rule_), {})
        names[short] = names.get(short, 0) + 1
    parts = []
    for rule_, names in sorted(by_rule.items()):
        shown = [f"{n} ×{k}" if k > 1 else n for n, k in list(names.items())[:3]]
        more = f", … and {len(names) - 3} more" if len(names) > 3 else ""
        parts.append(f"{DISMISSAL_WORDS.get(rule_, rule_)} ({rule_}): {', '.join(shown)}{more}")
    return " — " + "; ".join(parts)


def _add_verified_services(data: ReportData, verification: Any, needed: Any) -> None:
    """The services verification started: image, health, the tests that need them."""
    by_name = {s.name: s for s in data.services}
    for s in _get(verification, "services", []) or []:
        name = str(_get(s, "name", ""))
        svc = by_name.get(name) or ServiceUse(name=name)
        svc.image = str(_get(s, "image", "") or _get(s, "requested_image", "") or svc.image)
        svc.healthy = bool(_get(s, "healthy", True))
        svc.tests = list(needed.get(name, svc.tests))
        if name not in by_name:
            data.services.append(svc)
        data.proven.append(
            ProofItem(
                f"service {name} started and answered its health check", svc.healthy, str(_get(s, "note", "") or "")
            )
        )
