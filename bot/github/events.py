"""What setupbot does for each GitHub event, with the provider injected.

- ``push`` to the default branch, ``workflow_dispatch`` → generate and create/refresh the PR;
- ``pull_request`` from the same repository → verify, write the job summary, update one bot
  comment in place where the token may;
- ``pull_request`` from a fork (read-only token, no secrets) → job summary only, no write call;
- ``schedule`` → drift check: regenerate, compare with what the default branch holds, refresh
  the PR when the environment no longer matches;
- anything else (pushes to other branches, to the bot's own branches) → nothing.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.config import PublishSettings
from bot.errors import BelowGate, GitHubError, InputError, Regression, SetupFailed
from bot.github.provider import Provider
from bot.github.publish import PublishResult, operation, publish_environment
from bot.incremental import changed_inputs, parse_recorded
from bot.outputs import PLAN, GeneratedOutputs, has_marker
from bot.report.changes import Comparison, compare_with_base, environment_diff, environment_lines
from bot.report.model import ReportData
from bot.report.render import (
    COMMENT_MARKER,
    BodyContext,
    render_comment,
    render_job_summary,
    render_pr_body,
    run_url,
    write_job_summary,
)

log = logging.getLogger(__name__)
SUPPORTED = ("push", "pull_request", "workflow_dispatch", "schedule")


@dataclass
class Event:
    name: str
    repository: str
    default_branch: str
    ref: str = ""
    base: str = ""  # the branch the environment PR targets / the PR's base
    head: str = ""  # a pull request's head branch
    pr_number: int | None = None
    is_fork: bool = False
    sha: str = ""


@dataclass
class Decision:
    kind: str  # publish | verify | summary | drift | skip
    reason: str
    may_write: bool


@dataclass
class Outcome:
    decision: Decision
    verdict: str = ""
    pr_number: int | None = None
    report_path: str = ""
    publish: PublishResult | None = None
    summary: str = ""
    drift: list[str] | None = None
    pr_url: str = ""
    comparison: Comparison | None = None
    report: Any = None


def load_event(name: str, path: str | Path | None, environ: Mapping[str, str] | None = None) -> Event:
    env = os.environ if environ is None else environ
    payload: dict[str, Any] = {}
    if path:
        try:
            payload = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(
                f"cannot read the event payload {path}: {exc}",
                "Pass --event-path $GITHUB_EVENT_PATH from a workflow run.",
            ) from exc
    if not isinstance(payload, dict):
        raise InputError(f"the event payload {path} is not a JSON object")
    repo = payload.get("repository") or {}
    full_name = repo.get("full_name") or env.get("GITHUB_REPOSITORY", "")
    if not full_name or "/" not in full_name:
        raise InputError(
            "cannot tell which repository this event is for",
            "Run inside GitHub Actions or set GITHUB_REPOSITORY=owner/name.",
        )
    default_branch = repo.get("default_branch") or repo.get("master_branch") or ""
    ref = payload.get("ref") or env.get("GITHUB_REF", "")
    event = Event(
        name=name,
        repository=full_name,
        default_branch=default_branch,
        ref=ref,
        sha=str(payload.get("after") or env.get("GITHUB_SHA", "")),
    )
    if name == "pull_request":
        pr = payload.get("pull_request") or {}
        head_repo = ((pr.get("head") or {}).get("repo") or {}).get("full_name")
        event.pr_number = pr.get("number") or payload.get("number")
        event.base = (pr.get("base") or {}).get("ref", "")
        event.head = (pr.get("head") or {}).get("ref", "")
        event.sha = (pr.get("head") or {}).get("sha", event.sha)
        # A deleted fork has head.repo null; treat it as a fork, the safe side.
        event.is_fork = head_repo != full_name
    return event


def decide(event: Event, branch_prefix: str = "setupbot/") -> Decision:
    if event.name not in SUPPORTED:
        return Decision("skip", f"event {event.name!r} is not one setupbot acts on", False)
    if event.name == "pull_request":
        if event.is_fork:
            return Decision("summary", "pull request from a fork: read-only token, summary only", False)
        return Decision("verify", "pull request from this repository: verify and comment", True)
    if event.name == "schedule":
        return Decision("drift", "scheduled drift check", True)
    branch = event.ref.removeprefix("refs/heads/")
    if event.name == "push":
        if branch.startswith(branch_prefix):
            return Decision("skip", "push to setupbot's own branch", False)
        if not event.default_branch or branch != event.default_branch:
            return Decision("skip", f"push to {branch!r}, not the default branch", False)
    return Decision("publish", f"{event.name} on {branch or event.default_branch}: create or refresh the PR", True)


def title_for(report: Any, base: str) -> str:
    """Says "proven" only when the clean replay passed and the verdict is at or above the gate;
    otherwise it says what the verdict is."""
    if report.proven_ok:
        return f"Add a proven development environment for {base} (verdict: {report.verdict})"
    return f"Draft development environment for {base}: verdict {report.verdict}, below the {report.gate} gate"


def _commit_message(report: Any) -> str:
    if report.proven_ok:
        return f"Add a proven development environment (verdict: {report.verdict})"
    return f"Add a draft development environment (verdict: {report.verdict}, below the {report.gate} gate)"


def _plan_path(generated: GeneratedOutputs) -> str:
    return generated.report_path.rsplit("/", 1)[0] + "/" + PLAN


def _plan_doc(text: str | None) -> dict[str, Any] | None:
    recorded = parse_recorded(text)
    return recorded.data if recorded else None


def exit_code(outcome: Outcome, fail_on: str) -> int:
    """``publish.fail_on`` / the ``fail-on`` input: never | regression | any-failure. Codes from
    bot.errors: Regression 22, SetupFailed 20, BelowGate 21."""
    if fail_on == "never" or outcome.decision.kind == "skip":
        return 0
    if outcome.comparison is not None and outcome.comparison.regression:
        return Regression.exit_code
    if fail_on == "any-failure" and outcome.report is not None and not outcome.report.proven_ok:
        return SetupFailed.exit_code if not outcome.report.replay_ok else BelowGate.exit_code
    return 0


def handle_event(
    event: Event,
    provider: Provider,
    produce: Callable[[], GeneratedOutputs],
    *,
    labels: tuple[str, ...] = ("setupbot",),
    environ: Mapping[str, str] | None = None,
    publish: PublishSettings | None = None,
) -> Outcome:
    """Run what the event asks. ``produce`` runs the pipeline (or returns prepared outputs)."""
    env = dict(os.environ if environ is None else environ)
    gate = publish or PublishSettings()
    decision = decide(event, provider.branch_prefix)
    outcome = Outcome(decision)
    if decision.kind == "skip":
        log.info("nothing to do: %s", decision.reason)
        return outcome
    if not decision.may_write:
        provider.read_only = True  # belt and braces: the provider refuses writes too
    if not event.default_branch and decision.kind in ("publish", "drift"):
        event.default_branch = provider.repo_info(event.repository).default_branch
    generated = produce()
    report = generated.report
    report.gate = gate.min_verdict
    outcome.report = report
    outcome.verdict = report.verdict
    outcome.report_path = generated.report_path
    url = run_url(env)

    notes = [generated.note] if generated.note else []
    if decision.kind in ("publish", "drift"):
        _publish_or_drift(event, provider, generated, gate, outcome, notes, labels, url)
    elif decision.kind in ("verify", "summary"):
        _verify_pull_request(event, provider, generated, gate, outcome, notes, url)

    outcome.summary = render_job_summary(
        report, event=event.name, note="; ".join(notes), comparison=outcome.comparison, base=event.base, url=url
    )
    write_job_summary(outcome.summary, env)
    return outcome


def _publish_or_drift(
    event: Event,
    provider: Provider,
    generated: GeneratedOutputs,
    gate: PublishSettings,
    outcome: Outcome,
    notes: list[str],
    labels: tuple[str, ...],
    url: str,
) -> None:
    """Publish (or, for a drift check, publish only what drifted) unless the verdict is below the gate."""
    decision = outcome.decision
    report = generated.report
    # A manual run on a branch targets that branch; on a tag (or without a ref) the default one.
    on_branch = event.name == "workflow_dispatch" and event.ref.startswith("refs/heads/")
    base = event.ref.removeprefix("refs/heads/") if on_branch else event.default_branch
    wanted = decision.kind == "publish"
    if decision.kind == "drift":
        outcome.drift = [
            p
            for p, text in generated.files.items()
            if p != generated.report_path
            and p not in getattr(generated, "volatile", ())
            and _differs(provider.read_file(event.repository, p, base), text)
        ]
        notes.append(
            ("drift: " + ", ".join(outcome.drift)) if outcome.drift else "no drift: the merged environment matches"
        )
        wanted = bool(outcome.drift)
    if wanted and not report.proven_ok and not gate.draft_below_gate:
        notes.append(
            f"verdict {report.verdict}{'' if report.replay_ok else ' without a passing clean replay'}"
            f" is below the {gate.min_verdict} gate: no pull request "
            "(publish.draft_below_gate opens a draft instead)"
        )
        wanted = False
    if wanted:
        result = publish_environment(
            provider,
            event.repository,
            base=base,
            files=generated.files,
            fingerprint=generated.fingerprint,
            title=title_for(report, base),
            body=_body(provider, event.repository, base, generated, url),
            labels=labels,
            draft=not report.proven_ok,
            commit_message=_commit_message(report),
            volatile=getattr(generated, "volatile", ()),
        )
        outcome.publish = result
        outcome.pr_number = result.number
        outcome.pr_url = result.url
        notes.append(_publish_note(result, base))


def _verify_pull_request(
    event: Event,
    provider: Provider,
    generated: GeneratedOutputs,
    gate: PublishSettings,
    outcome: Outcome,
    notes: list[str],
    url: str,
) -> None:
    """Compare the pull request's plan with the base's; report it as a commit status and a comment."""
    decision = outcome.decision
    report = generated.report
    base_text = provider.read_file(
        event.repository, _plan_path(generated), event.base or event.default_branch or "main"
    )
    head_text = generated.files.get(_plan_path(generated))
    failure = next((p.claim + (f" — {p.reason}" if p.reason else "") for p in report.unproven_items), "")
    comparison = outcome.comparison = compare_with_base(
        _plan_doc(base_text),
        _plan_doc(head_text),
        head_verdict=report.verdict,
        head_replay_ok=report.replay_ok,
        gate=gate.min_verdict,
        base_branch=event.base or "main",
        failure=failure,
    )
    if decision.kind == "summary":
        notes.append("pull request from a fork: read-only token, so setupbot wrote this summary only")
    elif event.sha:
        _set_verify_status(event, provider, report, gate, outcome, comparison, notes, url)
    if decision.kind == "verify" and event.pr_number:
        try:
            provider.upsert_comment(
                event.repository,
                int(event.pr_number),
                COMMENT_MARKER,
                render_comment(report, comparison, event.base),
            )
        except GitHubError as exc:
            # The verify job's token has statuses: write, not pull-requests: write: the commit
            # status and the job summary carry the result.
            notes.append(f"no comment posted: {exc.what}")
            log.info(notes[-1])


def _set_verify_status(
    event: Event,
    provider: Provider,
    report: ReportData,
    gate: PublishSettings,
    outcome: Outcome,
    comparison: Comparison,
    notes: list[str],
    url: str,
) -> None:
    """The commit status: failure when the gate fails or the plan regressed against the base."""
    failing = exit_code(outcome, gate.fail_on) != 0 or comparison.regression
    description = comparison.summary if comparison.regression else f"verdict {report.verdict}; {comparison.summary}"
    try:
        provider.set_status(
            event.repository, event.sha, "failure" if failing else "success", description, target_url=url
        )
    except GitHubError as exc:
        notes.append(f"no commit status set: {exc.what} (the verify job needs statuses: write)")
        log.warning(notes[-1])


def _publish_note(result: PublishResult, base: str) -> str:
    return {
        "none": f"{base} already has this environment: no pull request",
        "declined": f"pull request #{result.number} was closed without merging and the inputs have not "
        "changed since: not proposed again",
        "held": f"pull request #{result.number}: someone else committed on {result.branch}; setupbot "
        "leaves it alone until it is handed back",
        "closed": f"pull request #{result.number} closed: {base} already has its environment",
    }.get(result.action, f"pull request #{result.number}: {result.action}")


def _body(provider: Provider, repo: str, base: str, generated: GeneratedOutputs, url: str) -> Callable[[str], str]:
    """The PR body, with what changed since the last update: against the bot branch's plan when
    there is one, else against the base branch's."""
    plan_path = _plan_path(generated)
    branch = provider.branch_prefix + base
    old_text = provider.read_file(repo, plan_path, branch) if provider.branch_sha(repo, branch) else None
    old_text = old_text or provider.read_file(repo, plan_path, base)
    old, new = _plan_doc(old_text), _plan_doc(generated.files.get(plan_path))
    new_inputs = (new or {}).get("inputs") or {}

    def render(previous: str) -> str:
        ctx = BodyContext(
            changes=environment_diff(old, new)
            if old
            else environment_lines(new) and [f"+ {line}" for line in environment_lines(new)],
            inputs_changed=changed_inputs((old or {}).get("inputs"), new_inputs) if old and new_inputs else [],
            previous=previous,
            first=old is None,
            run_url=url,
        )
        return render_pr_body(generated.report, generated.fingerprint, ctx)

    return render


def _differs(current: str | None, proposed: str) -> bool:
    if current is None:
        return True
    if not has_marker(current):
        return False  # hand-written: setupbot reports, never replaces
    return current != proposed


def write_action_outputs(outcome: Outcome, environ: Mapping[str, str] | None = None) -> None:
    """``verdict``, ``pr-number``, ``report-path`` for the composite action."""
    env = os.environ if environ is None else environ
    target = env.get("GITHUB_OUTPUT")
    if not target:
        return
    values = {
        "verdict": outcome.verdict,
        "pr-number": "" if outcome.pr_number is None else str(outcome.pr_number),
        "report-path": outcome.report_path,
        "pr-url": outcome.pr_url,
        "pr-operation": operation(outcome.publish),
    }
    with open(target, "a", encoding="utf-8") as fh:
        for key, value in values.items():
            fh.write(f"{key}={' '.join(str(value).split())}\n")  # one line each: no output injection
