"""GitHub access for setupbot, over PyGithub, behind one small interface.

The orchestrator receives a provider (``GitHubProvider``, ``DryRunProvider``, or a test double
pointed at a local REST server), so what it does can be shown without touching GitHub.

Rules enforced here, whatever the caller asks (SECURITY.md S2, S6, R1, R3):
- branches written must start with the bot prefix; nothing else is ever moved;
- paths under ``.github/workflows/`` are refused unless the caller is the rollout command;
- nothing merges or approves: the interface has no such method;
- commits go through the Git Data API (blobs, trees, commits, refs): no git credentials in the
  workspace, and branch names and titles travel as JSON fields, never through a shell;
- PyGithub exceptions become ``GitHubError``; rate limits are waited out (``retry-after``,
  ``x-ratelimit-remaining: 0`` + ``x-ratelimit-reset``) and 5xx/connection errors are retried
  with bounded exponential backoff.
"""

from __future__ import annotations

import functools
import logging
import posixpath
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import github
import requests
from github import Auth, GithubException, InputGitTreeElement

from bot.errors import GitHubError

log = logging.getLogger(__name__)
T = TypeVar("T")
WORKFLOWS_DIR = ".github/workflows/"


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    base_delay: float = 1.0
    max_delay: float = 60.0
    max_wait: float = 900.0  # longest rate-limit wait accepted before giving up
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time


@dataclass
class PullInfo:
    number: int
    state: str
    merged: bool
    head: str
    base: str
    title: str
    body: str
    url: str = ""


@dataclass
class RepoInfo:
    full_name: str
    default_branch: str
    archived: bool = False
    fork: bool = False
    topics: tuple[str, ...] = ()  # for `rollout --topic` / `--only-ecosystem`
    language: str = ""


def rate_limit_wait(status: int, headers: dict[str, str], clock: Callable[[], float]) -> float | None:
    """Seconds to wait when a response is a rate limit, else None."""
    h = {k.lower(): v for k, v in (headers or {}).items()}
    if status not in (403, 429):
        return None
    if "retry-after" in h:  # secondary limit
        try:
            return max(0.0, float(h["retry-after"]))
        except ValueError:
            return 60.0
    if h.get("x-ratelimit-remaining") == "0":  # primary limit
        try:
            return max(0.0, float(h.get("x-ratelimit-reset", "0")) - clock()) + 1.0
        except ValueError:
            return 60.0
    if status == 429:
        return 60.0
    return None


def check_branch(branch: str, prefix: str) -> None:
    if not prefix or not branch.startswith(prefix) or len(branch) == len(prefix):
        raise GitHubError(
            f"refusing to write branch {branch!r}: it does not carry the bot prefix {prefix!r}",
            "setupbot only moves branches it owns.",
        )
    if ".." in branch or branch.endswith((".lock", "/")) or any(c in branch for c in " ~^:?*[\\\x00"):
        raise GitHubError(f"refusing branch name {branch!r}: not a valid git ref name")


def check_paths(paths: Iterable[str], allow_workflows: bool) -> None:
    for path in paths:
        norm = posixpath.normpath(path)
        if path.startswith("/") or norm.startswith("..") or ".." in path.split("/"):
            raise GitHubError(f"refusing path {path!r}: it leaves the repository")
        if not allow_workflows and (norm + "/").lower().startswith(WORKFLOWS_DIR):
            raise GitHubError(
                f"refusing to touch {path}: the environment pull request never edits workflows",
                "Use `setupbot rollout` to add or edit the setupbot workflow.",
            )


