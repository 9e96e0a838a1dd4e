"""`setupbot run PATH`: plan, build, repair and replay a local checkout; write the Dockerfile,
the plan and the run record to PATH/.devcontainer/ (or output.dir)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bot.commands._common import add_json_flag, human, meets_gate, reporter_for, write_json
from bot.config import load_settings
from bot.errors import BelowGate, BudgetExceeded, InputError, Interrupted, NotSupported, SetupFailed


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
    p.add_argument(
        "--refresh-lock",
        action="store_true",
        help="resolve the dependencies anew instead of installing from requirements.lock (output.refresh_lock)",
    )
    p.add_argument(
        "--no-lock",
        action="store_true",
        help="keep the version ranges: write no requirements.lock and build no locked image (output.lock)",
    )
    p.add_argument("--no-verify", action="store_true", help="skip the prosecutor and judge after the clean replay")
    p.add_argument(
        "--force",
        action="store_true",
        help="redo the work even when no input of the environment changed since the recorded plan",
    )
    add_json_flag(p, "the run's outcome (schema setupbot.run/1)")
    p.set_defaults(func=run)


def outcome(result, min_verdict: str, verified: bool) -> tuple[int, str, str | None]:
    """(exit code, why, verdict tier) of a finished pipeline, by the shared exit-code table:
    0 at or above publish.min_verdict; 21 below it (or no test ran, or the verification did not
    complete); 7 when the budget ran out first; 130 when the run was interrupted; 20 for any
    other end without a replayed success. With --no-verify there is no verdict and only "no test
    ran" keeps a replayed success from 0."""
    record = result.run_record
    tier = None
    if result.verification is not None:
        tier = (result.verification.verdict or {}).get("tier")
    status = record.status if record is not None else "no run"
    if getattr(result, "interrupted", None) or status == "interrupted":
        return Interrupted.exit_code, "interrupted", tier
    if status == "over_budget":
        return BudgetExceeded.exit_code, "the budget ran out before a replayed success", tier
    if status == "no_tests":
        return BelowGate.exit_code, "the clean replay ran no test", tier
    if status != "success":
        return SetupFailed.exit_code, f"no replayed success ({status})", tier
    tests = (record.replay or {}).get("tests") or {}
    if not tests.get("total"):
        return BelowGate.exit_code, "the clean replay ran no test", tier
    if verified:
        if tier is None:
            return BelowGate.exit_code, "the verification did not complete, so there is no verdict", tier
        if not meets_gate(tier, min_verdict):
            return BelowGate.exit_code, f"verdict {tier} is below publish.min_verdict {min_verdict}", tier
    return 0, "success" + (f": verdict {tier}" if tier else " (not verified)"), tier


def run(args: argparse.Namespace) -> int:
    repo = args.path.resolve()
    if not repo.is_dir():
        raise InputError(f"{args.path} is not a directory", "Pass the path of a repository checkout.")
    overrides = {
        "llm": {"base_url": args.llm_base_url, "model": args.llm_model},
        "budgets": {"max_steps": args.max_steps, "wall_clock": args.wall_clock},
        "output": {
            "dir": args.output_dir,
            "refresh_lock": True if args.refresh_lock else None,
            "lock": False if getattr(args, "no_lock", False) else None,
        },
        "engine": {"keep_containers": True if args.keep else None},
    }
    settings = load_settings(repo, overrides=overrides)
    meets_gate("Full", settings.publish.min_verdict)  # a bad gate is a config error before the run
    if not args.force and _incremental_applies(repo):
        from bot.ecosystems import input_files
        from bot.incremental import check, unchanged_note

        state = check(repo, settings, input_files)
        if state.unchanged:
            return _unchanged(args, repo, settings, state, unchanged_note(state))

    from bot import progress
    from bot.pipeline import run_pipeline

    with progress.use(reporter_for(args, f"run {repo.name}")):
        try:
            result = run_pipeline(repo, settings, use_knowledge=not args.no_knowledge, verify=not args.no_verify)
        except NotSupported as exc:
            return _not_supported(args, repo, settings, exc)
    code, why, tier = outcome(result, settings.publish.min_verdict, not args.no_verify)
    record = result.run_record
    if record is None:  # stopped before the loop had a record: nothing was written
        if code == Interrupted.exit_code:
            raise Interrupted(f"{repo.name}: stopped before the run began")
        raise SetupFailed(f"{repo.name}: the run ended without a record", "Rerun with --debug to see why.")
    written = _print_summary(args, repo, result, code, why)
    _write_run_json(args, repo, settings, result, code, why, tier, written)
    _raise_for(code, repo, record, why, getattr(result, "interrupted", "") or "")
    return 0


