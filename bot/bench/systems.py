"""The systems a benchmark compares. Each one turns an exported repository into a Dockerfile
(timed); ``setupbot`` may also hand back its own clean-replay score, which the runner reuses
instead of building the same Dockerfile a second time."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.bench.baselines import Produced, produce_declared, produce_pipreqs
from bot.bench.score import Score, TestCounts

SYSTEMS = ("setupbot", "declared", "pipreqs")


@dataclass
class SystemContext:
    repo_dir: Path            # the system's private copy of the exported tree
    scratch: Path             # a private scratch directory
    engine: Any               # bot.engine.Engine for this pair (labelled with its run id)
    settings: Any             # bot.config.Settings
    test_timeout: int = 900
    pipreqs_timeout: int = 300


@dataclass
class SystemResult:
    produced: Produced
    replay: Score | None = None          # a score measured by the system's own clean replay
    steps: int | None = None
    repairs: int | None = None
    tokens: int = 0
    mode: str = ""
    extra: dict = field(default_factory=dict)


def run_declared(ctx: SystemContext) -> SystemResult:
    return SystemResult(produce_declared(ctx.repo_dir), steps=0, repairs=0, mode="template")


def run_pipreqs(ctx: SystemContext) -> SystemResult:
    return SystemResult(produce_pipreqs(ctx.repo_dir, ctx.scratch, timeout=ctx.pipreqs_timeout),
                        steps=0, repairs=0, mode="template")


# --- setupbot ----------------------------------------------------------------------------------

def _get(obj: Any, *names: str, default: Any = None) -> Any:
    """The first attribute (or mapping key) of ``obj`` among ``names`` that is present."""
    for name in names:
        if obj is None:
            return default
        value = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
        if value is not None:
            return value
    return default


def _counts_from(tests: Any) -> TestCounts | None:
    """TestCounts from the loop's test results (``summary()`` dict or attributes)."""
    if tests is None:
        return None
    summary = tests.summary() if callable(getattr(tests, "summary", None)) else tests
    if not isinstance(summary, dict):
        summary = {k: getattr(summary, k, 0) for k in ("passed", "failed", "error", "errors", "skipped")}
    return TestCounts(passed=int(summary.get("passed") or 0), failed=int(summary.get("failed") or 0),
                      errors=int(summary.get("error") or summary.get("errors") or 0),
                      skipped=int(summary.get("skipped") or 0))


def replay_score_from_record(record: Any, engine: Any = None) -> Score | None:
    """The clean replay of a RunRecord as a Score, or None when the record has no replay
    (the runner then builds the final Dockerfile itself)."""
    replay = _get(record, "replay", "replay_result", "clean_replay")
    if replay is None:
        return None
    score = Score()
    score.built = bool(_get(replay, "built", "build_ok", default=_get(replay, "image") is not None))
    score.build_seconds = _get(replay, "build_seconds")
    collect_exit = _get(replay, "collect_exit", "collect_exit_code")
    ok = _get(replay, "ebsr", "collect_ok")
    score.ebsr = bool(ok) if ok is not None else collect_exit == 0
    score.collect_exit = collect_exit
    counts = _counts_from(_get(replay, "tests", "test_results", "junit"))
    if counts is not None:
        score.tests = counts
        score.counts_from = "junit"
    score.test_seconds = _get(replay, "test_seconds")
    score.test_timed_out = bool(_get(replay, "test_timed_out", "timed_out", default=False))
    image = _get(replay, "image", "tag")
    size = _get(replay, "image_bytes", "image_size")
    if size is None and image and engine is not None:
        try:
            size = engine.image_size(image)
        except Exception:   # noqa: BLE001 - image already removed: size unknown
            size = None
    score.image_bytes = size
    score.reason = str(_get(replay, "reason", "error", default="") or "")
    return score


def run_setupbot(ctx: SystemContext) -> SystemResult:
    """The full setup loop when it is available (its clean replay is reused); otherwise the
    deterministic plan's Dockerfile, scored by the runner."""
    started = time.monotonic()
    try:
        from bot.loop import run_setup  # type: ignore[attr-defined]
    except ImportError:
        run_setup = None
    if run_setup is not None:
        store = None
        try:
            from bot.knowledge import open_store  # type: ignore[attr-defined]
            import dataclasses

            # A fresh, seeded store per repository: results do not depend on the order in
            # which the benchmark visits repositories.
            knowledge = dataclasses.replace(ctx.settings.knowledge, url="",
                                            path=str(ctx.scratch / "knowledge.sqlite"))
            store = open_store(knowledge)
        except ImportError:
            store = None
        record = run_setup(ctx.repo_dir, ctx.settings, ctx.engine, store)
        seconds = time.monotonic() - started
        text = _get(record, "dockerfile_text") or _get(_get(record, "dockerfile"), "text") \
            or _get(_get(_get(record, "plan"), "dockerfile"), "text") or ""
        if not isinstance(text, str):
            text = str(text)
        trajectory = _get(record, "trajectory", default=[]) or []
        steps = _get(record, "steps")
        if steps is None:
            try:
                steps = len(trajectory)
            except TypeError:
                steps = None
        repairs = _get(record, "repairs_kept", "repairs", default=[])
        produced = Produced("setupbot", text, seconds, ok=bool(text),
                            reason="" if text else "the setup loop produced no Dockerfile")
        return SystemResult(produced, replay=replay_score_from_record(record, ctx.engine),
                            steps=steps if isinstance(steps, int) else None,
                            repairs=len(repairs) if hasattr(repairs, "__len__") else int(repairs or 0),
                            tokens=int(_get(record, "tokens", "llm_tokens", default=0) or 0),
                            mode="loop")
    from bot.graph import make_plan  # type: ignore[attr-defined]
    from bot.engine.images import available_pythons  # type: ignore[attr-defined]

    plan = make_plan(ctx.repo_dir, ctx.settings, available_pythons(ctx.engine))
    seconds = time.monotonic() - started
    return SystemResult(Produced("setupbot", plan.dockerfile.text, seconds), steps=0, repairs=0,
                        tokens=0, mode="plan-only")


RUNNERS = {"setupbot": run_setupbot, "declared": run_declared, "pipreqs": run_pipreqs}
