"""`setupbot run PATH`: plan, build, repair and replay a local checkout; write the Dockerfile,
the plan and the run record to PATH/.devcontainer/ (or output.dir)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bot.config import load_settings
from bot.errors import InputError, SetupFailed


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="set up a repository: build, run its tests, repair, clean replay")
    p.add_argument("path", type=Path, help="the repository checkout")
    p.add_argument("--llm-base-url", help="OpenAI-compatible endpoint for the optional planner (llm.base_url)")
    p.add_argument("--llm-model", help="model name (llm.model)")
    p.add_argument("--max-steps", type=int, help="step budget (budgets.max_steps)")
    p.add_argument("--wall-clock", type=int, help="seconds for the whole run (budgets.wall_clock)")
    p.add_argument("--output-dir", help="where to write the outputs, relative to PATH (output.dir)")
    p.add_argument("--keep", action="store_true", help="keep runner containers for debugging (engine.keep_containers)")
    p.add_argument("--no-knowledge", action="store_true", help="do not use the experience base (rules only)")
    p.set_defaults(func=run)


def write_outputs(repo: Path, record, settings) -> list[Path]:
    """The outputs of a run. The loop's own writer until the outputs stage supplies the final forms."""
    from bot.loop.orchestrator import write_loop_outputs

    return write_loop_outputs(repo, record, repo / settings.output.dir)


def run(args: argparse.Namespace) -> int:
    repo = args.path.resolve()
    if not repo.is_dir():
        raise InputError(f"{args.path} is not a directory", "Pass the path of a repository checkout.")
    overrides = {
        "llm": {"base_url": args.llm_base_url, "model": args.llm_model},
        "budgets": {"max_steps": args.max_steps, "wall_clock": args.wall_clock},
        "output": {"dir": args.output_dir},
        "engine": {"keep_containers": True if args.keep else None},
    }
    settings = load_settings(repo, overrides=overrides)

    from bot.engine import Engine
    from bot.loop.orchestrator import run_setup

    engine = Engine.from_settings(settings)
    store = None
    if not args.no_knowledge:
        from bot.knowledge import open_store

        store = open_store(settings.knowledge)
    llm = None
    if settings.llm.enabled:
        from bot.loop.llm import LLMPlanner

        llm = LLMPlanner(settings.llm, secrets=settings.secrets())
    try:
        # the trajectory is written with the outputs at the end, not streamed into the
        # repository: a file changing inside the build context would defeat the layer cache
        record = run_setup(repo, settings, engine, store, llm)
    finally:
        if not settings.engine.keep_containers:
            engine.clean(engine.run_id)
    written = write_outputs(repo, record, settings)
    print(f"setupbot: {record.status}" + (" (degraded: the LLM failed, deterministic path used)" if record.degraded else ""))
    for r in record.repairs:
        print(f"  kept: {r.candidate.describe()}  [{r.candidate.source}]")
    if record.replay:
        print(f"  clean replay: {'passed' if record.replay.get('ok') else 'failed'}; tests: {record.replay.get('tests')}")
    if record.remaining and record.status != "success":
        print(f"  remaining: {record.remaining}")
    for path in written:
        print(f"  wrote {path}")
    if record.status != "success":
        raise SetupFailed(f"no replayed success for {repo.name} ({record.status})",
                          record.remaining or "See the run record for the trajectory.")
    return 0
