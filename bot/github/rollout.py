"""`setupbot rollout`: one pull request per repository that adds the setupbot caller workflow, or
edits the existing one in place (ruamel.yaml round trip: comments and layout survive).
Idempotent: a repository whose workflow is already current gets no write call."""

from __future__ import annotations

import fnmatch
import hashlib
import io
import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2
from ruamel.yaml import YAML

from bot import progress
from bot.errors import GitHubError, InputError
from bot.github.provider import Provider
from bot.github.publish import publish_pull_request
from bot.markers import MARKER_TEXT
from bot.report.render import environment, fingerprint_marker

log = logging.getLogger(__name__)
WORKFLOW_DIR = ".github/workflows"
CALLER_PATH = f"{WORKFLOW_DIR}/setupbot.yml"
REUSABLE = ".github/workflows/setupbot.yml"
DEFAULT_CRON = "17 4 * * 1"
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+$")


def stagger_cron(repo: str, *, weekday: str = "1") -> str:
    """A weekly schedule whose minute and hour come from a stable hash of the repository name, so
    an organisation's drift checks spread over the day instead of all starting at once."""
    digest = int.from_bytes(hashlib.sha256(repo.lower().encode()).digest()[:4], "big")
    return f"{digest % 60} {(digest // 60) % 24} * * {weekday}"


@dataclass
class RolloutResult:
    repo: str
    action: str  # created | updated | unchanged | closed-unchanged | skipped | failed
    path: str = ""
    number: int | None = None
    detail: str = ""
    cron: str = ""


def _yaml() -> YAML:
    y = YAML()  # round-trip mode: comments, key order, quotes and flow style are kept
    y.preserve_quotes = True
    y.width = 4096
    y.indent(mapping=2, sequence=4, offset=2)
    return y


def render_caller(*, default_branch: str, setupbot_repository: str, ref: str, cron: str = DEFAULT_CRON) -> str:
    env = environment()
    return (
        env.get_template("workflows/setupbot-caller.yml.j2")
        .render(
            marker=f"{MARKER_TEXT}: remove this line to keep your own version",
            default_branch=default_branch,
            reusable=f"{setupbot_repository}/{REUSABLE}",
            ref=ref,
            setupbot_repository=setupbot_repository,
            cron=cron,
        )
        .rstrip("\n")
        + "\n"
    )


def calls_setupbot(job: object, setupbot_repository: str) -> bool:
    uses = job.get("uses") if isinstance(job, dict) else None
    return isinstance(uses, str) and uses.split("@")[0] == f"{setupbot_repository}/{REUSABLE}"


def _replace_scalar(lines: list[str], line: int, col: int, old: str, new: str) -> bool:
    """Swap one scalar in place, keeping its quotes and everything around it."""
    text = lines[line]
    rest = text[col:]
    for quote in ('"', "'", ""):
        token = f"{quote}{old}{quote}"
        if rest.startswith(token):
            lines[line] = text[:col] + f"{quote}{new}{quote}" + rest[len(token) :]
            return True
    return False


def update_workflow_text(text: str, *, setupbot_repository: str, ref: str) -> str | None:
    """Re-pin every job of ``text`` that calls setupbot's reusable workflow to ``ref``.

    ruamel.yaml parses the file and says where each value sits; the values are then replaced in
    the text itself, so comments, quoting, flow-style spacing and blank lines stay byte for byte.
    Only when a structural change is needed (missing write permissions) does ruamel re-emit the
    document, which still keeps comments and key order. None when no job calls setupbot."""
    y = _yaml()
    try:
        data = y.load(text)
    except Exception as exc:  # ruamel raises several unrelated types for bad YAML
        raise InputError(f"cannot parse the workflow: {exc}") from exc
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, dict):
        return None
    lines = text.splitlines(keepends=True)
    found = False
    surgical = True
    new_uses = f"{setupbot_repository}/{REUSABLE}@{ref}"
    for job in jobs.values():
        if not calls_setupbot(job, setupbot_repository):
            continue
        found = True
        edits = [(job, "uses", new_uses)]
        inputs = job.get("with")
        if isinstance(inputs, dict) and "setupbot-ref" in inputs:
            edits.append((inputs, "setupbot-ref", ref))
        for mapping, key, value in edits:
            if str(mapping[key]) == value:
                continue
            line, col = mapping.lc.value(key)
            surgical &= _replace_scalar(lines, line, col, str(mapping[key]), value)
            mapping[key] = value
        perms = job.get("permissions")
        if isinstance(perms, dict):
            for scope in ("contents", "pull-requests"):
                if perms.get(scope) != "write":
                    perms[scope] = "write"
                    surgical = False
    if not found:
        return None
    if surgical:
        return "".join(lines)
    out = io.StringIO()
    y.dump(data, out)
    return out.getvalue()


