"""`setupbot run PATH`: plan, build, repair and replay a local checkout; write the Dockerfile,
the plan and the run record to PATH/.devcontainer/ (or output.dir)."""

from __future__ import annotations

import argparse
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
    p.add_argument("--refresh-lock", action="store_true",
                   help="resolve the dependencies anew instead of installing from requirements.lock (output.refresh_lock)")
    p.add_argument("--no-verify", action="store_true", help="skip the prosecutor and judge after the clean replay")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    repo = args.path.resolve()
    if not repo.is_dir():
        raise InputError(f"{args.path} is not a directory", "Pass the path of a repository checkout.")
    overrides = {
        "llm": {"base_url": args.llm_base_url, "model": args.llm_model},
        "budgets": {"max_steps": args.max_steps, "wall_clock": args.wall_clock},
        "output": {"dir": args.output_dir, "refresh_lock": True if args.refresh_lock else None},
        "engine": {"keep_containers": True if args.keep else None},
    }
    settings = load_settings(repo, overrides=overrides)

    from bot.pipeline import run_pipeline

    result = run_pipeline(repo, settings, use_knowledge=not args.no_knowledge,
                          verify=not args.no_verify)
    record = result.run_record
    print(f"setupbot: {record.status}" + (" (degraded: the LLM failed, deterministic path used)" if record.degraded else ""))
    for r in record.repairs:
        print(f"  kept: {r.candidate.describe()}  [{r.candidate.source}]")
    if record.replay:
        print(f"  clean replay: {'passed' if record.replay.get('ok') else 'failed'}; tests: {record.replay.get('tests')}")
    if result.verification is not None:
        verdict = result.verification.verdict
        print(f"  verdict: {verdict.get('tier')} ({'; '.join(verdict.get('reasons', []))})")
    if record.remaining and record.status != "success":
        print(f"  remaining: {record.remaining}")
    for warning in result.warnings:
        print(f"  warning: {warning}")
    if result.written is not None:
        for path in [*result.written.written, *result.written.unchanged]:
            print(f"  wrote {path}")
        for path in result.written.kept:
            print(f"  kept your {path} (no setupbot marker); the report shows what setupbot would change")
    for path in result.records:
        print(f"  record {path.relative_to(repo)}")
    if record.status != "success":
        raise SetupFailed(f"no replayed success for {repo.name} ({record.status})",
                          record.remaining or "See .setupbot/trajectory.jsonl for what was tried.")
    return 0
