"""A GitHub REST double over real HTTP, for PyGithub pointed at it via ``base_url``.

It keeps repositories as Git objects (blobs, trees, commits, refs), pull requests, issue comments
and labels, answers with the fields GitHub documents, and validates every request body against
the published REST schema through githubkit's generated pydantic models: a body GitHub would
reject is answered 422 and recorded in ``schema_errors``.

Faults are injected per route: ``inject("POST", r"/pulls$", 502, after=True)`` lets the request
succeed on the server and then answers 502, like a gateway timing out after the write landed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pydantic
from githubkit_schemas.latest import models as gh

NOW = "2026-01-01T00:00:00Z"


def _sha(kind: str, data: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(data)}\0".encode() + data).hexdigest()


def _user(login: str = "setupbot[bot]", base: str = "https://api.github.com") -> dict[str, Any]:
    """A SimpleUser as the REST description requires it (URLs point at the double)."""
    u = f"{base}/users/{login}"
    return {
        "login": login,
        "id": 1,
        "node_id": "U_1",
        "type": "Bot",
        "site_admin": False,
        "avatar_url": "",
        "gravatar_id": "",
        "url": u,
        "html_url": f"https://github.com/{login}",
        "followers_url": f"{u}/followers",
        "following_url": f"{u}/following{{/other_user}}",
        "gists_url": f"{u}/gists{{/gist_id}}",
        "starred_url": f"{u}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{u}/subscriptions",
        "organizations_url": f"{u}/orgs",
        "repos_url": f"{u}/repos",
        "events_url": f"{u}/events{{/privacy}}",
        "received_events_url": f"{u}/received_events",
    }


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    headers: dict[str, str]
    after: bool
    times: int
    body: dict[str, Any]
    drop: bool = False


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    status: int = 0


@dataclass
class FakeRepo:
    owner: str
    name: str
    default_branch: str = "main"
    blobs: dict[str, bytes] = field(default_factory=dict)
    trees: dict[str, dict[str, str]] = field(default_factory=dict)  # sha -> {path: blob sha}
    commits: dict[str, dict[str, Any]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)  # "heads/main" -> sha
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    labels: dict[int, list[str]] = field(default_factory=dict)
    statuses: list[dict[str, Any]] = field(default_factory=list)  # commit statuses, oldest first
    archived: bool = False

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def files_at(self, ref: str) -> dict[str, bytes]:
        sha = self.refs.get(f"heads/{ref}", ref)
        commit = self.commits.get(sha)
        if commit is None:
            return {}
        return {p: self.blobs[b] for p, b in self.trees[commit["tree"]].items()}


class SchemaViolation(Exception):
    pass


# Request body models from the published GitHub REST description (githubkit's generated models).
BODY_MODELS: list[tuple[str, str, Any]] = [
    ("POST", r"/git/blobs$", gh.ReposOwnerRepoGitBlobsPostBody),
    ("POST", r"/git/trees$", gh.ReposOwnerRepoGitTreesPostBody),
    ("POST", r"/git/commits$", gh.ReposOwnerRepoGitCommitsPostBody),
    ("POST", r"/git/refs$", gh.ReposOwnerRepoGitRefsPostBody),
    ("PATCH", r"/git/refs/.+$", gh.ReposOwnerRepoGitRefsRefPatchBody),
    ("POST", r"/pulls$", gh.ReposOwnerRepoPullsPostBody),
    ("PATCH", r"/pulls/\d+$", gh.ReposOwnerRepoPullsPullNumberPatchBody),
    ("POST", r"/issues/\d+/comments$", gh.ReposOwnerRepoIssuesIssueNumberCommentsPostBody),
    ("PATCH", r"/issues/comments/\d+$", gh.ReposOwnerRepoIssuesCommentsCommentIdPatchBody),
    ("POST", r"/statuses/[0-9a-f]{40}$", gh.ReposOwnerRepoStatusesShaPostBody),
    (
        "POST",
        r"/issues/\d+/labels$",
        pydantic.TypeAdapter(
            gh.ReposOwnerRepoIssuesIssueNumberLabelsPostBodyOneof0
            | list[str]
            | list[gh.ReposOwnerRepoIssuesIssueNumberLabelsPostBodyOneof2Items]
        ),
    ),
]


def _check_keys(model: Any, body: Any, where: str) -> None:
    """githubkit's models ignore unknown keys; GitHub does not document them, so neither do we."""
    if not isinstance(body, dict) or not hasattr(model, "model_fields"):
        return
    known = {f.alias or name for name, f in model.model_fields.items()} | set(model.model_fields)
    unknown = set(body) - known
    if unknown:
        raise SchemaViolation(f"{where}: unknown field(s) {sorted(unknown)}")


def validate_body(method: str, path: str, body: Any) -> None:
    for m, pattern, model in BODY_MODELS:
        if m == method and re.search(pattern, path):
            try:
                if isinstance(model, pydantic.TypeAdapter):
                    model.validate_python(body)
                else:
                    model.model_validate(body)
                    _check_keys(model, body, f"{method} {path}")
                    if model is gh.ReposOwnerRepoGitTreesPostBody:
                        for item in body.get("tree", []):
                            _check_keys(gh.ReposOwnerRepoGitTreesPostBodyPropTreeItems, item, "tree item")
            except pydantic.ValidationError as exc:
                raise SchemaViolation(f"{method} {path}: {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}") from exc
            return
    if method in ("POST", "PATCH", "PUT", "DELETE"):
        raise SchemaViolation(f"{method} {path}: no such write endpoint in the double")