def _incremental_applies(repo: Path) -> bool:
    """Whether a recorded environment may be reused unchanged. Not for a repository whose lead
    ecosystem runs its own setup loop without naming its plan's input files (``NamesInputs``):
    the recorded inputs (bot.incremental) would hash only what the Python scan reads, so a
    changed manifest would read as unchanged. Rust names them (Cargo.toml, Cargo.lock, ...)."""
    from bot.ecosystems import select
    from bot.ecosystems.base import NamesInputs, own_setup_loop

    lead = select(repo).lead
    return lead is None or own_setup_loop(lead) is None or isinstance(lead, NamesInputs)


def _print_summary(args: argparse.Namespace, repo: Path, result, code: int, why: str) -> list[str]:
    """The human summary; returns the files written (for the JSON document)."""
    out = human(args)
    record = result.run_record
    print(
        f"setupbot: {record.status}"
        # the loop's status says the setup replayed; whether its tests prove it is the verdict's
        # to say, and a "success" whose verdict is below the gate must not read as a pass
        + (f" (setup replayed, but {why})" if record.status == "success" and code == BelowGate.exit_code else "")
        + (" (degraded: the LLM failed, deterministic path used)" if record.degraded else ""),
        file=out,
    )
    for r in record.repairs:
        print(f"  kept: {r.candidate.describe()}  [{r.candidate.source}]", file=out)
    if record.replay:
        print(
            f"  clean replay: {'passed' if record.replay.get('ok') else 'failed'}; tests: {record.replay.get('tests')}",
            file=out,
        )
    if result.verification is not None:
        verdict = result.verification.verdict
        print(f"  verdict: {verdict.get('tier')} ({'; '.join(verdict.get('reasons', []))})", file=out)
    if record.remaining and record.status != "success":
        print(f"  remaining: {record.remaining}", file=out)
    for warning in result.warnings:
        print(f"  warning: {warning}", file=out)
    written = []
    if result.written is not None:
        for path in [*result.written.written, *result.written.unchanged]:
            print(f"  wrote {path}", file=out)
            written.append(str(path))
        for path in result.written.kept:
            print(f"  kept your {path} (no setupbot marker); the report shows what setupbot would change", file=out)
        for path, why in result.written.not_written.items():
            print(f"  did not write {path}: {why}", file=out)
    for path in result.records:
        print(f"  record {path.relative_to(repo)}", file=out)
    return written


def _write_run_json(
    args: argparse.Namespace, repo: Path, settings, result, code: int, why: str, tier, written: list[str]
) -> None:
    record = result.run_record
    write_json(
        args,
        "run",
        {
            "repo": str(repo),
            "run_id": record.run_id,
            "status": record.status,
            "degraded": record.degraded,
            "verdict": tier,
            "gate": {"min_verdict": settings.publish.min_verdict, "met": code == 0},
            "exit_code": code,
            "why": why,
            "replay": {"ok": bool((record.replay or {}).get("ok")), "tests": (record.replay or {}).get("tests") or {}},
            "repairs": [{"repair": r.candidate.describe(), "source": r.candidate.source} for r in record.repairs],
            "remaining": record.remaining or "",
            "warnings": [str(w) for w in result.warnings],
            "written": written,
            "records": [str(p.relative_to(repo)) for p in result.records],
            "ecosystems": list(getattr(result, "ecosystems", [])),
        },
    )