class Provider:
    """What the orchestrator needs from GitHub. Reads return None when something is absent."""

    branch_prefix = "setupbot/"
    read_only = False

    def repo_info(self, repo: str) -> RepoInfo:
        raise NotImplementedError

    def branch_sha(self, repo: str, branch: str) -> str | None:
        raise NotImplementedError

    def read_file(self, repo: str, path: str, ref: str) -> str | None:
        raise NotImplementedError

    def commit_message(self, repo: str, sha: str) -> str:
        raise NotImplementedError

    def find_pulls(self, repo: str, head_branch: str, state: str = "open") -> list[PullInfo]:
        raise NotImplementedError

    def list_org_repos(self, org: str) -> list[RepoInfo]:
        raise NotImplementedError

    def list_dir(self, repo: str, path: str, ref: str) -> list[str]:
        raise NotImplementedError

    def last_workflow_run(self, repo: str, workflow_path: str) -> dict[str, str] | None:
        return None

    def find_comment(self, repo: str, number: int, marker: str) -> int | None:
        raise NotImplementedError

    def commit_parents(self, repo: str, sha: str) -> list[str]:
        raise NotImplementedError

    # writes
    def commit_files(
        self, repo: str, parent_sha: str, files: dict[str, str], message: str, *, allow_workflows: bool = False
    ) -> str:
        raise NotImplementedError

    def set_branch(self, repo: str, branch: str, sha: str) -> None:
        raise NotImplementedError

    def create_pull(self, repo: str, base: str, head: str, title: str, body: str, *, draft: bool = False) -> PullInfo:
        raise NotImplementedError

    def update_pull(self, repo: str, number: int, title: str, body: str) -> None:
        raise NotImplementedError

    def close_pull(self, repo: str, number: int) -> None:
        raise NotImplementedError

    def add_labels(self, repo: str, number: int, labels: list[str]) -> None:
        raise NotImplementedError

    def upsert_comment(self, repo: str, number: int, marker: str, body: str) -> int:
        raise NotImplementedError

    def add_comment(self, repo: str, number: int, body: str) -> int:
        raise NotImplementedError

    def set_status(
        self, repo: str, sha: str, state: str, description: str, *, context: str = "setupbot", target_url: str = ""
    ) -> None:
        raise NotImplementedError


def _pull_info(pr: Any) -> PullInfo:
    return PullInfo(
        number=pr.number,
        state=pr.state,
        merged=bool(pr.merged_at or getattr(pr, "merged", False)),
        head=pr.head.ref,
        base=pr.base.ref,
        title=pr.title or "",
        body=pr.body or "",
        url=pr.html_url or "",
    )