# Response models: every 2xx answer the double serves is validated against the shape the published
# REST description gives for that endpoint; a mismatch is a defect of the double and is recorded
# in ``schema_errors`` (the tests' fixtures assert it stays empty).
def _list_of(model: Any) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(list[model])


RESPONSE_MODELS: list[tuple[str, str, Any]] = [
    ("GET", r"^/repos/[^/]+/[^/]+$", gh.FullRepository),
    ("GET", r"^/orgs/[^/]+$", gh.OrganizationFull),
    ("GET", r"^/orgs/[^/]+/repos$", _list_of(gh.MinimalRepository)),
    ("GET", r"/git/refs?/.+$", gh.GitRef),
    ("POST", r"/git/refs$", gh.GitRef),
    ("PATCH", r"/git/refs/.+$", gh.GitRef),
    ("POST", r"/git/blobs$", gh.ShortBlob),
    ("POST", r"/git/trees$", gh.GitTree),
    ("GET", r"/git/trees/[0-9a-f]{40}$", gh.GitTree),
    ("POST", r"/git/commits$", gh.GitCommit),
    ("GET", r"/git/commits/[0-9a-f]{40}$", gh.GitCommit),
    ("GET", r"/contents/.*$", pydantic.TypeAdapter(gh.ContentFile | list[gh.ContentDirectoryItems])),
    ("GET", r"/pulls$", _list_of(gh.PullRequestSimple)),
    ("POST", r"/pulls$", gh.PullRequest),
    ("GET", r"/pulls/\d+$", gh.PullRequest),
    ("PATCH", r"/pulls/\d+$", gh.PullRequest),
    ("GET", r"/issues/\d+$", gh.Issue),
    ("POST", r"/issues/\d+/labels$", _list_of(gh.Label)),
    ("GET", r"/issues/\d+/comments$", _list_of(gh.IssueComment)),
    ("POST", r"/issues/\d+/comments$", gh.IssueComment),
    ("GET", r"/issues/comments/\d+$", gh.IssueComment),
    ("PATCH", r"/issues/comments/\d+$", gh.IssueComment),
    ("POST", r"/statuses/[0-9a-f]{40}$", gh.Status),
    ("GET", r"/actions/workflows/[^/]+$", gh.Workflow),
    ("GET", r"/actions/workflows/[^/]+/runs$", gh.ReposOwnerRepoActionsWorkflowsWorkflowIdRunsGetResponse200),
]


def validate_response(method: str, path: str, payload: Any) -> None:
    for m, pattern, model in RESPONSE_MODELS:
        if m == method and re.search(pattern, path):
            try:
                if isinstance(model, pydantic.TypeAdapter):
                    model.validate_python(payload)
                else:
                    model.model_validate(payload)
            except pydantic.ValidationError as exc:
                err = exc.errors()[0]
                raise SchemaViolation(f"response to {method} {path}: {err['msg']} at {err['loc']}") from exc
            return
    raise SchemaViolation(f"response to {method} {path}: no response model for this endpoint")


# Which permission of a GitHub App / fine-grained token a write needs (GitHub's documented table).
def permission_for(method: str, path: str) -> str:
    if re.search(r"/git/|/contents/", path):
        return "contents"
    if re.search(r"/statuses/", path):
        return "statuses"
    if re.search(r"/pulls", path):
        return "pull_requests"
    if re.search(r"/issues/", path):
        return "issues|pull_requests"  # comments and labels on a pull request: either will do
    return "administration"


