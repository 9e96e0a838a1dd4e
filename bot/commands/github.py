"""`setupbot github`: what the GitHub Action runs. Reads the event, runs the pipeline on the
checkout, then publishes the PR, the comment and the job summary as the event allows."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable
from pathlib import Path

from bot.config import load_settings
from bot.errors import EXIT_CODES, InputError, NotSupported
from bot.github.events import exit_code, handle_event, load_event, write_action_outputs
from bot.github.provider import DryRunProvider, GitHubProvider
from bot.outputs import REPORT, GeneratedOutputs, fingerprint_files
from bot.redact import register_secret

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("github", help="act on a GitHub event (what the action runs)")
    p.add_argument(
        "--event-name",
        default=os.environ.get("GITHUB_EVENT_NAME", ""),
        help="push | pull_request | workflow_dispatch | schedule (default: $GITHUB_EVENT_NAME)",
    )
    p.add_argument(
        "--event-path",
        default=os.environ.get("GITHUB_EVENT_PATH", ""),
        help="the event payload JSON (default: $GITHUB_EVENT_PATH)",
    )
    p.add_argument("--repo", default=".", help="the checked-out repository (default: .)")
    p.add_argument("--output-dir", default=None, help="output folder (default: settings output.dir)")
    p.add_argument("--dry-run", action="store_true", help="read from GitHub but write nothing; print the plan")
    p.add_argument(
        "--fail-on",
        choices=("never", "regression", "any-failure"),
        default=None,
        help="exit non-zero on: never | regression (default) | any-failure (publish.fail_on)",
    )
    p.add_argument(
        "--force", action="store_true", help="redo the container work even when no input of the environment changed"
    )
    p.set_defaults(func=run)


def reuse_recorded(
    repo: Path, settings, trusted_plan: Callable[[str], str | None] | None = None
) -> GeneratedOutputs | None:
    """When nothing the plan reads has changed since the environment recorded in the checkout,
    the recorded files are the answer: no container is started and no image is pulled or built.

    ``trusted_plan(path)`` returns the plan JSON the base branch holds. On a pull request the
    checkout is the author's: a plan JSON they edited could claim any verdict, so the record is
    reused only when it is byte-for-byte the base branch's."""
    from bot.ecosystems import input_files
    from bot.incremental import check, unchanged_note
    from bot.junit import TestCounts
    from bot.report.model import from_pipeline

    state = check(repo, settings, input_files)
    if not state.unchanged or state.recorded is None:
        log.info("container work needed: %s", state.reason)
        return None
    if trusted_plan is not None:
        on_disk = (repo / state.recorded.path).read_text(encoding="utf-8")
        if trusted_plan(state.recorded.path) != on_disk:
            log.info("container work needed: the pull request's plan JSON is not the base branch's")
            return None
    data = state.recorded.data
    out = state.recorded.path.rsplit("/", 1)[0]
    verified = state.recorded.verified
    report = from_pipeline(data.get("plan"), None, None, repository="", output_dir=out)
    report.verdict = str(verified.get("verdict") or "Shallow")
    report.replay_ok = verified.get("replay_ok")
    report.tier_reason = "recorded: the environment's inputs have not changed since it was verified"
    report.tests = TestCounts(
        **{k: int(v) for k, v in (verified.get("tests") or {}).items() if k in TestCounts.__dataclass_fields__}
    )
    files = {}
    for rel in [*state.recorded.outputs, state.recorded.path, f"{out}/{REPORT}"]:
        files[rel] = (repo / rel).read_text(encoding="utf-8")
    report.files = list(files)
    return GeneratedOutputs(
        files=files,
        report=report,
        fingerprint=fingerprint_files(files),
        report_path=f"{out}/{REPORT}",
        note=unchanged_note(state),
    )


def produce_outputs(repo: Path, settings, repository: str) -> GeneratedOutputs:
    """Run the pipeline. It generates the output files and writes them into the checkout, once
    (the report path is an action output, so the file must exist locally)."""
    # imported here: the CLI imports every command module at start, and the pipeline pulls in
    # the engine, the loop and the knowledge base
    from bot import pipeline

    result = pipeline.run_pipeline(repo, settings, repository=repository)
    if result.generated is None:
        raise InputError(
            "the run produced no plan, so there is nothing to publish: "
            + ("; ".join(result.warnings) or "see the log above"),
            "Run `setupbot plan` on the checkout to see why no plan was made.",
        )
    return result.generated


def _report_unsupported(error: NotSupported) -> None:
    """A repository no registered ecosystem recognises got no plan, no files and no pull request
    (the pipeline refused it before any container or GitHub write): the action's outputs and
    the job summary say why."""
    from bot.github.events import Decision, Outcome
    from bot.report.render import write_job_summary

    write_action_outputs(Outcome(Decision("skip", error.what, may_write=False)))
    write_job_summary(f"## setupbot\n\n{error.what}\n\nNo Dockerfile was written and no pull request opened.\n")
    print(f"setupbot: skip: {error.what}")


def run(args: argparse.Namespace) -> int:
    repo = Path(args.repo).resolve()
    overrides = {"output": {"dir": args.output_dir}} if args.output_dir else None
    settings = load_settings(repo, overrides=overrides)
    if not args.event_name:
        raise InputError("no event name", "Pass --event-name or run inside GitHub Actions.")
    event = load_event(args.event_name, args.event_path or None)
    # Where the token goes and which branches the bot owns come from the packaged defaults, the
    # environment and the command line only: .github/setupbot.yml belongs to the repository
    # (and, on a pull request, to whoever wrote the branch), so it must not redirect the token.
    trusted = load_settings(None).github
    token = trusted.token or os.environ.get("GITHUB_TOKEN", "")
    register_secret(token)
    real = GitHubProvider(
        token, os.environ.get("GITHUB_API_URL") or trusted.api_url, branch_prefix=trusted.branch_prefix
    )
    provider = DryRunProvider(inner=real, branch_prefix=trusted.branch_prefix) if args.dry_run else real

    def base_plan(path: str) -> str | None:
        return provider.read_file(event.repository, path, event.base or event.default_branch or "main")

    def produce() -> GeneratedOutputs:
        reused = (
            None if args.force else reuse_recorded(repo, settings, base_plan if event.name == "pull_request" else None)
        )
        if reused is not None:
            return reused
        return produce_outputs(repo, settings, event.repository)

    # The gate and fail-on come from the trusted chain (defaults, SETUPBOT_* variables, the
    # action's inputs) on pull requests: a pull request's own .github/setupbot.yml must not be
    # able to lower the bar it is judged by.
    gate = trusted_publish = load_settings(None).publish if event.name == "pull_request" else settings.publish
    fail_on = args.fail_on or trusted_publish.fail_on
    try:
        outcome = handle_event(event, provider, produce, labels=tuple(settings.github.labels), publish=gate)
    except NotSupported as exc:
        _report_unsupported(exc)
        raise
    write_action_outputs(outcome)
    print(f"setupbot: {outcome.decision.kind}: {outcome.decision.reason}")
    if outcome.publish:
        print(f"setupbot: pull request #{outcome.publish.number}: {outcome.publish.action}")
    if outcome.comparison is not None:
        print(f"setupbot: {'regression: ' if outcome.comparison.regression else ''}{outcome.comparison.summary}")
    if isinstance(provider, DryRunProvider):
        for action in provider.actions:
            print(f"  would {action}")
    code = exit_code(outcome, fail_on)
    if code:
        print(f"setupbot: exit {code} ({EXIT_CODES.get(code, '')}; fail-on {fail_on})")
    return code
