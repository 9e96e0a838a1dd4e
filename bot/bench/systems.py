"""The systems a benchmark compares. Each one turns an exported repository into a Dockerfile
(timed); ``setupbot`` may also hand back its own clean-replay score, which the runner reuses
instead of building the same Dockerfile a second time.

The repository's lead ecosystem (``SystemContext.ecosystem``, from ``bot.ecosystems.select``)
decides what each system does: for a lead with a setup loop of its own (Rust), ``setupbot`` runs
that loop, as `setupbot run` does; ``declared`` renders that ecosystem's naive template; a
system with nothing to offer the ecosystem (``pipreqs`` outside Python) is skipped with a reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.bench import previous
from bot.bench.baselines import Produced, produce_declared, produce_declared_rust, produce_pipreqs
from bot.bench.score import Score, run_cargo_tests_in_image
from bot.ecosystems import REGISTRY, make_plan, select
from bot.ecosystems.base import own_setup_loop
from bot.ecosystems.rust.setup import offered_versions
from bot.junit import TestCounts
from bot.knowledge import open_store
from bot.loop import run_setup
from bot.loop.llm import LLMPlanner
from bot.markers import DOCKERIGNORE
from bot.outputs import prepare_build_context

SYSTEMS = ("setupbot", "declared", "pipreqs")


@dataclass
class SystemContext:
    repo_dir: Path  # the system's private copy of the exported tree
    scratch: Path  # a private scratch directory
    engine: Any  # bot.engine.Engine for this pair (labelled with its run id)
    settings: Any  # bot.config.Settings
    test_timeout: int = 900
    pipreqs_timeout: int = 300
    collect_timeout: int = 600
    ecosystem: str = "python"  # the repository's lead ecosystem


@dataclass
class SystemResult:
    produced: Produced
    replay: Score | None = None  # a score measured by the system's own clean replay
    steps: int | None = None
    repairs: int | None = None
    tokens: int = 0
    mode: str = ""
    extra: dict = field(default_factory=dict)
    skipped: str = ""  # why the system does not apply to this repository: no Dockerfile, no score


def run_declared(ctx: SystemContext) -> SystemResult:
    if ctx.ecosystem == "rust":
        produced = produce_declared_rust(offered_versions(ctx.engine, ctx.settings))
        return SystemResult(produced, steps=0, repairs=0, mode="template")
    return SystemResult(produce_declared(ctx.repo_dir), steps=0, repairs=0, mode="template")


def run_pipreqs(ctx: SystemContext) -> SystemResult:
    if ctx.ecosystem != "python":
        why = (
            f"pipreqs infers Python requirements from imports; it has nothing to say about a {ctx.ecosystem} repository"
        )
        return SystemResult(Produced("pipreqs", ok=False, reason=why), steps=0, repairs=0, mode="skipped", skipped=why)
    return SystemResult(
        produce_pipreqs(ctx.repo_dir, ctx.scratch, timeout=ctx.pipreqs_timeout), steps=0, repairs=0, mode="template"
    )


# --- setupbot ----------------------------------------------------------------------------------


def _counts_from_summary(summary: dict) -> TestCounts:
    """TestCounts from a run record's ``TestResults.counts()`` (passed/failed/error/skipped)."""
    return TestCounts(
        passed=int(summary.get("passed") or 0),
        failed=int(summary.get("failed") or 0),
        errors=int(summary.get("error") or summary.get("errors") or 0),
        skipped=int(summary.get("skipped") or 0),
    )


def _replay_build_seconds(record: Any) -> float | None:
    """The no-cache build of the last replay: the trajectory step the loop records as
    ``replay`` (its build), not ``replay-result`` (build plus target); or the first image's
    build when that image was the replay."""
    replay = getattr(record, "replay", None) or {}
    if (
        isinstance(replay, dict)
        and (replay.get("first_build") or replay.get("fresh_container"))
        and replay.get("build_seconds") is not None
    ):
        # the run's first image, built from scratch, was the replay or ran it (bot.loop.replay)
        return round(float(replay["build_seconds"]), 2)
    steps = getattr(getattr(record, "trajectory", None), "steps", None) or []
    durations = [s.duration for s in steps if getattr(s, "action", "") == "replay"]
    return round(durations[-1], 2) if durations else None