def plan_repository(
    provider: Provider, repo: str, *, setupbot_repository: str, ref: str, cron: str = DEFAULT_CRON
) -> tuple[dict[str, str], str, bool]:
    """(files to write, default branch, edited-existing?) for one repository; files is empty when
    the workflow is already current."""
    info = provider.repo_info(repo)
    base = info.default_branch
    for path in provider.list_dir(repo, WORKFLOW_DIR, base):
        if not path.endswith((".yml", ".yaml")):
            continue
        current = provider.read_file(repo, path, base)
        if current is None:
            continue
        try:
            updated = update_workflow_text(current, setupbot_repository=setupbot_repository, ref=ref)
        except InputError as exc:
            log.warning("%s: %s: %s", repo, path, exc.what)
            continue
        if updated is not None:
            return ({} if updated == current else {path: updated}), base, True
    path = CALLER_PATH
    existing = provider.read_file(repo, path, base)
    if existing is not None and MARKER_TEXT not in existing.lower():
        path = f"{WORKFLOW_DIR}/setupbot-environment.yml"  # never replace someone's own setupbot.yml
    text = render_caller(default_branch=base, setupbot_repository=setupbot_repository, ref=ref, cron=cron)
    current = provider.read_file(repo, path, base) if path != CALLER_PATH else existing
    return ({} if current == text else {path: text}), base, False


def root_files(provider: Provider, repo: str, ref: str | None = None) -> list[str]:
    """The file names at the root of ``repo`` on ``ref`` (default: its default branch): all one
    API call sees of a repository, and what ecosystem detection judges it by."""
    ref = ref or provider.repo_info(repo).default_branch
    return provider.list_dir(repo, "", ref)


# Given a repository's root file names: why it gets no workflow ("" when it does). The command
# passes the ecosystem registry's judgement (bot.ecosystems sits above this layer).
Unsupported = Callable[[str, list[str]], str]


def rollout_repository(
    provider: Provider,
    repo: str,
    *,
    setupbot_repository: str,
    ref: str,
    cron: str | None = DEFAULT_CRON,
    labels: tuple[str, ...] = ("setupbot",),
    unsupported: Unsupported | None = None,
) -> RolloutResult:
    cron = cron or stagger_cron(repo)
    # A repository of an ecosystem setupbot does not support would get a workflow whose every
    # run ends "not supported": no pull request for it (issue 17).
    reason = unsupported(repo, root_files(provider, repo)) if unsupported is not None else ""
    if reason:
        return RolloutResult(repo, "skipped", detail=reason, cron=cron)
    files, base, edited = plan_repository(provider, repo, setupbot_repository=setupbot_repository, ref=ref, cron=cron)
    if not files:
        return RolloutResult(repo, "unchanged", detail="the workflow already calls setupbot at this ref", cron=cron)
    path = next(iter(files))
    fingerprint = hashlib.sha256(json.dumps(sorted(files.items())).encode()).hexdigest()[:32]
    body = (
        environment()
        .get_template("report/rollout-body.md.j2")
        .render(
            fingerprint_marker=fingerprint_marker(fingerprint),
            created=not edited,
            path=path,
            default_branch=base,
            reusable=f"{setupbot_repository}/{REUSABLE}",
            ref=ref,
            edited=edited,
        )
    )
    result = publish_pull_request(
        provider,
        repo,
        base=base,
        branch=f"{provider.branch_prefix}rollout",
        files=files,
        fingerprint=fingerprint,
        title="Add the setupbot workflow",
        body=body,
        labels=labels,
        allow_workflows=True,
        commit_message="Add the setupbot workflow",
    )
    return RolloutResult(repo, result.action, path, result.number, cron=cron)


def read_repo_list(path: Path) -> list[str]:
    repos = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc}", "Give a file with one owner/name per line.") from exc
    for n, line in enumerate(lines, 1):
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        if not REPO_RE.match(name):
            log.warning("%s:%d: %r is not owner/name; skipped", path, n, name)
            continue
        repos.append(name)
    return list(dict.fromkeys(repos))


