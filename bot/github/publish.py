"""One pull request per base branch, updated in place (SECURITY.md R3, R6, S6).

``publish_environment`` is idempotent: run it twice with the same generated files and the second
run makes no write call at all. A PR closed without merging is left closed until the files it
would propose change (the fingerprint stored in the PR body and the commit message differs).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from bot.errors import GitHubError
from bot.github.provider import Provider, check_branch, check_paths
from bot.report.render import read_fingerprint

log = logging.getLogger(__name__)
FINGERPRINT_TRAILER = "Setupbot-Fingerprint:"


@dataclass
class PublishResult:
    action: str                        # created | updated | unchanged | closed-unchanged | refreshed
    number: int | None = None
    url: str = ""
    branch: str = ""
    fingerprint: str = ""
    files: list[str] = field(default_factory=list)


def bot_branch(prefix: str, base: str) -> str:
    return f"{prefix}{base}"


def _commit_fingerprint(message: str) -> str | None:
    for line in message.splitlines():
        if line.startswith(FINGERPRINT_TRAILER):
            return line[len(FINGERPRINT_TRAILER):].strip()
    return None


def publish_environment(provider: Provider, repo: str, *, base: str, files: dict[str, str],
                        fingerprint: str, title: str, body: str, labels: list[str] | tuple[str, ...] = (),
                        commit_message: str = "Add a proven development environment") -> PublishResult:
    """Create or refresh the bot's PR against ``base`` with ``files`` (repository-relative).
    Never touches ``.github/workflows/`` (SECURITY.md S6)."""
    return publish_pull_request(provider, repo, base=base, branch=bot_branch(provider.branch_prefix, base),
                                files=files, fingerprint=fingerprint, title=title, body=body, labels=labels,
                                commit_message=commit_message, allow_workflows=False)


def publish_pull_request(provider: Provider, repo: str, *, base: str, branch: str, files: dict[str, str],
                         fingerprint: str, title: str, body: str, labels: list[str] | tuple[str, ...] = (),
                         commit_message: str, allow_workflows: bool = False) -> PublishResult:
    """The one-PR-per-branch mechanics shared by the environment PR and the rollout PR."""
    check_branch(branch, provider.branch_prefix)
    check_paths(files, allow_workflows=allow_workflows)
    if not files:
        raise GitHubError("nothing to publish: no files were generated")
    if read_fingerprint(body) != fingerprint:
        raise GitHubError("the PR body does not carry the fingerprint of the files it describes",
                          "Render the body with render_pr_body(report, fingerprint).")

    open_pulls = provider.find_pulls(repo, branch, "open")
    branch_sha = provider.branch_sha(repo, branch)
    branch_fp = _commit_fingerprint(provider.commit_message(repo, branch_sha)) if branch_sha else None

    if open_pulls:
        pr = open_pulls[0]
        if read_fingerprint(pr.body) == fingerprint and branch_fp == fingerprint:
            log.info("pull request #%d is up to date", pr.number)
            return PublishResult("unchanged", pr.number, pr.url, branch, fingerprint, sorted(files))
    else:
        closed = [p for p in provider.find_pulls(repo, branch, "closed") if not p.merged]
        if closed and read_fingerprint(closed[0].body) == fingerprint:
            log.info("pull request #%d was closed without merging and nothing changed since; "
                     "not reopening", closed[0].number)
            return PublishResult("closed-unchanged", closed[0].number, closed[0].url, branch, fingerprint,
                                 sorted(files))

    if branch_fp != fingerprint:
        base_sha = provider.branch_sha(repo, base)
        if base_sha is None:
            raise GitHubError(f"base branch {base!r} does not exist in {repo}")
        message = f"{commit_message}\n\n{FINGERPRINT_TRAILER} {fingerprint}\n"
        commit = provider.commit_files(repo, base_sha, files, message, allow_workflows=allow_workflows)
        provider.set_branch(repo, branch, commit)

    if open_pulls:
        pr = open_pulls[0]
        if read_fingerprint(pr.body) != fingerprint or pr.title != title:
            provider.update_pull(repo, pr.number, title, body)
        return PublishResult("updated", pr.number, pr.url, branch, fingerprint, sorted(files))
    pr = provider.create_pull(repo, base, branch, title, body)
    if labels:
        try:
            provider.add_labels(repo, pr.number, list(labels))
        except GitHubError as exc:   # labels are a convenience; the PR stands without them
            log.warning("could not label #%d: %s", pr.number, exc.what)
    return PublishResult("created", pr.number, pr.url, branch, fingerprint, sorted(files))