def replay_score_from_record(record: Any, engine: Any = None) -> Score | None:
    """The clean replay of a successful RunRecord as a Score. None when the run did not end in
    a replayed success: an earlier replay belongs to an earlier Dockerfile, so the runner then
    builds the final Dockerfile itself."""
    replay = record.get("replay") if isinstance(record, dict) else getattr(record, "replay", None)
    status = record.get("status") if isinstance(record, dict) else getattr(record, "status", None)
    if not replay or status != "success":
        return None
    if not any(int(v or 0) for v in (replay.get("tests") or {}).values()):
        # the replay ran a runner without JUnit (runtests.py, manage.py test): no counts to reuse,
        # so the benchmark builds and runs pytest itself
        return None
    score = Score(built=True)
    score.ebsr = bool(replay.get("ok")) and replay.get("collect_exit") == 0
    score.collect_exit = replay.get("collect_exit")
    score.test_exit = replay.get("test_exit")
    score.tests = _counts_from_summary(replay.get("tests") or {})
    score.counts_from = "junit"
    score.build_seconds = _replay_build_seconds(record)
    tag = replay.get("tag")
    if tag and engine is not None:
        try:
            score.image_bytes = int(engine.image_size(tag))
        except Exception:  # noqa: BLE001 - image already gone: size unknown
            score.image_bytes = None
    if not score.ebsr:
        score.reason = f"replay: test collection exited {score.collect_exit}"
    return score


def _llm_for(settings: Any) -> Any:
    """The LLM planner when one is configured; None keeps the default deterministic path."""
    if not getattr(getattr(settings, "llm", None), "enabled", False):
        return None
    return LLMPlanner(settings.llm, secrets=settings.secrets())


def _produced_from_record(record: Any, seconds: float) -> Produced:
    """The final Dockerfile of a setup loop's RunRecord, and what the run says about itself."""
    text = record.dockerfile or ""
    return Produced(
        "setupbot",
        text,
        seconds,
        ok=bool(text),
        reason="" if text else f"the setup loop produced no Dockerfile ({record.status})",
        details={
            "loop_status": record.status,
            "remaining": (record.remaining or "")[:1000],
            "unresolved": record.unresolved[:5],
            "timings": record.timings,
            "warnings": [str(w)[:300] for w in record.warnings[:20]],
            "degraded": record.degraded,
        },
    )


def run_setupbot(ctx: SystemContext) -> SystemResult:
    """The full setup loop; its clean replay of the final Dockerfile is reused when the run
    succeeded (that replay is already a fresh no-cache build at the pinned commit). A lead
    ecosystem with a loop of its own (Rust) runs that one."""
    import dataclasses

    own = own_setup_loop(REGISTRY.get(ctx.ecosystem))
    if own is not None:
        return run_own_setup(ctx, own)
    started = time.monotonic()
    # A fresh seeded store per repository: results do not depend on the order in which the
    # benchmark visits repositories, and the user's own store is left alone.
    knowledge = dataclasses.replace(ctx.settings.knowledge, url="", path=str(ctx.scratch / "knowledge.sqlite"))
    store = open_store(knowledge)
    llm = _llm_for(ctx.settings)
    # the plan as `setupbot run` makes it: through the ecosystem registry, so that an ecosystem
    # detected beside Python joins it (a maturin project's Rust toolchain); the loop's default
    # plan is Python's alone
    selection = select(ctx.repo_dir)

    def plan(*args, **kwargs):
        return make_plan(*args, selection=selection, **kwargs)

    # the build context `setupbot run` gives its builds: the generated .dockerignore in place
    context_note = prepare_build_context(ctx.repo_dir)
    try:
        record = run_setup(ctx.repo_dir, ctx.settings, ctx.engine, store, llm=llm, make_plan=plan)
    finally:
        close = getattr(store, "close", None)
        if callable(close):
            close()
    produced = _produced_from_record(record, time.monotonic() - started)
    ignore = ctx.repo_dir / DOCKERIGNORE
    if context_note is None and ignore.is_file() and not ignore.is_symlink():
        produced.files[DOCKERIGNORE] = ignore.read_text(errors="replace")  # the scoring build's too
    lock = (record.replay or {}).get("lock") or {}
    if record.lock_text and lock.get("file"):
        produced.files[lock["file"]] = record.lock_text
    produced.details["lock"] = {k: lock.get(k) for k in ("status", "count", "hashed", "reason")} if lock else None
    usage = record.llm_usage or {}
    return SystemResult(
        produced,
        replay=replay_score_from_record(record, ctx.engine),
        steps=len(record.trajectory),
        repairs=len(record.repairs),
        tokens=int(usage.get("tokens") or 0),
        mode="llm" if llm is not None else "deterministic",
        extra={"image": (record.replay or {}).get("tag") if record.status == "success" else None},
    )


