"""One setupbot run on a local checkout, stage after stage:

    plan -> setup loop (build, target, diagnose, repair, clean replay) -> verification
         -> files (Dockerfile, devcontainer.json, compose.yaml, report, plan JSON)

Data flows one way (docs/architecture.md). The verification runs on the clean-replay image
only: a working container is never what the report vouches for. Everything a run created is
removed at the end unless ``engine.keep_containers`` is set.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot import progress, safefs
from bot import services as svc
from bot.compile.plan import Plan
from bot.config import Settings
from bot.ecosystems import devcontainer_for, input_files, make_plan, select
from bot.ecosystems.base import own_setup_loop
from bot.engine import Engine
from bot.errors import Interrupted, KnowledgeError, SetupbotError
from bot.graph import DepGraph
from bot.knowledge import open_store
from bot.loop.llm import LLMPlanner
from bot.loop.orchestrator import run_setup
from bot.outputs import outputs_from_pipeline, prepare_build_context, write_outputs
from bot.redact import global_redactor
from bot.verify import siblings as sib
from bot.verify.run import read_results, same_test_run, verification_argv, verify_environment

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
    interrupted: str = ""  # the signal that stopped the run, if one did
    ecosystems: list[str] = field(default_factory=list)  # detected, the plan's lead first

    @property
    def succeeded(self) -> bool:
        return self.run_record is not None and self.run_record.status == "success"


def _final_plan(first_plan: Any, run_record: Any) -> Any:
    """The plan as the loop left it: its graph carries every kept repair."""
    graph_json = (run_record.plan or {}).get("graph") if run_record is not None else None
    if not graph_json:
        return first_plan
    return Plan(
        repo=first_plan.repo,
        graph=DepGraph.from_json(graph_json),
        warnings=list(first_plan.warnings),
        timings=dict(first_plan.timings),
    )


def open_knowledge(settings: Settings, warnings: list[str]) -> Any:
    try:
        return open_store(settings.knowledge)
    except KnowledgeError as exc:
        # The run goes on with the loop's own rules; the report says the store was not used.
        warnings.append(f"experience base not used: {exc.what}")
        return None


def make_llm(settings: Settings) -> Any:
    if not settings.llm.enabled:
        return None
    return LLMPlanner(settings.llm, secrets=settings.secrets())


# Writing the outputs and records and removing the run's containers, after the loop or a signal.
FINISH_SECONDS = 20.0


class _Signals:
    """SIGTERM (a job's timeout, `docker stop`) and SIGINT stop the run where it is: the first
    one raises ``Interrupted`` in the main thread; the loop catches it and returns its record,
    and the pipeline writes what it has and cleans up. Once the run is finishing (``finishing()``)
    signals only get noted, so the outputs are written whole. Off the main thread (where
    signals cannot be handled) this does nothing."""

    def __init__(self) -> None:
        self.received = ""
        self.raising = True
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.received or not self.raising:
            log.warning("%s received; finishing: writing the outputs and cleaning up", name)
            self.received = self.received or name
            return
        self.received = name
        raise Interrupted(f"stopped by {name}")

    def finishing(self) -> None:
        self.raising = False

    @contextlib.contextmanager
    def installed(self):
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._old[sig] = signal.signal(sig, self._handle)
        try:
            yield self
        finally:
            for sig, old in self._old.items():
                signal.signal(sig, old)


def run_pipeline(
    repo: Path,
    settings: Settings,
    *,
    engine: Any = None,
    store: Any = None,
    llm: Any = None,
    use_knowledge: bool = True,
    verify: bool = True,
    write: bool = True,
    repository: str = "",
) -> PipelineResult:
    """The whole run. Outputs and records are written whatever happens: success, budget
    exhausted, or SIGTERM/SIGINT (``result.interrupted`` then names the signal). A lead
    ecosystem with a setup loop of its own (``DrivesOwnSetup``, today Rust) runs it; the rest
    share the setup loop."""
    repo = Path(repo).resolve()
    result = PipelineResult(repo=repo)
    signals = _Signals()
    with signals.installed():
        _run_pipeline(
            repo,
            settings,
            result,
            signals,
            engine=engine,
            store=store,
            llm=llm,
            use_knowledge=use_knowledge,
            verify=verify,
            write=write,
            repository=repository,
        )
    result.interrupted = signals.received
    return result


def _run_pipeline(
    repo: Path,
    settings: Settings,
    result: PipelineResult,
    signals: _Signals,
    *,
    engine: Any,
    store: Any,
    llm: Any,
    use_knowledge: bool,
    verify: bool,
    write: bool,
    repository: str,
) -> None:
    # The ecosystems come from the registry; a repository none recognises is not planned, built
    # or written to (no Dockerfile, no pull request): NotSupported says what was found.
    selection = select(repo)
    if not selection.supported:
        raise selection.error()
    own_setup = own_setup_loop(selection.lead)
    result.ecosystems = selection.names
    result.warnings += [f"refused in .github/setupbot.yml: {key}: {why}" for key, why in settings.refused]
    started = time.monotonic()
    deadline = started + float(settings.budgets.wall_clock)
    engine = engine or Engine.from_settings(settings)
    if write:
        _prepare_build_context(repo, result)
    try:
        if own_setup is not None:
            _run_own_setup(own_setup, repo, settings, engine, result, verify=verify)
        else:
            _run_shared_setup(
                repo,
                settings,
                engine,
                result,
                selection,
                deadline,
                store=store,
                llm=llm,
                use_knowledge=use_knowledge,
                verify=verify,
            )
    except Interrupted as exc:
        # outside the loop (opening the experience base, sizing the image): the record, if any,
        # is written as it stands
        result.warnings.append(f"{exc.what} before the run finished")
    finally:
        signals.finishing()
        if not settings.engine.keep_containers:
            engine.clean(engine.run_id)
    if write:
        _write_outputs(repo, settings, result, repository)
    log.info("run finished after %.0fs (budget %ss)", time.monotonic() - started, settings.budgets.wall_clock)


def _prepare_build_context(repo: Path, result: PipelineResult) -> None:
    note = prepare_build_context(repo)
    if note:
        result.warnings.append(note)


def _run_own_setup(
    setup: Any, repo: Path, settings: Settings, engine: Any, result: PipelineResult, *, verify: bool
) -> None:
    """The lead ecosystem's own loop: its plan, run record and verdict go where the shared
    loop's and the verification's do, so the outputs, records and exit code are made one way."""
    outcome = setup(repo, settings, engine, verify=verify)
    result.run_record = outcome.run_record
    result.plan = outcome.plan
    result.verification = outcome.verification
    replay = getattr(outcome.run_record, "replay", None) or {}
    if replay.get("ok") and replay.get("tag"):
        try:
            result.image_size = engine.image_size(replay["tag"])
        except SetupbotError as exc:
            result.warnings.append(f"image size not measured: {exc.what}")


def _run_shared_setup(
    repo: Path,
    settings: Settings,
    engine: Any,
    result: PipelineResult,
    selection: Any,
    deadline: float,
    *,
    store: Any,
    llm: Any,
    use_knowledge: bool,
    verify: bool,
) -> None:
    """The shared (Python) setup loop, then the prosecutor and judge on its replay image."""
    if store is None and use_knowledge:
        store = open_knowledge(settings, result.warnings)
    if llm is None:
        llm = make_llm(settings)
    captured: dict[str, Any] = {}

    def plan_once(*args: Any, **kwargs: Any) -> Any:
        captured["plan"] = make_plan(*args, selection=selection, **kwargs)
        return captured["plan"]

    # The trajectory is written at the end, not streamed into the repository: a file that
    # changes inside the build context would defeat the layer cache between iterations.
    record = run_setup(repo, settings, engine, store, llm, make_plan=plan_once)
    result.run_record = record
    result.plan = _final_plan(captured["plan"], record) if "plan" in captured else None
    tag = (record.replay or {}).get("tag")
    if (
        verify
        and record.replay.get("ok")
        and tag
        and result.plan is not None
        and record.status not in ("interrupted", "over_budget")
    ):
        _verify_replay(engine, repo, tag, record, settings, result, deadline)


def _verify_replay(
    engine: Any, repo: Path, tag: str, record: Any, settings: Settings, result: PipelineResult, deadline: float
) -> None:
    result.image_size = engine.image_size(tag)
    timeout = _verification_timeout(record, settings, deadline - time.monotonic())
    if timeout is None:
        result.warnings.append(
            f"verification skipped: {deadline - time.monotonic():.0f}s of the "
            f"{settings.budgets.wall_clock}s budget left, too little for the "
            "prosecutor and judge"
        )
        return
    progress.current().stage("verify")
    try:
        result.verification = _verify(
            engine,
            repo,
            tag,
            result.plan,
            settings,
            result.warnings,
            test_timeout=timeout,
            replay_run=getattr(record, "replay_run", None),
        )
    except Interrupted as exc:
        result.warnings.append(f"verification did not complete: {exc.what}")


def _write_outputs(repo: Path, settings: Settings, result: PipelineResult, repository: str) -> None:
    """The files (when a plan is known) and the run records (when the loop left a record)."""
    plan_known = result.plan is not None or bool(getattr(result.run_record, "plan", None))
    if plan_known:
        progress.current().stage("write")
        result.generated = outputs_from_pipeline(
            repo,
            plan=result.plan,
            run_record=result.run_record,
            verification=result.verification,
            output_dir=settings.output.dir,
            repository=repository or repo.name,
            image_size=result.image_size,
            settings=settings,
            gate=settings.publish.min_verdict,
            refused_config=settings.refused,
            customise_devcontainer=devcontainer_for,
            input_files=input_files,
        )
        result.written = write_outputs(repo, result.generated)
    if result.run_record is not None:
        result.records = write_run_records(repo, result)


def _verification_timeout(record: Any, settings: Settings, left: float) -> int | None:
    """The per-run test timeout for the prosecutor and judge, so that their runs (the tests
    without and with services, the judge's checks) end inside the budget; None when the time
    left cannot hold two test runs as long as the slowest one the loop saw."""
    slowest = max([s.duration or 0.0 for s in record.trajectory.steps if s.action == "test"] or [0.0])
    room = left - FINISH_SECONDS
    if room < 2 * slowest + 30:
        return None
    return max(30, min(int(settings.engine.command_timeout), int(room / 3)))


RECORDS_DIR = ".setupbot"


def write_run_records(repo: Path, result: PipelineResult) -> list[Path]:
    """The machine-readable records of the run (run record, trajectory, verification record).
    They go to .setupbot/, not to the output folder: they change with every run, and the pull
    request carries only what describes the environment."""
    import json

    redact = global_redactor()
    record = result.run_record
    files = {
        "run.json": json.dumps({**record.to_json(), "pipeline_warnings": result.warnings}, indent=2, default=str),
        "trajectory.jsonl": record.trajectory.to_jsonl(),
    }
    if result.verification is not None:
        files["verification.json"] = json.dumps(result.verification.to_json(), indent=2, default=str)
    written = []
    for name, text in files.items():
        # the one safe writer: a committed `.setupbot/run.json -> <host file>` or a symlinked
        # .setupbot/ is refused, never written through (SECURITY.md S13)
        try:
            written.append(
                safefs.write_text(
                    repo,
                    f"{RECORDS_DIR}/{name}",
                    redact(text if text.endswith("\n") or not text else text + "\n"),
                    allowed=[RECORDS_DIR],
                )
            )
        except safefs.UnsafePath as exc:
            result.warnings.append(f"run record not written: {exc.what}")
            log.warning("run record not written: %s", exc.what)
    return written


def _verify(
    engine: Any,
    repo: Path,
    tag: str,
    plan: Any,
    settings: Settings,
    warnings: list[str],
    test_timeout: int | None = None,
    replay_run: Any = None,
) -> Any:
    """Prosecutor and judge on the replay image, with the services and sibling repositories
    (the same inputs `setupbot verify` gathers). When none is to start and the clean replay's
    test run was this command with these variables on this image (``replay_run``), the
    verification examines that run instead of running the suite a third time."""
    t0 = time.monotonic()
    setting_services, w = svc.specs_from_settings(settings.services)
    warnings += w
    services = svc.merge_specs([svc.ServiceSpec.from_any(s) for s in plan.services], setting_services)
    siblings, w = sib.specs_from_settings(settings.siblings)
    warnings += w
    command = list(settings.target.test_command) or list(plan.test_command) or None
    env = {**plan.env, **dict(settings.target.env)}
    replayed = None
    if (
        replay_run is not None
        and not services
        and not siblings
        and replay_run.tag == tag
        and replay_run.env == env
        and same_test_run(replay_run.argv, verification_argv(command or ["python", "-m", "pytest"]))
    ):
        replayed = read_results(replay_run.output, replay_run.junit_xml, replay_run.exit_code, replay_run.timed_out)
    try:
        record = verify_environment(
            engine,
            repo,
            tag,
            services=services,
            ci_env=env,
            siblings=siblings,
            test_command=command,
            test_timeout=test_timeout or settings.engine.command_timeout,
            warnings=[str(w) for w in plan.warnings],
            replayed=replayed,
            replayed_from="the clean replay's test run (the same command and variables in a fresh container of this image)",
        )
    except SetupbotError as exc:
        warnings.append(f"verification did not complete: {exc.what}")
        return None
    log.info("verification took %.0fs", time.monotonic() - t0)
    return record
