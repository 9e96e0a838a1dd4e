"""The REST double answers in GitHub's documented shapes (githubkit's response models), and
rejects request bodies the published schema rejects."""

from __future__ import annotations

import pydantic
import pytest
from githubkit_schemas.latest import models as gh

from doubles.github_api import GitHubDouble, SchemaViolation, validate_body


@pytest.fixture
def double():
    with GitHubDouble() as d:
        repo = d.add_repo("o/r", {"README.md": "# r\n"})
        repo.pulls[1] = {"id": 5, "number": 1, "state": "open", "title": "t", "body": "b", "head": "main",
                         "base": "main", "merged": False, "merged_at": None, "maintainer_can_modify": False}
        repo.comments[3] = {"issue": 1, "body": "x"}
        yield d


@pytest.mark.parametrize("model,method,path,body", [
    (gh.GitRef, "GET", "/repos/o/r/git/ref/heads/main", None),
    (gh.GitTree, "POST", "/repos/o/r/git/trees", {"tree": [{"path": "a", "mode": "100644", "type": "blob",
                                                           "content": "x"}]}),
    (gh.ShortBlob, "POST", "/repos/o/r/git/blobs", {"content": "x", "encoding": "utf-8"}),
    (gh.ContentFile, "GET", "/repos/o/r/contents/README.md", None),
    (gh.IssueComment, "GET", "/repos/o/r/issues/comments/3", None),
])
def test_responses_match_the_rest_description(double, model, method, path, body):
    status, payload = double.handle(method, path, {}, body)
    assert status in (200, 201)
    model.model_validate(payload)


def test_commit_response_matches(double):
    repo = double.repos["o/r"]
    gh.GitCommit.model_validate(double._commit_json(repo, repo.refs["heads/main"]))


@pytest.mark.parametrize("method,path,body,match", [
    ("POST", "/repos/o/r/pulls", {"title": "t"}, "head"),                          # head is required
    ("POST", "/repos/o/r/pulls", {"head": "a", "base": "main", "merge": True}, "unknown field"),
    ("POST", "/repos/o/r/git/trees", {"tree": [{"path": "a", "mode": "777", "type": "blob"}]}, "tree"),
    ("PATCH", "/repos/o/r/git/refs/heads/main", {"force": True}, "sha"),
    ("PUT", "/repos/o/r/pulls/1/merge", {}, "no such write endpoint"),
])
def test_bad_request_bodies_are_rejected(method, path, body, match):
    with pytest.raises(SchemaViolation, match=match):
        validate_body(method, path, body)


def test_a_rejected_body_is_recorded_and_answered_422(double):
    import requests

    r = requests.post(f"{double.base_url}/repos/o/r/pulls", json={"title": "no head"}, timeout=5)
    assert r.status_code == 422
    assert double.schema_errors and "head" in double.schema_errors[0]
    double.schema_errors.clear()