def rollout(
    provider: Provider,
    repos: list[str],
    *,
    setupbot_repository: str,
    ref: str,
    cron: str | None = DEFAULT_CRON,
    labels: tuple[str, ...] = ("setupbot",),
    unsupported: Unsupported | None = None,
) -> list[RolloutResult]:
    """One pull request per repository. ``cron=None``: each repository's own staggered schedule.
    ``unsupported(repo, root_files)`` names why a repository is skipped ("" to go ahead)."""
    if not SHA_RE.match(ref):
        raise InputError(
            f"--ref must be a full 40-character commit SHA, not {ref!r}",
            "Pinning to a SHA is what keeps a moved tag from changing every repository's workflow.",
        )
    if not REPO_RE.match(setupbot_repository):
        raise InputError(f"--setupbot-repository must be owner/name, not {setupbot_repository!r}")
    results = []
    for n, repo in enumerate(repos, 1):
        progress.current().step(n, len(repos))
        progress.current().trial(repo)
        try:
            results.append(
                rollout_repository(
                    provider,
                    repo,
                    setupbot_repository=setupbot_repository,
                    ref=ref,
                    cron=cron,
                    labels=labels,
                    unsupported=unsupported,
                )
            )
        except (GitHubError, InputError, jinja2.TemplateError) as exc:
            # One repository's failure does not stop the others.
            results.append(
                RolloutResult(repo, "failed", detail=getattr(exc, "what", str(exc)), cron=cron or stagger_cron(repo))
            )
    return results


# Which GitHub languages count as an ecosystem setupbot can be asked to cover.
ECOSYSTEMS = {"python": {"python", "jupyter notebook", "cython"}}


def select_repos(
    infos: list,
    *,
    ecosystems: Sequence[str] = (),
    topics: Sequence[str] = (),
    exclude: Sequence[str] = (),
    limit: int | None = None,
) -> list:
    """Filter an organisation's repositories: never archived or forks; every --topic must be
    present; --only-ecosystem matches the repository's main language; --exclude takes names or
    shell patterns (owner/name or name); --limit keeps the first N, in name order."""
    wanted_langs = set()
    for e in ecosystems:
        wanted_langs |= ECOSYSTEMS.get(e.lower(), {e.lower()})
    out = []
    for info in sorted(infos, key=lambda i: i.full_name.lower()):
        if info.archived or info.fork:
            continue
        name = info.full_name.split("/", 1)[-1]
        if any(
            fnmatch.fnmatch(info.full_name.lower(), x.lower()) or fnmatch.fnmatch(name.lower(), x.lower())
            for x in exclude
        ):
            continue
        have = {t.lower() for t in getattr(info, "topics", ()) or ()}
        if any(t.lower() not in have for t in topics):
            continue
        if wanted_langs and (getattr(info, "language", "") or "").lower() not in wanted_langs:
            continue
        out.append(info)
    return out[:limit] if limit is not None else out


def find_caller(provider: Provider, repo: str, base: str, setupbot_repository: str) -> str | None:
    """The workflow file of ``repo`` that calls setupbot's reusable workflow, if any."""
    for path in provider.list_dir(repo, WORKFLOW_DIR, base):
        if not path.endswith((".yml", ".yaml")):
            continue
        text = provider.read_file(repo, path, base) or ""
        try:
            data = _yaml().load(text)
        except Exception:  # a broken workflow of theirs: not ours to judge here
            continue
        jobs = data.get("jobs") if isinstance(data, dict) else None
        if isinstance(jobs, dict) and any(calls_setupbot(j, setupbot_repository) for j in jobs.values()):
            return path
    return None


VERDICT_RE = re.compile(r"Verdict: \*\*(\w+)\*\*")


def repo_status(
    provider: Provider,
    repo: str,
    *,
    setupbot_repository: str,
    output_dir: str = ".devcontainer",
    report_name: str = "setup-report.md",
) -> dict:
    """One row of `setupbot rollout status`: caller workflow, last verdict (from the report on
    the open setupbot pull request, else the default branch), open setupbot PR, last run."""
    info = provider.repo_info(repo)
    base = info.default_branch
    caller = find_caller(provider, repo, base, setupbot_repository)
    pulls = provider.find_pulls(repo, f"{provider.branch_prefix}{base}", "open")
    pr = pulls[0] if pulls else None
    verdict = None
    for ref in ([pr.head] if pr else []) + [base]:
        report = provider.read_file(repo, f"{output_dir}/{report_name}", ref)
        m = VERDICT_RE.search(report or "") or (VERDICT_RE.search(pr.body) if pr and ref == pr.head else None)
        if m:
            verdict = m.group(1)
            break
    run = provider.last_workflow_run(repo, caller) if caller else None
    last_run = f"{run['created_at']} {run.get('conclusion') or run.get('status')}".strip() if run else None
    return {
        "repo": repo,
        "caller": caller,
        "last_verdict": verdict,
        "open_pr": pr.number if pr else None,
        "last_run": last_run,
    }
