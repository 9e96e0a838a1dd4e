"""One pull request per base branch, updated in place (SECURITY.md R3, R6, S6).

``publish_environment`` is idempotent: run it twice with the same generated files and the second
run makes no write call at all. A PR closed without merging is left closed until the files it
would propose change (the fingerprint stored in the PR body and the commit message differs).
``publish_pull_request`` is the plainer mechanism the rollout PR uses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from bot.errors import GitHubError
from bot.github.provider import Provider, PullInfo, check_branch, check_paths
from bot.markers import has_marker
from bot.report.render import HANDBACK_COMMENT_MARKER, handback_ticked, read_fingerprint

log = logging.getLogger(__name__)
FINGERPRINT_TRAILER = "Setupbot-Fingerprint:"


@dataclass
class PublishResult:
    # created | updated | unchanged | closed (base has the files) | none (no PR needed) |
    # declined (closed without merging, same content) | held (someone else committed on the branch)
    action: str
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
            return line[len(FINGERPRINT_TRAILER) :].strip()
    return None


def publish_environment(
    provider: Provider,
    repo: str,
    *,
    base: str,
    files: dict[str, str],
    fingerprint: str,
    title: str,
    body: str | Callable[[str], str],
    labels: list[str] | tuple[str, ...] = (),
    draft: bool = False,
    commit_message: str = "Add a development environment",
    volatile: Iterable[str] = (),
) -> PublishResult:
    """Create, refresh or close the bot's PR against ``base`` with ``files`` (repository-relative),
    the way a maintainer expects (SECURITY.md R3, R6, S6; the etiquette of Renovate and
    create-pull-request):

    - ``base`` already holds exactly these files: no PR; an open one is closed with a comment;
    - a PR closed without merging is not reopened for the same fingerprint; a new proposal after
      the inputs changed says so (``body(previous)`` receives the sentence);
    - someone else committed on the bot branch: setupbot stops and leaves one comment saying how
      to hand the branch back (tick the box in the PR body, or delete the branch);
    - an update is committed on top of the branch; it is rebased onto ``base`` only when ``base``
      changed one of the files since the branch forked (a conflict).

    ``volatile`` paths (the stage timeline) describe the run, not the environment: they travel
    with an update, but a difference in them alone is no reason for one.

    Never touches ``.github/workflows/`` and makes no write call when nothing changed."""
    branch = bot_branch(provider.branch_prefix, base)
    _check_publishable(provider, branch, files, allow_workflows=False)
    render = body if callable(body) else (lambda previous, text=body: text)
    open_pulls = provider.find_pulls(repo, branch, "open")
    on_base = {path: provider.read_file(repo, path, base) for path in sorted(files)}
    files = _without_theirs(files, on_base, base)

    def result(action: str, pr: PullInfo | None = None) -> PublishResult:
        return PublishResult(
            action, pr.number if pr else None, pr.url if pr else "", branch, fingerprint, sorted(files)
        )

    if _base_has_files(on_base, files, volatile):
        pr = _close_as_on_base(provider, repo, base, open_pulls)
        return result("closed", pr) if pr is not None else result("none")

    branch_sha, head_fp = _branch_head(provider, repo, branch)
    message = f"{commit_message}\n\n{FINGERPRINT_TRAILER} {fingerprint}\n"
    if open_pulls:
        pr = open_pulls[0]
        action = _refresh_open_pull(
            provider, repo, base, branch, pr, branch_sha, head_fp, fingerprint, title, files, message, render
        )
        return result(action, pr)

    action, pr = _propose(
        provider, repo, base, branch, branch_sha, head_fp, fingerprint, files, message, title, render, draft, labels
    )
    return result(action, pr)


def _check_publishable(provider: Provider, branch: str, files: dict[str, str], *, allow_workflows: bool) -> None:
    check_branch(branch, provider.branch_prefix)
    check_paths(files, allow_workflows=allow_workflows)
    if not files:
        raise GitHubError("nothing to publish: no files were generated")


def _base_has_files(on_base: dict[str, str | None], files: dict[str, str], volatile: Iterable[str]) -> bool:
    """``base`` holds every file as generated, ``volatile`` ones aside."""
    run_only = set(volatile)
    return all(on_base[path] == text for path, text in files.items() if path not in run_only)


def _branch_head(provider: Provider, repo: str, branch: str) -> tuple[str | None, str | None]:
    """The head commit of ``branch`` (None: no branch) and the fingerprint its message carries
    (None: not a setupbot commit)."""
    branch_sha = provider.branch_sha(repo, branch)
    return branch_sha, _commit_fingerprint(provider.commit_message(repo, branch_sha)) if branch_sha else None


def _commit_on_base(
    provider: Provider, repo: str, base: str, branch: str, files: dict[str, str], message: str, **commit_options: bool
) -> None:
    """One commit of ``files`` on top of ``base``; ``branch`` is set to it."""
    base_sha = provider.branch_sha(repo, base)
    if base_sha is None:
        raise GitHubError(f"base branch {base!r} does not exist in {repo}")
    commit = provider.commit_files(repo, base_sha, files, message, **commit_options)
    provider.set_branch(repo, branch, commit)


def _add_labels(provider: Provider, repo: str, number: int, labels: list[str] | tuple[str, ...]) -> None:
    if labels:
        try:
            provider.add_labels(repo, number, list(labels))
        except GitHubError as exc:  # labels are a convenience; the PR stands without them
            log.warning("could not label #%d: %s", number, exc.what)


def _propose(
    provider: Provider,
    repo: str,
    base: str,
    branch: str,
    branch_sha: str | None,
    head_fp: str | None,
    fingerprint: str,
    files: dict[str, str],
    message: str,
    title: str,
    render: Callable[[str], str],
    draft: bool,
    labels: list[str] | tuple[str, ...],
) -> tuple[str, PullInfo]:
    """No open pull request: ``declined`` when the same proposal was closed, else ``created``."""
    declined, previous = _earlier_proposal(provider, repo, branch, branch_sha, fingerprint)
    if declined is not None:
        return "declined", declined
    if head_fp != fingerprint:
        _commit_on_base(provider, repo, base, branch, files, message)
    pr = provider.create_pull(repo, base, branch, title, render(previous), draft=draft)
    _add_labels(provider, repo, pr.number, labels)
    return "created", pr


def _without_theirs(files: dict[str, str], on_base: dict[str, str | None], base: str) -> dict[str, str]:
    """The files minus those ``base`` holds without setupbot's marker (a person's own files)."""
    # The files were generated from a checkout that need not be ``base`` as it is now (a manual run
    # on a tag, a push to base since): a file ``base`` holds without setupbot's marker is a
    # person's, like a maintainer's own root .dockerignore, and the pull request never replaces it.
    theirs = sorted(p for p, text in on_base.items() if text is not None and not has_marker(text))
    if theirs:
        log.info("%s holds its own %s (no setupbot marker): left out of the pull request", base, ", ".join(theirs))
        files = {p: t for p, t in files.items() if p not in theirs}
    return files


def _close_as_on_base(provider: Provider, repo: str, base: str, open_pulls: list[PullInfo]) -> PullInfo | None:
    """``base`` already has the files: the open pull request (if any) is closed with a comment."""
    if not open_pulls:
        log.info("%s already has the files: no pull request", base)
        return None
    pr = open_pulls[0]
    provider.add_comment(
        repo,
        pr.number,
        f"`{base}` already has the environment this pull request proposed, so setupbot closes it. Nothing else to do.",
    )
    provider.close_pull(repo, pr.number)
    log.info("%s already has the files; closed #%d", base, pr.number)
    return pr


def _refresh_open_pull(
    provider: Provider,
    repo: str,
    base: str,
    branch: str,
    pr: PullInfo,
    branch_sha: str | None,
    head_fp: str | None,
    fingerprint: str,
    title: str,
    files: dict[str, str],
    message: str,
    render: Callable[[str], str],
) -> str:
    """The open pull request: held when someone else committed, else left, retitled or updated."""
    if branch_sha and head_fp is None and not handback_ticked(pr.body):
        if provider.find_comment(repo, pr.number, HANDBACK_COMMENT_MARKER) is None:
            provider.add_comment(repo, pr.number, HANDBACK_COMMENT)
        log.info("someone else committed on %s: not updating #%d", branch, pr.number)
        return "held"
    if read_fingerprint(pr.body) == fingerprint and head_fp == fingerprint:
        if pr.title != title:
            provider.update_pull(repo, pr.number, title, pr.body)
            return "updated"
        log.info("pull request #%d is up to date", pr.number)
        return "unchanged"
    if head_fp != fingerprint:
        parent = _parent(provider, repo, base, branch_sha if head_fp is not None else None, files)
        commit = provider.commit_files(repo, parent, files, message)
        provider.set_branch(repo, branch, commit)
    provider.update_pull(repo, pr.number, title, render(""))
    return "updated"


def _earlier_proposal(
    provider: Provider, repo: str, branch: str, branch_sha: str | None, fingerprint: str
) -> tuple[PullInfo | None, str]:
    """A proposal closed without merging: declined again when nothing changed, else mentioned."""
    previous = ""
    closed = [p for p in provider.find_pulls(repo, branch, "closed") if not p.merged]
    if closed:
        last = closed[0]
        handed_back = (
            branch_sha is None and provider.find_comment(repo, last.number, HANDBACK_COMMENT_MARKER) is not None
        )
        if read_fingerprint(last.body) == fingerprint and not handed_back:
            log.info(
                "pull request #%d was closed without merging and nothing changed since; not reopening", last.number
            )
            return last, previous
        if not handed_back:
            previous = (
                f"An earlier proposal, #{last.number}, was closed without merging. The environment's "
                "inputs have changed since, so setupbot proposes again; close this one to decline it too."
            )
    return None, previous


HANDBACK_COMMENT = (
    f"{HANDBACK_COMMENT_MARKER}\nSomeone other than setupbot committed to this branch, so "
    "setupbot has stopped updating it: your commits stay as they are.\n\n"
    "To hand the branch back to setupbot (it will replace the commits that are not its "
    "own), tick **Let setupbot update this branch again** in the pull request description, "
    "or delete the branch. Until then setupbot leaves this pull request alone."
)


def _parent(provider: Provider, repo: str, base: str, branch_sha: str | None, files: dict[str, str]) -> str:
    """Where the next bot commit goes: on top of the branch, unless ``base`` changed one of the
    files since the branch forked from it (then on ``base``: a rebase, only on conflict)."""
    base_sha = provider.branch_sha(repo, base)
    if base_sha is None:
        raise GitHubError(f"base branch {base!r} does not exist in {repo}")
    if branch_sha is None:
        return base_sha
    fork, seen = branch_sha, 0
    while seen < 100 and _commit_fingerprint(provider.commit_message(repo, fork)) is not None:
        parents = provider.commit_parents(repo, fork)
        if not parents:
            return base_sha
        fork, seen = parents[0], seen + 1
    if fork == base_sha:
        return branch_sha
    conflict = any(provider.read_file(repo, path, base) != provider.read_file(repo, path, fork) for path in files)
    return base_sha if conflict else branch_sha


def operation(result: PublishResult | None) -> str:
    """create-pull-request's ``pull-request-operation``: created | updated | closed | none."""
    if result is None:
        return "none"
    return result.action if result.action in ("created", "updated", "closed") else "none"