def paginate(items: list[Any], query: dict[str, str], url: str, default: int = 30) -> tuple[list[Any], dict[str, str]]:
    """``per_page`` (max 100) and ``page``, with a Link header like GitHub's."""
    try:
        per_page = max(1, min(100, int(query.get("per_page", default))))
        page = max(1, int(query.get("page", 1)))
    except ValueError:
        per_page, page = default, 1
    last = max(1, -(-len(items) // per_page))
    chunk = items[(page - 1) * per_page : page * per_page]
    rest = "&".join(f"{k}={v}" for k, v in sorted(query.items()) if k not in ("page", "per_page"))

    def link(n):
        return f"<{url}?{rest + '&' if rest else ''}per_page={per_page}&page={n}>"

    rels = []
    if page < last:
        rels += [f'{link(page + 1)}; rel="next"', f'{link(last)}; rel="last"']
    if page > 1:
        rels += [f'{link(1)}; rel="first"', f'{link(page - 1)}; rel="prev"']
    return chunk, ({"Link": ", ".join(rels)} if rels else {})


class GitHubDouble:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.orgs: dict[str, list[str]] = {}
        self.calls: list[Call] = []
        self.schema_errors: list[str] = []
        self.faults: list[Fault] = []
        self.tokens: dict[str, dict[str, str]] = {}  # empty: any token may do anything
        self.default_per_page = 30
        self.clock = clock
        self._lock = threading.RLock()
        self._ids = 100
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # ---------------------------------------------------------------- lifecycle
    def __enter__(self) -> GitHubDouble:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ---------------------------------------------------------------- setup helpers
    def add_repo(
        self, full_name: str, files: dict[str, str] | None = None, default_branch: str = "main", org: bool = False
    ) -> FakeRepo:
        owner, name = full_name.split("/")
        repo = FakeRepo(owner, name, default_branch)
        tree = {p: self._blob(repo, t.encode()) for p, t in (files or {"README.md": "# app\n"}).items()}
        commit = self._commit(repo, tree, [], "Initial commit")
        repo.refs[f"heads/{default_branch}"] = commit
        self.repos[full_name] = repo
        if org:
            self.orgs.setdefault(owner, []).append(full_name)
        return repo

    def push(self, full_name: str, branch: str, files: dict[str, str], message: str = "change") -> str:
        """Someone pushes to ``branch``: the files are merged over its tree."""
        repo = self.repos[full_name]
        parent = repo.refs[f"heads/{branch}"]
        tree = dict(repo.trees[repo.commits[parent]["tree"]])
        tree.update({p: self._blob(repo, t.encode()) for p, t in files.items()})
        sha = self._commit(repo, tree, [parent], message)
        repo.refs[f"heads/{branch}"] = sha
        return sha

    def close_pull(self, full_name: str, number: int, merged: bool = False) -> None:
        pr = self.repos[full_name].pulls[number]
        pr["state"] = "closed"
        pr["merged"] = merged
        pr["merged_at"] = NOW if merged else None
        pr["closed_at"] = NOW

    def inject(
        self,
        method: str,
        path_regex: str,
        status: int,
        headers: dict[str, str] | None = None,
        *,
        after: bool = False,
        times: int = 1,
        message: str = "Server Error",
        drop: bool = False,
    ) -> None:
        """``drop=True``: close the connection without an answer (a timeout or reset seen by the
        client), before or ``after`` the server did the work."""
        self.faults.append(
            Fault(
                method,
                re.compile(path_regex),
                status,
                headers or {},
                after,
                times,
                {"message": message, "documentation_url": "https://docs.github.com/rest"},
                drop,
            )
        )

    def write_calls(self) -> list[Call]:
        return [c for c in self.calls if c.method != "GET"]

    def grant(self, token: str, **permissions: str) -> None:
        """Accept ``token`` with these permissions (``contents="write"``, ``pull_requests="read"``,
        ``statuses="write"``, ``issues=...``). Once any token is granted, other tokens get 401."""
        self.tokens[token] = dict(permissions)

    def statuses(self, full_name: str) -> list[dict[str, Any]]:
        return list(self.repos[full_name].statuses)

    def pulls(self, full_name: str, state: str = "all") -> list[dict[str, Any]]:
        return [p for p in self.repos[full_name].pulls.values() if state == "all" or p["state"] == state]

    # ---------------------------------------------------------------- rollout: metadata, workflow runs
    def set_repo_meta(
        self, full_name: str, *, topics: list[str] | None = None, language: str | None = None, fork: bool | None = None
    ) -> None:
        """Topics, language and fork flag of a repository, as the org listing reports them."""
        meta = self.__dict__.setdefault("repo_meta", {}).setdefault(full_name, {})
        for key, value in (("topics", topics), ("language", language), ("fork", fork)):
            if value is not None:
                meta[key] = value

    def _repo_meta(self, repo: FakeRepo) -> dict[str, Any]:
        return dict(self.__dict__.get("repo_meta", {}).get(repo.full_name, {}))

    def add_workflow_run(
        self,
        full_name: str,
        workflow_path: str,
        *,
        created_at: str = NOW,
        conclusion: str = "success",
        status: str = "completed",
    ) -> None:
        runs = self.__dict__.setdefault("workflow_runs", {}).setdefault((full_name, workflow_path), [])
        runs.insert(0, {"created_at": created_at, "conclusion": conclusion, "status": status})

    def _actions_route(self, repo: FakeRepo, method: str, rest: str) -> tuple[int, Any]:
        """GET a workflow by file name or id (``Workflow``), and its runs, newest first
        (``{total_count, workflow_runs: [WorkflowRun]}``), in the shapes the REST description gives."""
        runs = self.__dict__.get("workflow_runs", {})
        paths = sorted(p for (r, p) in runs if r == repo.full_name)
        m = re.match(r"^/actions/workflows/([^/]+)(/runs)?$", rest)
        if method != "GET" or not m:
            return 404, {"message": "Not Found"}
        key = unquote(m.group(1))
        path = next((p for i, p in enumerate(paths) if key in (p.rsplit("/", 1)[-1], str(1000 + i))), None)
        if path is None:
            return 404, {"message": "Not Found"}
        wid = 1000 + paths.index(path)
        url = self._u(repo, f"/actions/workflows/{wid}")
        html = f"https://github.com/{repo.full_name}"
        if not m.group(2):
            return 200, {
                "id": wid,
                "node_id": f"W_{wid}",
                "name": path,
                "path": path,
                "state": "active",
                "created_at": NOW,
                "updated_at": NOW,
                "url": url,
                "html_url": f"{html}/blob/{repo.default_branch}/{path}",
                "badge_url": f"{html}/workflows/{path.rsplit('/', 1)[-1]}/badge.svg",
            }
        head = repo.refs[f"heads/{repo.default_branch}"]
        commit = repo.commits[head]
        person = {"name": "t", "email": "t@example.com"}
        repository = self._repo_json(repo)
        items = []
        for n, r in enumerate(runs[(repo.full_name, path)]):
            rid = wid * 100 + n
            ru = self._u(repo, f"/actions/runs/{rid}")
            items.append(
                {
                    "id": rid,
                    "node_id": f"WFR_{rid}",
                    "name": path,
                    "display_title": commit["message"].splitlines()[0],
                    "path": path,
                    "workflow_id": wid,
                    "run_number": n + 1,
                    "run_attempt": 1,
                    "event": "push",
                    "status": r["status"],
                    "conclusion": r["conclusion"],
                    "head_branch": repo.default_branch,
                    "head_sha": head,
                    "created_at": r["created_at"],
                    "updated_at": r["created_at"],
                    "run_started_at": r["created_at"],
                    "url": ru,
                    "html_url": f"{html}/actions/runs/{rid}",
                    "pull_requests": [],
                    "jobs_url": f"{ru}/jobs",
                    "logs_url": f"{ru}/logs",
                    "check_suite_url": self._u(repo, f"/check-suites/{rid}"),
                    "artifacts_url": f"{ru}/artifacts",
                    "cancel_url": f"{ru}/cancel",
                    "rerun_url": f"{ru}/rerun",
                    "workflow_url": url,
                    "head_commit": {
                        "id": head,
                        "tree_id": commit["tree"],
                        "message": commit["message"],
                        "timestamp": r["created_at"],
                        "author": person,
                        "committer": person,
                    },
                    "repository": repository,
                    "head_repository": repository,
                }
            )
        return 200, {"total_count": len(items), "workflow_runs": items}

    # ---------------------------------------------------------------- git objects
    def _blob(self, repo: FakeRepo, data: bytes) -> str:
        sha = _sha("blob", data)
        repo.blobs[sha] = data
        return sha

    def _tree(self, repo: FakeRepo, entries: dict[str, str]) -> str:
        sha = _sha("tree", json.dumps(sorted(entries.items())).encode())
        repo.trees[sha] = dict(entries)
        return sha

    def _commit(self, repo: FakeRepo, tree_entries: dict[str, str] | str, parents: list[str], message: str) -> str:
        tree = tree_entries if isinstance(tree_entries, str) else self._tree(repo, tree_entries)
        sha = _sha("commit", json.dumps([tree, parents, message]).encode())
        repo.commits[sha] = {"tree": tree, "parents": parents, "message": message}
        return sha

    def _next_id(self) -> int:
        with self._lock:
            self._ids += 1
            return self._ids

    # ---------------------------------------------------------------- JSON shapes
    def _u(self, repo: FakeRepo, rest: str = "") -> str:
        return f"{self.base_url}/repos/{repo.full_name}{rest}"

    def _repo_json(self, repo: FakeRepo) -> dict[str, Any]:
        """A repository as GET /repos/{o}/{r} answers it (FullRepository; also a valid Repository
        and MinimalRepository, the shapes nested in pull requests and listings)."""
        u = self._u(repo)
        data: dict[str, Any] = {
            "id": abs(hash(repo.full_name)) % 10**8,
            "node_id": "R_1",
            "name": repo.name,
            "full_name": repo.full_name,
            "owner": _user(repo.owner, self.base_url),
            "private": False,
            "description": None,
            "fork": False,
            "homepage": None,
            "language": None,
            "forks_count": 0,
            "stargazers_count": 0,
            "watchers_count": 0,
            "size": 1,
            "default_branch": repo.default_branch,
            "open_issues_count": 0,
            "has_issues": True,
            "has_projects": False,
            "has_wiki": False,
            "has_pages": False,
            "has_discussions": False,
            "archived": repo.archived,
            "disabled": False,
            "pushed_at": NOW,
            "created_at": NOW,
            "updated_at": NOW,
            "subscribers_count": 0,
            "network_count": 0,
            "license": None,
            "forks": 0,
            "open_issues": 0,
            "watchers": 0,
            "visibility": "public",
            "permissions": {"admin": False, "maintain": False, "push": True, "triage": True, "pull": True},
            "html_url": f"https://github.com/{repo.full_name}",
            "url": u,
            "mirror_url": None,
            "git_url": f"git://github.com/{repo.full_name}.git",
            "ssh_url": f"git@github.com:{repo.full_name}.git",
            "clone_url": f"https://github.com/{repo.full_name}.git",
            "svn_url": f"https://github.com/{repo.full_name}",
        }
        for name in (
            "archive",
            "assignees",
            "blobs",
            "branches",
            "collaborators",
            "comments",
            "commits",
            "compare",
            "contents",
            "contributors",
            "deployments",
            "downloads",
            "events",
            "forks",
            "git_commits",
            "git_refs",
            "git_tags",
            "issue_comment",
            "issue_events",
            "issues",
            "keys",
            "labels",
            "languages",
            "merges",
            "milestones",
            "notifications",
            "pulls",
            "releases",
            "stargazers",
            "statuses",
            "subscribers",
            "subscription",
            "tags",
            "teams",
            "trees",
            "hooks",
        ):
            data[f"{name}_url"] = f"{u}/{name.replace('_', '/')}"
        # topics and language (null until set, as GitHub reports a repository without code), for
        # rollout's filters
        data.update(self._repo_meta(repo))
        return data

    def _ref_json(self, repo: FakeRepo, name: str) -> dict[str, Any]:
        sha = repo.refs[name]
        return {
            "ref": f"refs/{name}",
            "node_id": "REF_1",
            "url": self._u(repo, f"/git/refs/{name}"),
            "object": {"type": "commit", "sha": sha, "url": self._u(repo, f"/git/commits/{sha}")},
        }

    def _commit_json(self, repo: FakeRepo, sha: str) -> dict[str, Any]:
        c = repo.commits[sha]
        person = {"name": "setupbot", "email": "setupbot@users.noreply.github.com", "date": NOW}
        return {
            "sha": sha,
            "node_id": "C_1",
            "url": self._u(repo, f"/git/commits/{sha}"),
            "html_url": f"https://github.com/{repo.full_name}/commit/{sha}",
            "author": person,
            "committer": person,
            "message": c["message"],
            "tree": {"sha": c["tree"], "url": self._u(repo, f"/git/trees/{c['tree']}")},
            "parents": [
                {
                    "sha": p,
                    "url": self._u(repo, f"/git/commits/{p}"),
                    "html_url": f"https://github.com/{repo.full_name}/commit/{p}",
                }
                for p in c["parents"]
            ],
            "verification": {
                "verified": False,
                "reason": "unsigned",
                "signature": None,
                "payload": None,
                "verified_at": None,
            },
        }

    def _tree_json(self, repo: FakeRepo, sha: str) -> dict[str, Any]:
        return {
            "sha": sha,
            "url": self._u(repo, f"/git/trees/{sha}"),
            "truncated": False,
            "tree": [
                {
                    "path": p,
                    "mode": "100644",
                    "type": "blob",
                    "sha": b,
                    "size": len(repo.blobs[b]),
                    "url": self._u(repo, f"/git/blobs/{b}"),
                }
                for p, b in sorted(repo.trees[sha].items())
            ],
        }

    def _pull_json(self, repo: FakeRepo, pr: dict[str, Any], full: bool = True) -> dict[str, Any]:
        """A pull request (PullRequest); ``full=False``: as the list endpoint answers (PullRequestSimple)."""
        n = pr["number"]
        head_sha = repo.refs.get(f"heads/{pr['head']}", pr.get("head_sha", "0" * 40))
        base_sha = repo.refs.get(f"heads/{pr['base']}", "0" * 40)
        html = f"https://github.com/{repo.full_name}/pull/{n}"
        links = {
            k: {"href": v}
            for k, v in {
                "self": self._u(repo, f"/pulls/{n}"),
                "html": html,
                "issue": self._u(repo, f"/issues/{n}"),
                "comments": self._u(repo, f"/issues/{n}/comments"),
                "review_comments": self._u(repo, f"/pulls/{n}/comments"),
                "review_comment": self._u(repo, "/pulls/comments{/number}"),
                "commits": self._u(repo, f"/pulls/{n}/commits"),
                "statuses": self._u(repo, f"/statuses/{head_sha}"),
            }.items()
        }
        data: dict[str, Any] = {
            "id": pr["id"],
            "node_id": f"PR_{n}",
            "number": n,
            "state": pr["state"],
            "locked": False,
            "title": pr["title"],
            "body": pr["body"],
            "user": _user(base=self.base_url),
            "draft": pr.get("draft", False),
            "url": self._u(repo, f"/pulls/{n}"),
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": self._u(repo, f"/issues/{n}"),
            "commits_url": self._u(repo, f"/pulls/{n}/commits"),
            "review_comments_url": self._u(repo, f"/pulls/{n}/comments"),
            "review_comment_url": self._u(repo, "/pulls/comments{/number}"),
            "comments_url": self._u(repo, f"/issues/{n}/comments"),
            "statuses_url": self._u(repo, f"/statuses/{head_sha}"),
            "head": {
                "label": f"{repo.owner}:{pr['head']}",
                "ref": pr["head"],
                "sha": head_sha,
                "user": _user(repo.owner, self.base_url),
                "repo": self._repo_json(repo),
            },
            "base": {
                "label": f"{repo.owner}:{pr['base']}",
                "ref": pr["base"],
                "sha": base_sha,
                "user": _user(repo.owner, self.base_url),
                "repo": self._repo_json(repo),
            },
            "_links": links,
            "author_association": "NONE",
            "auto_merge": None,
            "milestone": None,
            "merged_at": pr["merged_at"],
            "closed_at": pr.get("closed_at"),
            "labels": [self._label_json(repo, ln) for ln in repo.labels.get(n, [])],
            "created_at": NOW,
            "updated_at": NOW,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
        }
        if full:
            data.update(
                {
                    "merged": pr["merged"],
                    "mergeable": None,
                    "mergeable_state": "unknown",
                    "merged_by": None,
                    "comments": sum(1 for c in repo.comments.values() if c["issue"] == n),
                    "review_comments": 0,
                    "maintainer_can_modify": pr["maintainer_can_modify"],
                    "commits": 1,
                    "additions": 0,
                    "deletions": 0,
                    "changed_files": 0,
                }
            )
        return data

    def _label_json(self, repo: FakeRepo, name: str) -> dict[str, Any]:
        return {
            "id": abs(hash(name)) % 10**6,
            "node_id": f"LA_{name}",
            "url": self._u(repo, f"/labels/{name}"),
            "name": name,
            "description": None,
            "color": "ededed",
            "default": False,
            "archived_at": None,
            "archived_by": None,
        }

    def _issue_json(self, repo: FakeRepo, n: int) -> dict[str, Any]:
        pr = repo.pulls[n]
        return {
            "id": pr["id"],
            "node_id": f"I_{n}",
            "number": n,
            "title": pr["title"],
            "body": pr["body"],
            "state": pr["state"],
            "locked": False,
            "comments": sum(1 for c in repo.comments.values() if c["issue"] == n),
            "url": self._u(repo, f"/issues/{n}"),
            "repository_url": self._u(repo),
            "labels_url": self._u(repo, f"/issues/{n}/labels{{/name}}"),
            "events_url": self._u(repo, f"/issues/{n}/events"),
            "html_url": f"https://github.com/{repo.full_name}/issues/{n}",
            "comments_url": self._u(repo, f"/issues/{n}/comments"),
            "user": _user(base=self.base_url),
            "labels": [self._label_json(repo, ln) for ln in repo.labels.get(n, [])],
            "milestone": None,
            "closed_at": pr.get("closed_at"),
            "author_association": "NONE",
            "pull_request": {
                "url": self._u(repo, f"/pulls/{n}"),
                "html_url": None,
                "diff_url": None,
                "patch_url": None,
            },
            "created_at": NOW,
            "updated_at": NOW,
        }

    def _comment_json(self, repo: FakeRepo, cid: int) -> dict[str, Any]:
        c = repo.comments[cid]
        author = _user(c["user"], self.base_url) if c.get("user") else _user(base=self.base_url)
        if c.get("user"):
            author["type"] = "User"
        return {
            "id": cid,
            "node_id": f"IC_{cid}",
            "body": c["body"],
            "user": author,
            "url": self._u(repo, f"/issues/comments/{cid}"),
            "html_url": f"https://github.com/{repo.full_name}/pull/{c['issue']}#issuecomment-{cid}",
            "issue_url": self._u(repo, f"/issues/{c['issue']}"),
            "created_at": NOW,
            "updated_at": NOW,
            "author_association": "NONE",
        }

    def _status_json(self, repo: FakeRepo, st: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": st["id"],
            "node_id": f"SC_{st['id']}",
            "url": self._u(repo, f"/statuses/{st['sha']}"),
            "avatar_url": None,
            "state": st["state"],
            "description": st.get("description"),
            "target_url": st.get("target_url"),
            "context": st.get("context", "default"),
            "created_at": NOW,
            "updated_at": NOW,
            "creator": _user(base=self.base_url),
        }

    # ---------------------------------------------------------------- auth
    def authorise(self, method: str, path: str, header: str) -> tuple[int, dict[str, Any]] | None:
        """GitHub's answers: 401 "Bad credentials" for a token it does not know, 403 "Resource not
        accessible by integration" for a write the token has no permission for."""
        if not self.tokens:
            return None
        token = header.split(" ", 1)[1].strip() if " " in header else ""
        if token not in self.tokens:
            if not token and method == "GET":
                return None  # anonymous reads of a public repository
            return 401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}
        if method == "GET":
            return None
        granted = self.tokens[token]
        if any(granted.get(p) == "write" for p in permission_for(method, path).split("|")):
            return None
        return 403, {
            "message": "Resource not accessible by integration",
            "documentation_url": "https://docs.github.com/rest",
        }

    # ---------------------------------------------------------------- routing
    def handle(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        m = re.match(r"^/orgs/([^/]+)(/repos)?$", path)
        if m and method == "GET":
            org = m.group(1)
            if org not in self.orgs:
                return 404, {"message": "Not Found"}
            if m.group(2):
                return 200, [self._repo_json(self.repos[r]) for r in self.orgs[org]]
            o = f"{self.base_url}/orgs/{org}"
            return 200, {
                "login": org,
                "id": 7,
                "node_id": "O_7",
                "url": o,
                "repos_url": f"{o}/repos",
                "events_url": f"{o}/events",
                "hooks_url": f"{o}/hooks",
                "issues_url": f"{o}/issues",
                "members_url": f"{o}/members{{/member}}",
                "public_members_url": f"{o}/public_members{{/member}}",
                "avatar_url": "",
                "description": None,
                "html_url": f"https://github.com/{org}",
                "has_organization_projects": False,
                "has_repository_projects": False,
                "public_repos": len(self.orgs[org]),
                "public_gists": 0,
                "followers": 0,
                "following": 0,
                "type": "Organization",
                "created_at": NOW,
                "updated_at": NOW,
                "archived_at": None,
            }
        m = re.match(r"^/repos/([^/]+/[^/]+)(/.*)?$", path)
        if not m or m.group(1) not in self.repos:
            return 404, {"message": "Not Found"}
        repo = self.repos[m.group(1)]
        rest = m.group(2) or ""
        with self._lock:
            if rest.startswith("/actions/"):
                return self._actions_route(repo, method, rest)
            return self._repo_route(repo, method, rest, query, body)

    def _repo_route(
        self, repo: FakeRepo, method: str, rest: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any]:
        q = {k: v[0] for k, v in query.items()}
        if rest == "" and method == "GET":
            return 200, self._repo_json(repo)
        if (m := re.match(r"^/git/refs?/(.+)$", rest)) and method == "GET":
            name = unquote(m.group(1))
            return (200, self._ref_json(repo, name)) if name in repo.refs else (404, {"message": "Not Found"})
        if rest == "/git/refs" and method == "POST":
            name = body["ref"].removeprefix("refs/")
            if name in repo.refs:
                return 422, {"message": "Reference already exists"}
            if body["sha"] not in repo.commits:
                return 422, {"message": "Object does not exist"}
            repo.refs[name] = body["sha"]
            return 201, self._ref_json(repo, name)
        if (m := re.match(r"^/git/refs/(.+)$", rest)) and method == "PATCH":
            name = unquote(m.group(1))
            if name not in repo.refs:
                return 422, {"message": "Reference does not exist"}
            new = body["sha"]
            if not body.get("force") and repo.refs[name] not in self._ancestors(repo, new):
                return 422, {"message": "Update is not a fast forward"}
            repo.refs[name] = new
            return 200, self._ref_json(repo, name)
        if rest == "/git/blobs" and method == "POST":
            data = base64.b64decode(body["content"]) if body.get("encoding") == "base64" else body["content"].encode()
            sha = self._blob(repo, data)
            return 201, {"sha": sha, "url": self._u(repo, f"/git/blobs/{sha}")}
        if rest == "/git/trees" and method == "POST":
            entries = dict(repo.trees[body["base_tree"]]) if body.get("base_tree") else {}
            for item in body["tree"]:
                if item.get("sha") is None and "content" not in item:
                    entries.pop(item["path"], None)
                elif "content" in item:
                    entries[item["path"]] = self._blob(repo, item["content"].encode())
                else:
                    if item["sha"] not in repo.blobs:
                        return 422, {"message": f"tree.sha {item['sha']} is not a valid blob"}
                    entries[item["path"]] = item["sha"]
            return 201, self._tree_json(repo, self._tree(repo, entries))
        if (m := re.match(r"^/git/trees/([0-9a-f]{40})$", rest)) and method == "GET":
            return (
                (200, self._tree_json(repo, m.group(1)))
                if m.group(1) in repo.trees
                else (404, {"message": "Not Found"})
            )
        if rest == "/git/commits" and method == "POST":
            if body["tree"] not in repo.trees or any(p not in repo.commits for p in body.get("parents", [])):
                return 422, {"message": "Tree or parent does not exist"}
            sha = self._commit(repo, body["tree"], list(body.get("parents", [])), body["message"])
            return 201, self._commit_json(repo, sha)
        if (m := re.match(r"^/git/commits/([0-9a-f]{40})$", rest)) and method == "GET":
            return (
                (200, self._commit_json(repo, m.group(1)))
                if m.group(1) in repo.commits
                else (404, {"message": "Not Found"})
            )
        if (m := re.match(r"^/contents/(.*)$", rest)) and method == "GET":
            path = unquote(m.group(1))
            files = repo.files_at(q.get("ref", repo.default_branch))
            if path not in files:
                # "" is the root folder (GET /contents/): its direct children
                prefix = path.rstrip("/") + "/" if path.strip("/") else ""
                children = sorted({p for p in files if p.startswith(prefix) and "/" not in p[len(prefix) :]})
                if not children:
                    return 404, {"message": "Not Found"}
                return 200, [
                    {
                        "type": "file",
                        "name": p.split("/")[-1],
                        "path": p,
                        "sha": _sha("blob", files[p]),
                        "size": len(files[p]),
                        "url": self._u(repo, f"/contents/{p}"),
                        "git_url": self._u(repo, f"/git/blobs/{_sha('blob', files[p])}"),
                        "html_url": f"https://github.com/{repo.full_name}/blob/main/{p}",
                        "download_url": None,
                        "_links": {
                            "self": self._u(repo, f"/contents/{p}"),
                            "git": self._u(repo, f"/git/blobs/{_sha('blob', files[p])}"),
                            "html": f"https://github.com/{repo.full_name}/blob/main/{p}",
                        },
                    }
                    for p in children
                ]
            data = files[path]
            sha = _sha("blob", data)
            return 200, {
                "type": "file",
                "encoding": "base64",
                "size": len(data),
                "name": path.split("/")[-1],
                "path": path,
                "content": base64.b64encode(data).decode(),
                "sha": sha,
                "url": self._u(repo, f"/contents/{path}"),
                "git_url": self._u(repo, f"/git/blobs/{sha}"),
                "html_url": f"https://github.com/{repo.full_name}/blob/main/{path}",
                "download_url": None,
                "_links": {
                    "self": self._u(repo, f"/contents/{path}"),
                    "git": self._u(repo, f"/git/blobs/{sha}"),
                    "html": f"https://github.com/{repo.full_name}/blob/main/{path}",
                },
            }
        if rest == "/pulls" and method == "GET":
            state = q.get("state", "open")
            head = q.get("head")
            out = [
                self._pull_json(repo, p, full=False)
                for p in sorted(repo.pulls.values(), key=lambda p: -p["number"])
                if (state == "all" or p["state"] == state)
                and (head is None or f"{repo.owner}:{p['head']}" == head)
                and ("base" not in q or p["base"] == q["base"])
            ]
            return 200, out
        if (m := re.match(r"^/statuses/([0-9a-f]{40})$", rest)) and method == "POST":
            if m.group(1) not in repo.commits:
                return 422, {"message": "No commit found for SHA: " + m.group(1)}
            status = {"id": self._next_id(), "sha": m.group(1), **body}
            repo.statuses.append(status)
            return 201, self._status_json(repo, status)
        if rest == "/pulls" and method == "POST":
            if f"heads/{body['head']}" not in repo.refs:
                return 422, {"message": "Validation Failed", "errors": [{"field": "head", "code": "invalid"}]}
            if any(
                p["head"] == body["head"] and p["base"] == body["base"] and p["state"] == "open"
                for p in repo.pulls.values()
            ):
                return 422, {
                    "message": "Validation Failed",
                    "errors": [{"message": f"A pull request already exists for {repo.owner}:{body['head']}."}],
                }
            n = max([*repo.pulls, *[c["issue"] for c in repo.comments.values()], 0]) + 1
            repo.pulls[n] = {
                "id": self._next_id(),
                "number": n,
                "state": "open",
                "title": body.get("title", ""),
                "body": body.get("body") or "",
                "head": body["head"],
                "base": body["base"],
                "merged": False,
                "merged_at": None,
                "draft": bool(body.get("draft", False)),
                "maintainer_can_modify": body.get("maintainer_can_modify", True),
            }
            return 201, self._pull_json(repo, repo.pulls[n])
        if m := re.match(r"^/pulls/(\d+)$", rest):
            n = int(m.group(1))
            if n not in repo.pulls:
                return 404, {"message": "Not Found"}
            if method == "PATCH":
                for key in ("title", "body", "state"):
                    if key in body:
                        repo.pulls[n][key] = body[key]
                if body.get("state") == "closed":
                    repo.pulls[n]["closed_at"] = NOW
            return 200, self._pull_json(repo, repo.pulls[n])
        if (m := re.match(r"^/issues/(\d+)$", rest)) and method == "GET":
            n = int(m.group(1))
            return (200, self._issue_json(repo, n)) if n in repo.pulls else (404, {"message": "Not Found"})
        if (m := re.match(r"^/issues/(\d+)/labels$", rest)) and method == "POST":
            n = int(m.group(1))
            names = body if isinstance(body, list) else body.get("labels", [])
            names = [x if isinstance(x, str) else x["name"] for x in names]
            current = repo.labels.setdefault(n, [])
            current.extend(x for x in names if x not in current)
            return 200, [self._label_json(repo, ln) for ln in current]
        if m := re.match(r"^/issues/(\d+)/comments$", rest):
            n = int(m.group(1))
            if n not in repo.pulls:
                return 404, {"message": "Not Found"}
            if method == "POST":
                cid = self._next_id()
                repo.comments[cid] = {"issue": n, "body": body["body"]}
                return 201, self._comment_json(repo, cid)
            return 200, [self._comment_json(repo, c) for c, v in sorted(repo.comments.items()) if v["issue"] == n]
        if m := re.match(r"^/issues/comments/(\d+)$", rest):
            cid = int(m.group(1))
            if cid not in repo.comments:
                return 404, {"message": "Not Found"}
            if method == "PATCH":
                repo.comments[cid]["body"] = body["body"]
            return 200, self._comment_json(repo, cid)
        return 404, {"message": f"Not Found ({method} {rest} is not served by the double)"}

    def _ancestors(self, repo: FakeRepo, sha: str) -> set[str]:
        seen, todo = set(), [sha]
        while todo:
            s = todo.pop()
            if s in seen or s not in repo.commits:
                continue
            seen.add(s)
            todo.extend(repo.commits[s]["parents"])
        return seen

    # ---------------------------------------------------------------- HTTP
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        double = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def setup(self) -> None:
                super().setup()
                # headers and body go out in two writes; without this, Nagle + delayed ACK add
                # ~40 ms to every request
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                path = parts.path.removeprefix("/api/v3")
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                call = Call(self.command, path, parse_qs(parts.query), body)
                with double._lock:
                    double.calls.append(call)
                    fault = next(
                        (
                            f
                            for f in double.faults
                            if f.times > 0 and f.method == self.command and f.pattern.search(path)
                        ),
                        None,
                    )
                    if fault:
                        fault.times -= 1
                if fault and not fault.after:
                    return self._fail(call, fault)
                denied = double.authorise(self.command, path, self.headers.get("Authorization", ""))
                if denied:
                    return self._send(call, *denied, {})
                headers: dict[str, str] = {}
                try:
                    if self.command != "GET":
                        validate_body(self.command, path, body)
                    status, payload = double.handle(self.command, path, call.query, body)
                    if 200 <= status < 300:
                        validate_response(self.command, path, payload)
                        if self.command == "GET" and isinstance(payload, list):
                            query = {k: v[0] for k, v in call.query.items()}
                            payload, headers = paginate(
                                payload, query, double.base_url + parts.path, double.default_per_page
                            )
                except SchemaViolation as exc:
                    double.schema_errors.append(str(exc))
                    status, payload = (
                        (500 if exc.args[0].startswith("response") else 422),
                        {"message": "Invalid request.", "errors": [str(exc)]},
                    )
                if fault and fault.after:
                    return self._fail(call, fault)
                self._send(call, status, payload, headers)

            def _fail(self, call: Call, fault: Fault) -> None:
                if fault.drop:
                    call.status = -1
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self._send(call, fault.status, fault.body, fault.headers)

            def _send(self, call: Call, status: int, payload: Any, headers: dict[str, str]) -> None:
                call.status = status
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                base = {
                    "x-ratelimit-limit": "5000",
                    "x-ratelimit-remaining": "4999",
                    "x-ratelimit-reset": str(int(double.clock()) + 3600),
                    "x-github-api-version-selected": "2022-11-28",
                }
                base.update(headers)
                for k, v in base.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        return Handler