# --- setupbot through an ecosystem's own loop (Rust) ------------------------------------------


def own_replay_score(ctx: SystemContext, record: Any) -> Score | None:
    """The image of a successful clean replay (a no-cache build of the final Dockerfile), scored
    the ecosystem's way without building it again; None when the run did not end in one."""
    tag = (record.replay or {}).get("tag")
    if record.status != "success" or not tag or ctx.ecosystem != "rust":
        return None
    score = Score(built=True, build_seconds=_replay_build_seconds(record))
    try:
        score.image_bytes = int(ctx.engine.image_size(tag))
    except Exception:  # noqa: BLE001 - a size we cannot read is missing, not fatal
        score.image_bytes = None
    return run_cargo_tests_in_image(
        ctx.engine, tag, score, collect_timeout=ctx.collect_timeout, test_timeout=ctx.test_timeout
    )


def run_own_setup(ctx: SystemContext, setup: Any) -> SystemResult:
    """The lead ecosystem's own setup loop (``DrivesOwnSetup.setup``), verdict included; its
    clean replay's image is scored instead of building the final Dockerfile a second time."""
    started = time.monotonic()
    outcome = setup(ctx.repo_dir, ctx.settings, ctx.engine, verify=True)
    record = outcome.run_record
    produced = _produced_from_record(record, time.monotonic() - started)
    lock = (getattr(outcome.plan, "lock_summary", None) or {}) if outcome.plan is not None else {}
    produced.details["lock"] = {"status": "native", "count": lock.get("count")} if lock.get("native") else None
    verdict = getattr(outcome.verification, "verdict", None) or {}
    produced.details["verdict"] = verdict.get("tier")
    return SystemResult(
        produced,
        replay=own_replay_score(ctx, record),
        steps=len(record.trajectory),
        repairs=len(record.repairs),
        tokens=0,
        mode="deterministic",
        extra={"image": (record.replay or {}).get("tag") if record.status == "success" else None},
    )


RUNNERS = {"setupbot": run_setupbot, "declared": run_declared, "pipreqs": run_pipreqs}

# where the trees of ``setupbot@<rev>`` systems are written out, once per commit
CODE_CACHE = Path.home() / ".cache" / "setupbot" / "bench-code"


def run_setupbot_at(ctx: SystemContext, system: str) -> SystemResult:
    """``setupbot@<rev>``: this project's code at another commit, run on the same tree
    (``bot.bench.previous``); its Dockerfile is built and scored by the runner."""
    produced, meta = previous.produce(system, ctx.repo_dir, ctx.scratch, ctx.settings, CODE_CACHE)
    return SystemResult(produced, steps=meta.get("steps"), repairs=meta.get("repairs"), mode="deterministic")


def runner_for(system: str) -> Callable[[SystemContext], SystemResult] | None:
    """The function that runs ``system``: one of RUNNERS, or the code of another commit."""
    if previous.revision_of(system) is not None:
        return lambda ctx: run_setupbot_at(ctx, system)
    return RUNNERS.get(system)
