"""One setupbot run on a local checkout, stage after stage:

    plan -> setup loop (build, target, diagnose, repair, clean replay) -> verification
         -> files (Dockerfile, devcontainer.json, compose.yaml, report, plan JSON)

Data flows one way (docs/architecture.md). The verification runs on the clean-replay image
only: a working container is never what the report vouches for. Everything a run created is
removed at the end unless ``engine.keep_containers`` is set.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot import progress
from bot.config import Settings
from bot.errors import KnowledgeError, SetupbotError

log = logging.getLogger(__name__)


@dataclass
class PipelineResult:
    repo: Path
    plan: Any = None
    run_record: Any = None
    verification: Any = None
    image_size: int | None = None
    generated: Any = None
    written: Any = None
    records: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        return self.run_record is not None and self.run_record.status == "success"


def _final_plan(first_plan: Any, run_record: Any) -> Any:
    """The plan as the loop left it: its graph carries every kept repair."""
    from bot.graph import DepGraph
    from bot.graph.plan import Plan

    graph_json = (run_record.plan or {}).get("graph") if run_record is not None else None
    if not graph_json:
        return first_plan
    return Plan(repo=first_plan.repo, graph=DepGraph.from_json(graph_json),
                warnings=list(first_plan.warnings), timings=dict(first_plan.timings))


def open_knowledge(settings: Settings, warnings: list[str]) -> Any:
    from bot.knowledge import open_store

    try:
        return open_store(settings.knowledge)
    except KnowledgeError as exc:
        # The run goes on with the loop's own rules; the report says the store was not used.
        warnings.append(f"experience base not used: {exc.what}")
        return None


def make_llm(settings: Settings) -> Any:
    if not settings.llm.enabled:
        return None
    from bot.loop.llm import LLMPlanner

    return LLMPlanner(settings.llm, secrets=settings.secrets())


def run_pipeline(repo: Path, settings: Settings, *, engine: Any = None, store: Any = None,
                 llm: Any = None, use_knowledge: bool = True, verify: bool = True,
                 write: bool = True, repository: str = "") -> PipelineResult:
    from bot.engine import Engine
    from bot.graph import make_plan
    from bot.loop.orchestrator import run_setup
    from bot.outputs import outputs_from_pipeline, write_outputs

    repo = Path(repo).resolve()
    result = PipelineResult(repo=repo)
    result.warnings += [f"refused in .github/setupbot.yml: {key}: {why}" for key, why in settings.refused]
    engine = engine or Engine.from_settings(settings)
    if store is None and use_knowledge:
        store = open_knowledge(settings, result.warnings)
    if llm is None:
        llm = make_llm(settings)

    if write:
        from bot.outputs import prepare_build_context

        note = prepare_build_context(repo)
        if note:
            result.warnings.append(note)
    captured: dict[str, Any] = {}

    def plan_once(*args: Any, **kwargs: Any) -> Any:
        captured["plan"] = make_plan(*args, **kwargs)
        return captured["plan"]

    try:
        # The trajectory is written at the end, not streamed into the repository: a file that
        # changes inside the build context would defeat the layer cache between iterations.
        record = run_setup(repo, settings, engine, store, llm, make_plan=plan_once)
        result.run_record = record
        result.plan = _final_plan(captured["plan"], record) if "plan" in captured else None
        tag = (record.replay or {}).get("tag")
        if verify and record.replay.get("ok") and tag and result.plan is not None:
            result.image_size = engine.image_size(tag)
            progress.current().stage("verify")
            result.verification = _verify(engine, repo, tag, result.plan, settings, result.warnings)
    finally:
        if not settings.engine.keep_containers:
            engine.clean(engine.run_id)

    if write and (result.plan is not None or result.run_record is not None):
        progress.current().stage("write")
        result.generated = outputs_from_pipeline(
            repo, plan=result.plan, run_record=result.run_record, verification=result.verification,
            output_dir=settings.output.dir, repository=repository or repo.name,
            image_size=result.image_size, settings=settings, gate=settings.publish.min_verdict,
            refused_config=settings.refused)
        result.written = write_outputs(repo, result.generated)
    if write and result.run_record is not None:
        result.records = write_run_records(repo, result)
    return result


RECORDS_DIR = ".setupbot"


def write_run_records(repo: Path, result: PipelineResult) -> list[Path]:
    """The machine-readable records of the run (run record, trajectory, verification record).
    They go to .setupbot/, not to the output folder: they change with every run, and the pull
    request carries only what describes the environment."""
    import json

    from bot.redact import global_redactor

    from bot import safefs

    redact = global_redactor()
    record = result.run_record
    files = {"run.json": json.dumps({**record.to_json(), "pipeline_warnings": result.warnings},
                                    indent=2, default=str),
             "trajectory.jsonl": record.trajectory.to_jsonl()}
    if result.verification is not None:
        files["verification.json"] = json.dumps(result.verification.to_json(), indent=2, default=str)
    written = []
    for name, text in files.items():
        # the one safe writer: a committed `.setupbot/run.json -> <host file>` or a symlinked
        # .setupbot/ is refused, never written through (SECURITY.md S13)
        try:
            written.append(safefs.write_text(repo, f"{RECORDS_DIR}/{name}",
                                             redact(text if text.endswith("\n") or not text else text + "\n"),
                                             allowed=[RECORDS_DIR]))
        except safefs.UnsafePath as exc:
            result.warnings.append(f"run record not written: {exc.what}")
            log.warning("run record not written: %s", exc.what)
    return written


def _verify(engine: Any, repo: Path, tag: str, plan: Any, settings: Settings,
            warnings: list[str]) -> Any:
    """Prosecutor and judge on the replay image, with the services and sibling repositories
    (the same inputs `setupbot verify` gathers)."""
    from bot.verify import services as svc
    from bot.verify import siblings as sib
    from bot.verify.run import verify_environment

    t0 = time.monotonic()
    setting_services, w = svc.specs_from_settings(settings.services)
    warnings += w
    services = svc.merge_specs([svc.ServiceSpec.from_any(s) for s in plan.services], setting_services)
    siblings, w = sib.specs_from_settings(settings.siblings)
    warnings += w
    command = list(settings.target.test_command) or list(plan.test_command) or None
    env = {**plan.env, **dict(settings.target.env)}
    try:
        record = verify_environment(
            engine, repo, tag, services=services, ci_env=env, siblings=siblings,
            test_command=command, test_timeout=settings.engine.command_timeout,
            warnings=[str(w) for w in plan.warnings])
    except SetupbotError as exc:
        warnings.append(f"verification did not complete: {exc.what}")
        return None
    log.info("verification took %.0fs", time.monotonic() - t0)
    return record