def publish_pull_request(
    provider: Provider,
    repo: str,
    *,
    base: str,
    branch: str,
    files: dict[str, str],
    fingerprint: str,
    title: str,
    body: str,
    labels: list[str] | tuple[str, ...] = (),
    commit_message: str,
    allow_workflows: bool = False,
) -> PublishResult:
    """The one-PR-per-branch mechanics shared by the environment PR and the rollout PR."""
    _check_publishable(provider, branch, files, allow_workflows=allow_workflows)
    if read_fingerprint(body) != fingerprint:
        raise GitHubError(
            "the PR body does not carry the fingerprint of the files it describes",
            "Render the body with render_pr_body(report, fingerprint).",
        )

    open_pulls = provider.find_pulls(repo, branch, "open")
    _branch_sha, branch_fp = _branch_head(provider, repo, branch)

    if open_pulls:
        pr = open_pulls[0]
        if read_fingerprint(pr.body) == fingerprint and branch_fp == fingerprint:
            log.info("pull request #%d is up to date", pr.number)
            return PublishResult("unchanged", pr.number, pr.url, branch, fingerprint, sorted(files))
    else:
        closed = [p for p in provider.find_pulls(repo, branch, "closed") if not p.merged]
        if closed and read_fingerprint(closed[0].body) == fingerprint:
            log.info(
                "pull request #%d was closed without merging and nothing changed since; not reopening", closed[0].number
            )
            return PublishResult(
                "closed-unchanged", closed[0].number, closed[0].url, branch, fingerprint, sorted(files)
            )

    if branch_fp != fingerprint:
        message = f"{commit_message}\n\n{FINGERPRINT_TRAILER} {fingerprint}\n"
        _commit_on_base(provider, repo, base, branch, files, message, allow_workflows=allow_workflows)

    if open_pulls:
        pr = open_pulls[0]
        if read_fingerprint(pr.body) != fingerprint or pr.title != title:
            provider.update_pull(repo, pr.number, title, body)
        return PublishResult("updated", pr.number, pr.url, branch, fingerprint, sorted(files))
    pr = provider.create_pull(repo, base, branch, title, body)
    _add_labels(provider, repo, pr.number, labels)
    return PublishResult("created", pr.number, pr.url, branch, fingerprint, sorted(files))
