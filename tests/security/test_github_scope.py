"""What the token can be used for (SECURITY.md S3, S6) without the engine.

- Every checkout in the shipped workflows drops its credentials (persist-credentials: false),
  so the token never sits in the .git/config of the checkout that the runner containers build
  from (hostile code reads .git/config: tests/fixtures/repos/hostile-env/probe.py).
- A whole publish against the REST double never calls a merge, review (approve) or workflow
  endpoint, and the provider has no method that could.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from doubles.github_api import GitHubDouble

from bot.github.provider import GitHubProvider, RetryPolicy
from bot.github.publish import publish_environment
from bot.outputs import generate_outputs
from bot.report import ReportData, render_pr_body

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
TEMPLATES = sorted((ROOT / "templates" / "workflows").glob("*.j2"))


def _steps(doc):
    for job in (doc.get("jobs") or {}).values():
        yield from job.get("steps") or []


@pytest.mark.parametrize("path", SHIPPED + TEMPLATES, ids=lambda p: p.name)
def test_every_checkout_drops_its_credentials(path):
    text = path.read_text()
    if path.suffix == ".j2":
        text = text.replace("{{", "x").replace("}}", "x").replace("{%", "#").replace("%}", "#")
    doc = yaml.safe_load(text) or {}
    checkouts = [s for s in _steps(doc) if str(s.get("uses", "")).startswith("actions/checkout")]
    for step in checkouts:
        assert (step.get("with") or {}).get("persist-credentials") is False, f"{path.name}: {step}"


def test_the_provider_cannot_merge_or_approve():
    names = {n.lower() for n in dir(GitHubProvider)}
    assert not [n for n in names if "merge" in n or "approve" in n or "review" in n]


def test_a_publish_never_calls_merge_review_or_workflow_endpoints():
    with GitHubDouble() as double:
        double.add_repo("octo/app", {"README.md": "# app\n"})
        provider = GitHubProvider("ghs_scope", double.base_url, policy=RetryPolicy(sleep=lambda s: None))
        report = ReportData(repository="octo/app", verdict="Full", replay_ok=True)
        generated = generate_outputs(report, dockerfile_text="FROM python:3.11-slim\n", plan_json={"nodes": []})
        for _ in range(2):
            publish_environment(
                provider,
                "octo/app",
                base="main",
                files=generated.files,
                fingerprint=generated.fingerprint,
                title="env",
                body=render_pr_body(generated.report, generated.fingerprint),
            )
        calls = [c.path for c in double.calls]
        writes = [c.path for c in double.write_calls()]
    assert writes, "the publish made no write call"
    for path in calls:
        assert "/merge" not in path and "/reviews" not in path and "/actions/" not in path, path
    for path in writes:
        assert ".github/workflows" not in path, path