def _raise_for(code: int, repo: Path, record, why: str, signal_name: str = "") -> None:
    """The error of a non-zero exit code, with what to do next; an interruption names the
    signal that stopped the run."""
    if code == Interrupted.exit_code:
        raise Interrupted(
            f"{repo.name}: stopped before the end" + (f" by {signal_name}" if signal_name else ""),
            "The outputs and records of the state reached so far were written; run "
            f"`setupbot clean --run-id {record.run_id}` if containers remain.",
        )
    if code == BudgetExceeded.exit_code:
        raise BudgetExceeded(
            f"budget exhausted for {repo.name}: {record.remaining}",
            "The best state found was written; raise budgets.wall_clock or "
            "budgets.max_steps to let the run go further.",
        )
    if code == SetupFailed.exit_code:
        raise SetupFailed(
            f"no replayed success for {repo.name} ({record.status})",
            record.remaining or "See .setupbot/trajectory.jsonl for what was tried.",
        )
    if code == BelowGate.exit_code and record.status == "no_tests":
        # the image replayed, but an environment that runs no test is not proven: say what was
        # tried to find tests (issue 21)
        raise BelowGate(
            f"no test ran for {repo.name}: {record.remaining}",
            "See the setup report and .setupbot/trajectory.jsonl for what was tried.",
        )
    if code == BelowGate.exit_code:
        raise BelowGate(
            f"{repo.name}: {why}",
            "The files are written; the report says what the verdict rests on. Lower "
            "publish.min_verdict to accept this verdict.",
        )


def _unchanged(args: argparse.Namespace, repo: Path, settings, state, note: str) -> int:
    """Nothing the plan reads has changed and the recorded files are in place: no image is pulled
    or built and no file is rewritten. The recorded verdict still meets the gate or not."""
    verified = state.recorded.verified
    tier = verified.get("verdict") or None
    replayed = bool(verified.get("replay_ok"))
    met = replayed and bool(tier) and meets_gate(tier, settings.publish.min_verdict)
    code = 0 if met else (SetupFailed.exit_code if not replayed else BelowGate.exit_code)
    why = f"{note}; nothing rebuilt (--force redoes the work)"
    out = human(args)
    print(f"setupbot: {why}", file=out)
    print(f"  verdict: {tier or '?'} (recorded in {state.recorded.path})", file=out)
    write_json(
        args,
        "run",
        {
            "repo": str(repo),
            "run_id": "",
            "status": "unchanged",
            "degraded": False,
            "verdict": tier,
            "gate": {"min_verdict": settings.publish.min_verdict, "met": met},
            "exit_code": code,
            "why": why,
            "replay": {"ok": replayed, "tests": verified.get("tests") or {}},
            "repairs": [],
            "remaining": "",
            "warnings": [],
            "written": [],
            "records": [],
        },
    )
    if code == SetupFailed.exit_code:
        raise SetupFailed(
            f"the recorded environment of {repo.name} did not replay", "Change an input or pass --force to try again."
        )
    if code == BelowGate.exit_code:
        raise BelowGate(
            f"{repo.name}: the recorded verdict {tier} is below {settings.publish.min_verdict}",
            "Change an input or pass --force to try again.",
        )
    return 0


def _not_supported(args: argparse.Namespace, repo: Path, settings, exc: NotSupported) -> int:
    """No registered ecosystem recognises the repository: nothing was planned, built or
    written. The JSON document says so (status not_supported, exit code 23), then the error."""
    write_json(
        args,
        "run",
        {
            "repo": str(repo),
            "run_id": "",
            "status": "not_supported",
            "degraded": False,
            "verdict": None,
            "gate": {"min_verdict": settings.publish.min_verdict, "met": False},
            "exit_code": exc.exit_code,
            "why": exc.what,
            "replay": {"ok": False, "tests": {}},
            "repairs": [],
            "remaining": "",
            "warnings": [],
            "written": [],
            "records": [],
            "ecosystems": [],
            "foreign_markers": list(exc.markers),
        },
    )
    raise exc