class GitHubProvider(Provider):
    def __init__(
        self,
        token: str,
        api_url: str = "https://api.github.com",
        *,
        policy: RetryPolicy | None = None,
        read_only: bool = False,
        branch_prefix: str = "setupbot/",
        timeout: int = 30,
    ) -> None:
        self.policy = policy or RetryPolicy()
        self.read_only = read_only
        self.branch_prefix = branch_prefix
        # PyGithub's own retry and throttling sleep with time.sleep; ours are bounded and
        # injectable, so theirs are switched off.
        self._gh = github.Github(
            auth=Auth.Token(token) if token else None,
            base_url=api_url.rstrip("/"),
            timeout=timeout,
            retry=None,
            seconds_between_requests=None,
            seconds_between_writes=None,
            user_agent="setupbot",
        )
        self._repos: dict[str, Any] = {}
        self.write_count = 0

    # ---------------------------------------------------------------- plumbing
    def _call(self, what: str, fn: Callable[[], T], *, idempotent: bool = True) -> T:
        policy = self.policy
        delay = policy.base_delay
        for attempt in range(1, policy.max_attempts + 1):
            try:
                return fn()
            except GithubException as exc:
                headers = dict(exc.headers or {})
                wait = rate_limit_wait(exc.status, headers, policy.clock)
                if wait is not None:
                    if wait > policy.max_wait:
                        raise GitHubError(
                            f"{what}: rate limited for {wait:.0f}s more", "Run again after the limit resets."
                        ) from exc
                    if attempt < policy.max_attempts:
                        log.info("%s: rate limited, waiting %.1fs", what, wait)
                        policy.sleep(wait)
                        continue
                transient = exc.status >= 500
                if transient and idempotent and attempt < policy.max_attempts:
                    policy.sleep(min(delay, policy.max_delay))
                    delay *= 2
                    continue
                message = exc.data.get("message", "") if isinstance(exc.data, dict) else str(exc.data)
                raise GitHubError(
                    f"{what}: GitHub answered {exc.status} {message}".strip(),
                    "Check the token's permissions and the repository name.",
                ) from exc
            except requests.RequestException as exc:
                if idempotent and attempt < policy.max_attempts:
                    policy.sleep(min(delay, policy.max_delay))
                    delay *= 2
                    continue
                raise GitHubError(
                    f"{what}: cannot reach GitHub ({exc.__class__.__name__})", "Check github.api_url and the network."
                ) from exc
        raise GitHubError(f"{what}: gave up after {policy.max_attempts} attempts")

    def _write(self, what: str) -> None:
        if self.read_only:
            raise GitHubError(f"{what}: refused, this run is read-only (fork pull request or dry run)")
        self.write_count += 1

    def _repo(self, repo: str) -> Any:
        if repo not in self._repos:
            # Not lazy: lazy objects fetch on first attribute access, outside the retry wrapper.
            self._repos[repo] = self._call(f"read repository {repo}", lambda: self._gh.get_repo(repo))
        return self._repos[repo]

    @staticmethod
    def _absent(exc: GitHubError) -> bool:
        cause = exc.__cause__
        return isinstance(cause, GithubException) and cause.status in (404, 409)

    # ---------------------------------------------------------------- reads
    def repo_info(self, repo: str) -> RepoInfo:
        r = self._call(f"read repository {repo}", lambda: self._gh.get_repo(repo))
        self._repos[repo] = r
        return RepoInfo(
            r.full_name, r.default_branch, bool(r.archived), bool(r.fork), tuple(r.topics or ()), r.language or ""
        )

    def branch_sha(self, repo: str, branch: str) -> str | None:
        try:
            r = self._repo(repo)
            return self._call(f"read branch {branch}", lambda: r.get_git_ref(f"heads/{branch}").object.sha)
        except GitHubError as exc:
            if self._absent(exc):
                return None
            raise

    def read_file(self, repo: str, path: str, ref: str) -> str | None:
        r = self._repo(repo)
        try:
            content = self._call(f"read {path}@{ref}", lambda: r.get_contents(path, ref=ref))
        except GitHubError as exc:
            if self._absent(exc):
                return None
            raise
        if isinstance(content, list):  # a directory
            return None
        return content.decoded_content.decode("utf-8", errors="replace")

    def commit_message(self, repo: str, sha: str) -> str:
        r = self._repo(repo)
        return self._call("read commit", lambda: r.get_git_commit(sha).message) or ""

    def find_pulls(self, repo: str, head_branch: str, state: str = "open") -> list[PullInfo]:
        owner = repo.split("/")[0]
        r = self._repo(repo)
        return self._call(
            "list pull requests",
            lambda: [
                _pull_info(p)
                for p in r.get_pulls(state=state, head=f"{owner}:{head_branch}")
                if p.head.ref == head_branch
            ],
        )

    def list_org_repos(self, org: str) -> list[RepoInfo]:
        return self._call(
            f"list repositories of {org}",
            lambda: [
                RepoInfo(
                    r.full_name,
                    r.default_branch,
                    bool(r.archived),
                    bool(r.fork),
                    tuple(r.topics or ()),
                    r.language or "",
                )
                for r in self._gh.get_organization(org).get_repos()
            ],
        )

    def last_workflow_run(self, repo: str, workflow_path: str) -> dict[str, str] | None:
        """The newest run of one workflow file: {created_at, status, conclusion, url}; None without one."""
        r = self._repo(repo)
        try:
            runs = self._call(
                f"list runs of {workflow_path}",
                lambda: list(r.get_workflow(workflow_path.rsplit("/", 1)[-1]).get_runs()[:1]),
            )
        except GitHubError as exc:
            if self._absent(exc):
                return None
            raise
        if not runs:
            return None
        run = runs[0]
        created = run.created_at.strftime("%Y-%m-%dT%H:%M:%SZ") if run.created_at else ""
        return {
            "created_at": created,
            "status": run.status or "",
            "conclusion": run.conclusion or "",
            "url": run.html_url or "",
        }

    def list_dir(self, repo: str, path: str, ref: str) -> list[str]:
        r = self._repo(repo)
        try:
            items = self._call(f"list {path}@{ref}", lambda: r.get_contents(path, ref=ref))
        except GitHubError as exc:
            if self._absent(exc):
                return []
            raise
        if not isinstance(items, list):
            return []
        return sorted(i.path for i in items if i.type == "file")

    def find_comment(self, repo: str, number: int, marker: str) -> int | None:
        r = self._repo(repo)
        # Only a bot's comment counts: anyone can paste the marker into a comment of their own.
        return self._call(
            "list comments",
            lambda: next(
                (
                    c.id
                    for c in r.get_issue(number).get_comments()
                    if marker in (c.body or "") and c.user is not None and c.user.type == "Bot"
                ),
                None,
            ),
        )

    def commit_parents(self, repo: str, sha: str) -> list[str]:
        r = self._repo(repo)
        return self._call("read commit", lambda: [p.sha for p in r.get_git_commit(sha).parents])

    # ---------------------------------------------------------------- writes
    def commit_files(
        self, repo: str, parent_sha: str, files: dict[str, str], message: str, *, allow_workflows: bool = False
    ) -> str:
        check_paths(files, allow_workflows)
        self._write("create commit")
        r = self._repo(repo)
        parent = self._call("read parent commit", lambda: r.get_git_commit(parent_sha))
        elements = []
        for path, text in sorted(files.items()):
            # Blobs and trees are content-addressed, so retrying these POSTs is harmless.
            blob = self._call(f"create blob {path}", functools.partial(r.create_git_blob, text, "utf-8"))
            elements.append(InputGitTreeElement(path=path, mode="100644", type="blob", sha=blob.sha))
        tree = self._call("create tree", lambda: r.create_git_tree(elements, base_tree=parent.tree))
        commit = self._call("create commit", lambda: r.create_git_commit(message, tree, [parent]))
        return commit.sha

    def set_branch(self, repo: str, branch: str, sha: str) -> None:
        check_branch(branch, self.branch_prefix)
        self._write("move branch")
        r = self._repo(repo)
        for _ in range(self.policy.max_attempts):
            current = self.branch_sha(repo, branch)
            if current == sha:
                return
            if current is not None:
                ref = self._call("read branch", lambda: r.get_git_ref(f"heads/{branch}"))
                self._call("move branch", functools.partial(ref.edit, sha, force=True))
                return
            try:
                self._call("create branch", lambda: r.create_git_ref(f"refs/heads/{branch}", sha), idempotent=False)
                return
            except GitHubError as exc:
                # 422 "Reference already exists", a 5xx or a timeout: the create may have landed
                # (or raced another run); look again before deciding.
                cause = exc.__cause__
                transient = isinstance(cause, requests.RequestException) or (
                    isinstance(cause, GithubException) and (cause.status == 422 or cause.status >= 500)
                )
                if not transient:
                    raise
                self.policy.sleep(self.policy.base_delay)
        raise GitHubError(f"could not point {branch} at {sha[:12]}", "Run again; the next run reconciles.")

    def create_pull(self, repo: str, base: str, head: str, title: str, body: str, *, draft: bool = False) -> PullInfo:
        check_branch(head, self.branch_prefix)
        self._write("create pull request")
        r = self._repo(repo)
        attempts = self.policy.max_attempts
        last: GitHubError | None = None
        for _ in range(attempts):
            try:
                pr = self._call(
                    "create pull request",
                    lambda: r.create_pull(
                        base=base, head=head, title=title, body=body, maintainer_can_modify=False, draft=draft
                    ),
                    idempotent=False,
                )
                return _pull_info(pr)
            except GitHubError as exc:
                last = exc
                # The create may have succeeded on the server before the error (502, timeout,
                # 422 "already exists"): look before trying again, so there is never a second PR.
                existing = self.find_pulls(repo, head, "open")
                if existing:
                    return existing[0]
                cause = exc.__cause__
                status = cause.status if isinstance(cause, GithubException) else 0
                if status and status < 500:
                    raise
                self.policy.sleep(self.policy.base_delay)
        assert last is not None
        raise last

    def update_pull(self, repo: str, number: int, title: str, body: str) -> None:
        self._write("update pull request")
        r = self._repo(repo)
        pr = self._call("read pull request", lambda: r.get_pull(number))
        check_branch(pr.head.ref, self.branch_prefix)
        self._call("update pull request", lambda: pr.edit(title=title, body=body))

    def close_pull(self, repo: str, number: int) -> None:
        self._write("close pull request")
        r = self._repo(repo)
        pr = self._call("read pull request", lambda: r.get_pull(number))
        check_branch(pr.head.ref, self.branch_prefix)  # only the bot's own pull requests
        self._call("close pull request", lambda: pr.edit(state="closed"))

    def add_comment(self, repo: str, number: int, body: str) -> int:
        self._write("comment")
        r = self._repo(repo)
        return self._call("create comment", lambda: r.get_issue(number).create_comment(body), idempotent=False).id

    def set_status(
        self, repo: str, sha: str, state: str, description: str, *, context: str = "setupbot", target_url: str = ""
    ) -> None:
        """A commit status: needs only ``statuses: write``, unlike a check run or a comment."""
        if state not in ("error", "failure", "pending", "success"):
            raise GitHubError(f"unknown commit status state {state!r}")
        self._write("set commit status")
        payload = {"state": state, "context": context, "description": description[:140]}
        if target_url:
            payload["target_url"] = target_url
        # Through the requester: PyGithub's Commit.create_status needs a GET of the commit first,
        # which a token with only statuses: write may not be allowed to make on a private repository.
        self._call(
            "set commit status",
            lambda: self._gh.requester.requestJsonAndCheck("POST", f"/repos/{repo}/statuses/{sha}", input=payload),
        )

    def add_labels(self, repo: str, number: int, labels: list[str]) -> None:
        if not labels:
            return
        self._write("add labels")
        r = self._repo(repo)
        self._call("add labels", lambda: r.get_issue(number).add_to_labels(*labels))

    def upsert_comment(self, repo: str, number: int, marker: str, body: str) -> int:
        existing = self.find_comment(repo, number, marker)
        self._write("comment")
        r = self._repo(repo)
        if existing is not None:
            comment = self._call("read comment", lambda: r.get_issue(number).get_comment(existing))
            self._call("update comment", lambda: comment.edit(body))
            return existing
        made = self._call("create comment", lambda: r.get_issue(number).create_comment(body), idempotent=False)
        return made.id


