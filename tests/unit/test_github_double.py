"""The REST double answers in GitHub's documented shapes (githubkit's response models), and
rejects request bodies the published schema rejects."""

from __future__ import annotations

import pytest
from doubles.github_api import GitHubDouble, SchemaViolation, validate_body
from githubkit_schemas.latest import models as gh


@pytest.fixture
def double():
    with GitHubDouble() as d:
        repo = d.add_repo("o/r", {"README.md": "# r\n"})
        repo.pulls[1] = {
            "id": 5,
            "number": 1,
            "state": "open",
            "title": "t",
            "body": "b",
            "head": "main",
            "base": "main",
            "merged": False,
            "merged_at": None,
            "maintainer_can_modify": False,
        }
        repo.comments[3] = {"issue": 1, "body": "x"}
        yield d


@pytest.mark.parametrize(
    "model,method,path,body",
    [
        (gh.GitRef, "GET", "/repos/o/r/git/ref/heads/main", None),
        (
            gh.GitTree,
            "POST",
            "/repos/o/r/git/trees",
            {"tree": [{"path": "a", "mode": "100644", "type": "blob", "content": "x"}]},
        ),
        (gh.ShortBlob, "POST", "/repos/o/r/git/blobs", {"content": "x", "encoding": "utf-8"}),
        (gh.ContentFile, "GET", "/repos/o/r/contents/README.md", None),
        (gh.IssueComment, "GET", "/repos/o/r/issues/comments/3", None),
    ],
)
def test_responses_match_the_rest_description(double, model, method, path, body):
    status, payload = double.handle(method, path, {}, body)
    assert status in (200, 201)
    model.model_validate(payload)


def test_commit_response_matches(double):
    repo = double.repos["o/r"]
    gh.GitCommit.model_validate(double._commit_json(repo, repo.refs["heads/main"]))


@pytest.mark.parametrize(
    "method,path,body,match",
    [
        ("POST", "/repos/o/r/pulls", {"title": "t"}, "head"),  # head is required
        ("POST", "/repos/o/r/pulls", {"head": "a", "base": "main", "merge": True}, "unknown field"),
        ("POST", "/repos/o/r/git/trees", {"tree": [{"path": "a", "mode": "777", "type": "blob"}]}, "tree"),
        ("PATCH", "/repos/o/r/git/refs/heads/main", {"force": True}, "sha"),
        ("PUT", "/repos/o/r/pulls/1/merge", {}, "no such write endpoint"),
    ],
)
def test_bad_request_bodies_are_rejected(method, path, body, match):
    with pytest.raises(SchemaViolation, match=match):
        validate_body(method, path, body)


def test_a_rejected_body_is_recorded_and_answered_422(double):
    import requests

    r = requests.post(f"{double.base_url}/repos/o/r/pulls", json={"title": "no head"}, timeout=5)
    assert r.status_code == 422
    assert double.schema_errors and "head" in double.schema_errors[0]
    double.schema_errors.clear()


# ---------------------------------------------------------------- responses, pagination, auth


def test_pull_request_repository_and_issue_responses_match_their_models(double):
    repo = double.repos["o/r"]
    gh.FullRepository.model_validate(double._repo_json(repo))
    gh.Repository.model_validate(double._repo_json(repo))
    gh.PullRequest.model_validate(double._pull_json(repo, repo.pulls[1]))
    gh.PullRequestSimple.model_validate(double._pull_json(repo, repo.pulls[1], full=False))
    gh.Issue.model_validate(double._issue_json(repo, 1))


def test_every_answer_is_checked_against_its_model_over_http(double):
    import requests

    for path in (
        "/repos/o/r",
        "/repos/o/r/pulls?state=all",
        "/repos/o/r/pulls/1",
        "/repos/o/r/issues/1",
        "/repos/o/r/issues/1/comments",
        "/repos/o/r/contents/README.md",
    ):
        assert requests.get(double.base_url + path, timeout=5).status_code == 200, path
    assert double.schema_errors == []
    # A shape the REST description does not allow is a defect of the double, and it shows.
    double.repos["o/r"].pulls[1]["state"] = None
    assert requests.get(double.base_url + "/repos/o/r/pulls/1", timeout=5).status_code == 500
    assert double.schema_errors and "response to GET /repos/o/r/pulls/1" in double.schema_errors[0]
    double.schema_errors.clear()


def test_lists_are_paginated_with_link_headers(double):
    import requests

    repo = double.repos["o/r"]
    for i in range(40):
        repo.comments[1000 + i] = {"issue": 1, "body": f"c{i}", "user": "someone"}
    r = requests.get(double.base_url + "/repos/o/r/issues/1/comments", timeout=5)
    assert len(r.json()) == 30 and 'rel="next"' in r.headers["Link"] and "page=2" in r.headers["Link"]
    r = requests.get(double.base_url + "/repos/o/r/issues/1/comments?per_page=100", timeout=5)
    assert len(r.json()) == 41 and "Link" not in r.headers
    last = requests.get(double.base_url + "/repos/o/r/issues/1/comments?page=2", timeout=5)
    assert len(last.json()) == 11 and 'rel="prev"' in last.headers["Link"]


def test_the_provider_follows_pages_to_find_its_comment(double):
    from bot.github.provider import GitHubProvider, RetryPolicy

    repo = double.repos["o/r"]
    for i in range(45):
        repo.comments[2000 + i] = {"issue": 1, "body": f"c{i}", "user": "someone"}
    repo.comments[3000] = {"issue": 1, "body": "<!-- m --> mine"}  # the bot's, on page 2
    provider = GitHubProvider("t", double.base_url, policy=RetryPolicy(sleep=lambda s: None))
    assert provider.find_comment("o/r", 1, "<!-- m -->") == 3000
    assert any(c.query.get("page") == ["2"] for c in double.calls)


def test_auth_like_github_401_for_a_bad_token_403_for_a_write_without_permission(double):
    from bot.errors import GitHubError
    from bot.github.provider import GitHubProvider, RetryPolicy

    double.grant("ghs_write", contents="write", pull_requests="write")
    double.grant("ghs_read", contents="read", pull_requests="read")
    double.grant("ghs_status", contents="read", statuses="write")

    def make(token):
        return GitHubProvider(token, double.base_url, policy=RetryPolicy(sleep=lambda s: None))

    with pytest.raises(GitHubError, match="401 Bad credentials"):
        make("ghs_wrong").repo_info("o/r")
    reader = make("ghs_read")
    assert reader.repo_info("o/r").default_branch == "main"  # reads are fine
    with pytest.raises(GitHubError, match="403 Resource not accessible by integration"):
        reader.add_comment("o/r", 1, "hello")
    sha = double.repos["o/r"].refs["heads/main"]
    make("ghs_status").set_status("o/r", sha, "success", "fine")  # statuses: write is enough
    assert double.statuses("o/r")[0]["state"] == "success"
    with pytest.raises(GitHubError, match="403"):
        make("ghs_status").add_comment("o/r", 1, "hello")
    make("ghs_write").add_comment("o/r", 1, "hello")
