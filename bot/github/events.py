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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from bot.errors import GitHubError, InputError
from bot.github.provider import Provider
from bot.github.publish import PublishResult, publish_environment
from bot.outputs import GeneratedOutputs, has_marker
from bot.report.render import (COMMENT_MARKER, render_comment, render_job_summary, render_pr_body,
                               write_job_summary)

log = logging.getLogger(__name__)
SUPPORTED = ("push", "pull_request", "workflow_dispatch", "schedule")


@dataclass
class Event:
    name: str
    repository: str
    default_branch: str
    ref: str = ""
    base: str = ""                 # the branch the environment PR targets / the PR's base
    head: str = ""                 # a pull request's head branch
    pr_number: int | None = None
    is_fork: bool = False
    sha: str = ""


@dataclass
class Decision:
    kind: str          # publish | verify | summary | drift | skip
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


def load_event(name: str, path: str | Path | None, environ: Mapping[str, str] | None = None) -> Event:
    env = os.environ if environ is None else environ
    payload: dict[str, Any] = {}
    if path:
        try:
            payload = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read the event payload {path}: {exc}",
                             "Pass --event-path $GITHUB_EVENT_PATH from a workflow run.") from exc
    if not isinstance(payload, dict):
        raise InputError(f"the event payload {path} is not a JSON object")
    repo = payload.get("repository") or {}
    full_name = repo.get("full_name") or env.get("GITHUB_REPOSITORY", "")
    if not full_name or "/" not in full_name:
        raise InputError("cannot tell which repository this event is for",
                         "Run inside GitHub Actions or set GITHUB_REPOSITORY=owner/name.")
    default_branch = repo.get("default_branch") or repo.get("master_branch") or ""
    ref = payload.get("ref") or env.get("GITHUB_REF", "")
    event = Event(name=name, repository=full_name, default_branch=default_branch, ref=ref,
                  sha=str(payload.get("after") or env.get("GITHUB_SHA", "")))
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


def _title(base: str) -> str:
    return f"Add a proven development environment for {base}"


def handle_event(event: Event, provider: Provider, produce: Callable[[], GeneratedOutputs], *,
                 labels: tuple[str, ...] = ("setupbot",), environ: Mapping[str, str] | None = None) -> Outcome:
    """Run what the event asks. ``produce`` runs the pipeline (or returns prepared outputs)."""
    env = dict(os.environ if environ is None else environ)
    decision = decide(event, provider.branch_prefix)
    outcome = Outcome(decision)
    if decision.kind == "skip":
        log.info("nothing to do: %s", decision.reason)
        return outcome
    if not decision.may_write:
        provider.read_only = True   # belt and braces: the provider refuses writes too
    if not event.default_branch and decision.kind in ("publish", "drift"):
        event.default_branch = provider.repo_info(event.repository).default_branch
    generated = produce()
    report = generated.report
    outcome.verdict = report.verdict
    outcome.report_path = generated.report_path

    note = ""
    if decision.kind in ("publish", "drift"):
        # A manual run on a branch targets that branch; on a tag (or without a ref) the default one.
        on_branch = event.name == "workflow_dispatch" and event.ref.startswith("refs/heads/")
        base = event.ref.removeprefix("refs/heads/") if on_branch else event.default_branch
        if decision.kind == "drift":
            outcome.drift = [p for p, text in generated.files.items() if p != generated.report_path
                             and _differs(provider.read_file(event.repository, p, base), text)]
            note = ("drift: " + ", ".join(outcome.drift)) if outcome.drift else "no drift: the merged environment matches"
        if decision.kind == "publish" or outcome.drift:
            body = render_pr_body(report, generated.fingerprint)
            result = publish_environment(provider, event.repository, base=base, files=generated.files,
                                         fingerprint=generated.fingerprint, title=_title(base), body=body,
                                         labels=labels)
            outcome.publish = result
            outcome.pr_number = result.number
            note = (note + "; " if note else "") + f"pull request #{result.number}: {result.action}"
    elif decision.kind == "verify" and event.pr_number:
        try:
            provider.upsert_comment(event.repository, int(event.pr_number), COMMENT_MARKER, render_comment(report))
        except GitHubError as exc:
            # A token without pull-requests: write still gets the job summary.
            note = f"no comment posted: {exc.what}"
            log.warning(note)
    elif decision.kind == "summary":
        note = "pull request from a fork: setupbot verified the environment and wrote this summary only"

    outcome.summary = render_job_summary(report, event=event.name, note=note)
    write_job_summary(outcome.summary, env)
    return outcome


def _differs(current: str | None, proposed: str) -> bool:
    if current is None:
        return True
    if not has_marker(current):
        return False        # hand-written: setupbot reports, never replaces
    return current != proposed


def write_action_outputs(outcome: Outcome, environ: Mapping[str, str] | None = None) -> None:
    """``verdict``, ``pr-number``, ``report-path`` for the composite action."""
    env = os.environ if environ is None else environ
    target = env.get("GITHUB_OUTPUT")
    if not target:
        return
    values = {"verdict": outcome.verdict, "pr-number": "" if outcome.pr_number is None else str(outcome.pr_number),
              "report-path": outcome.report_path}
    with open(target, "a", encoding="utf-8") as fh:
        for key, value in values.items():
            fh.write(f"{key}={' '.join(str(value).split())}\n")   # one line each: no output injection