@dataclass
class DryRunProvider(Provider):
    """Reads through ``inner`` when given (else everything is absent); writes are recorded, not made."""

    inner: Provider | None = None
    default_branch: str = "main"
    actions: list[str] = field(default_factory=list)
    branch_prefix: str = "setupbot/"

    def repo_info(self, repo: str) -> RepoInfo:
        return self.inner.repo_info(repo) if self.inner else RepoInfo(repo, self.default_branch)

    def branch_sha(self, repo: str, branch: str) -> str | None:
        if self.inner:
            return self.inner.branch_sha(repo, branch)
        return "0" * 40 if branch == self.default_branch else None

    def read_file(self, repo: str, path: str, ref: str) -> str | None:
        return self.inner.read_file(repo, path, ref) if self.inner else None

    def commit_message(self, repo: str, sha: str) -> str:
        return self.inner.commit_message(repo, sha) if self.inner else ""

    def find_pulls(self, repo: str, head_branch: str, state: str = "open") -> list[PullInfo]:
        return self.inner.find_pulls(repo, head_branch, state) if self.inner else []

    def list_org_repos(self, org: str) -> list[RepoInfo]:
        return self.inner.list_org_repos(org) if self.inner else []

    def list_dir(self, repo: str, path: str, ref: str) -> list[str]:
        return self.inner.list_dir(repo, path, ref) if self.inner else []

    def last_workflow_run(self, repo: str, workflow_path: str) -> dict[str, str] | None:
        return self.inner.last_workflow_run(repo, workflow_path) if self.inner else None

    def find_comment(self, repo: str, number: int, marker: str) -> int | None:
        return self.inner.find_comment(repo, number, marker) if self.inner else None

    def commit_parents(self, repo: str, sha: str) -> list[str]:
        return self.inner.commit_parents(repo, sha) if self.inner else []

    def commit_files(self, repo, parent_sha, files, message, *, allow_workflows=False) -> str:
        check_paths(files, allow_workflows)
        self.actions.append(f"commit {len(files)} file(s) on {parent_sha[:12]}: {', '.join(sorted(files))}")
        return "d" * 40

    def set_branch(self, repo, branch, sha) -> None:
        check_branch(branch, self.branch_prefix)
        self.actions.append(f"point {branch} at {sha[:12]}")

    def create_pull(self, repo, base, head, title, body, *, draft=False) -> PullInfo:
        check_branch(head, self.branch_prefix)
        self.actions.append(f"open {'draft ' if draft else ''}pull request {head} -> {base}: {title}")
        return PullInfo(0, "open", False, head, base, title, body)

    def close_pull(self, repo, number) -> None:
        self.actions.append(f"close pull request #{number}")

    def add_comment(self, repo, number, body) -> int:
        self.actions.append(f"comment on #{number}")
        return 0

    def set_status(self, repo, sha, state, description, *, context="setupbot", target_url="") -> None:
        self.actions.append(f"set status {context}={state} on {sha[:12]}: {description}")

    def update_pull(self, repo, number, title, body) -> None:
        self.actions.append(f"update pull request #{number}")

    def add_labels(self, repo, number, labels) -> None:
        self.actions.append(f"label #{number}: {', '.join(labels)}")

    def upsert_comment(self, repo, number, marker, body) -> int:
        self.actions.append(f"comment on #{number}")
        return 0
