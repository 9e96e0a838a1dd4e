"""The one idempotent pull request, against the REST double over real HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest
from doubles.github_api import GitHubDouble

from bot.errors import GitHubError
from bot.github.provider import GitHubProvider, RetryPolicy
from bot.github.publish import publish_environment
from bot.outputs import generate_outputs
from bot.report import ReportData
from bot.report.render import render_pr_body

REPO = "octo/app"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0
        self.sleeps: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def double(clock: FakeClock):
    with GitHubDouble(clock=clock.time) as d:
        d.add_repo(REPO, {"README.md": "# app\n", "pyproject.toml": "[project]\nname='app'\n"})
        yield d
    assert d.schema_errors == [], "setupbot sent a request body the GitHub schema rejects"


@pytest.fixture
def provider(double: GitHubDouble, clock: FakeClock) -> GitHubProvider:
    return GitHubProvider(
        "ghs_test", double.base_url, policy=RetryPolicy(sleep=clock.sleep, clock=clock.time, base_delay=0.5)
    )


def outputs(dockerfile: str = "FROM python:3.11-slim\nRUN pip install requests\n", verdict: str = "Full"):
    report = ReportData(repository=REPO, verdict=verdict, replay_ok=True, test_command=["python", "-m", "pytest"])
    return generate_outputs(report, dockerfile_text=dockerfile, plan_json={"nodes": []})


def publish(provider, generated, base="main", title="Add a proven development environment"):
    return publish_environment(
        provider,
        REPO,
        base=base,
        files=generated.files,
        fingerprint=generated.fingerprint,
        title=title,
        body=render_pr_body(generated.report, generated.fingerprint),
        labels=["setupbot", "environment"],
    )


def test_first_run_opens_one_pr_with_the_files_on_the_bot_branch(double, provider):
    generated = outputs()
    result = publish(provider, generated)
    assert result.action == "created" and result.number == 1
    prs = double.pulls(REPO)
    assert len(prs) == 1 and prs[0]["head"] == "setupbot/main" and prs[0]["base"] == "main"
    files = double.repos[REPO].files_at("setupbot/main")
    assert files[".devcontainer/Dockerfile"].decode() == generated.files[".devcontainer/Dockerfile"]
    assert "README.md" in files  # built on the base tree, nothing dropped
    assert double.repos[REPO].labels[1] == ["setupbot", "environment"]
    assert prs[0]["maintainer_can_modify"] is False
    # commits went through the Git Data API only
    writes = [(c.method, c.path.split("/repos/octo/app")[1]) for c in double.write_calls()]
    assert ("POST", "/git/commits") in writes and ("POST", "/git/refs") in writes
    assert not any("merge" in p or "reviews" in p for _, p in writes)


def test_second_run_with_no_change_makes_no_write_call(double, provider):
    publish(provider, outputs())
    before = len(double.write_calls())
    again = outputs()  # a new run: new timings in the report, same environment
    result = publish(provider, again)
    assert result.action == "unchanged"
    assert len(double.write_calls()) == before


def test_a_change_updates_the_same_pr(double, provider):
    first = publish(provider, outputs())
    changed = outputs("FROM python:3.11-slim\nRUN pip install requests httpx\n")
    result = publish(provider, changed)
    assert result.action == "updated" and result.number == first.number
    assert len(double.pulls(REPO)) == 1
    assert "httpx" in double.repos[REPO].files_at("setupbot/main")[".devcontainer/Dockerfile"].decode()
    assert changed.fingerprint in double.pulls(REPO)[0]["body"]


def test_create_that_fails_with_502_after_succeeding_still_ends_with_one_pr(double, provider):
    double.inject("POST", r"/pulls$", 502, after=True, message="Server Error")
    result = publish(provider, outputs())
    assert len(double.pulls(REPO)) == 1
    assert result.number == double.pulls(REPO)[0]["number"]
    assert [c.status for c in double.calls if c.method == "POST" and c.path.endswith("/pulls")] == [502]


def test_create_whose_connection_drops_after_succeeding_still_ends_with_one_pr(double, provider):
    double.inject("POST", r"/pulls$", 0, after=True, drop=True)
    double.inject("POST", r"/git/refs$", 0, after=True, drop=True)
    result = publish(provider, outputs())
    assert result.action == "created"
    assert len(double.pulls(REPO)) == 1 and result.number == double.pulls(REPO)[0]["number"]
    assert [c.status for c in double.calls if c.method == "POST" and c.path.endswith("/pulls")] == [-1]


def test_ref_create_that_fails_after_succeeding_is_reconciled(double, provider):
    double.inject("POST", r"/git/refs$", 502, after=True)
    result = publish(provider, outputs())
    assert result.action == "created" and len(double.pulls(REPO)) == 1


def test_primary_rate_limit_is_waited_out(double, provider, clock):
    reset = int(clock.now) + 30
    double.inject(
        "GET",
        r"/pulls$",
        403,
        {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
        message="API rate limit exceeded for installation ID 1.",
    )
    result = publish(provider, outputs())
    assert result.action == "created"
    assert clock.sleeps and 30 <= clock.sleeps[0] <= 32


def test_secondary_rate_limit_honours_retry_after(double, provider, clock):
    double.inject(
        "POST", r"/git/blobs$", 403, {"retry-after": "7"}, message="You have exceeded a secondary rate limit."
    )
    publish(provider, outputs())
    assert 7.0 in clock.sleeps
    assert len(double.pulls(REPO)) == 1


def test_rate_limit_longer_than_the_cap_fails_with_a_clear_error(double, clock):
    provider = GitHubProvider(
        "t", double.base_url, policy=RetryPolicy(sleep=clock.sleep, clock=clock.time, max_wait=60)
    )
    double.inject(
        "GET", r"/repos/octo/app$", 403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(clock.now) + 3600)}
    )
    with pytest.raises(GitHubError, match="rate limited"):
        publish(provider, outputs())
    assert clock.sleeps == []


def test_server_errors_retry_with_bounded_backoff(double, provider, clock):
    double.inject("GET", r"/pulls$", 503, times=2)
    publish(provider, outputs())
    assert clock.sleeps[:2] == [0.5, 1.0]


def test_persistent_5xx_gives_up(double, clock):
    provider = GitHubProvider(
        "t", double.base_url, policy=RetryPolicy(sleep=clock.sleep, clock=clock.time, max_attempts=3)
    )
    double.inject("GET", r"/repos/octo/app$", 500, times=10)
    with pytest.raises(GitHubError, match="500"):
        publish(provider, outputs())
    assert len(clock.sleeps) == 2


def test_pr_closed_without_merge_is_not_reopened_until_inputs_change(double, provider):
    first = publish(provider, outputs())
    double.close_pull(REPO, first.number, merged=False)
    writes = len(double.write_calls())
    assert publish(provider, outputs()).action == "declined"
    assert len(double.write_calls()) == writes
    result = publish(provider, outputs("FROM python:3.13-slim\n"))
    assert result.action == "created" and result.number != first.number
    assert len(double.pulls(REPO, "open")) == 1


def test_branch_pushed_but_pr_missing_is_reconciled(double, provider):
    double.inject("POST", r"/pulls$", 422, message="Validation Failed")
    with pytest.raises(GitHubError):
        publish(provider, outputs())
    assert "heads/setupbot/main" in double.repos[REPO].refs and double.pulls(REPO) == []
    result = publish(provider, outputs())
    assert result.action == "created" and len(double.pulls(REPO)) == 1


def test_refuses_workflow_paths_and_foreign_branches(double, provider):
    generated = outputs()
    generated.files[".github/workflows/ci.yml"] = "on: push\n"
    with pytest.raises(GitHubError, match="workflows"):
        publish(provider, generated)
    with pytest.raises(GitHubError, match="bot prefix"):
        provider.set_branch(REPO, "main", "0" * 40)
    with pytest.raises(GitHubError, match="bot prefix"):
        provider.create_pull(REPO, "main", "feature", "t", "b")
    assert double.write_calls() == []


def test_hand_written_files_on_the_base_branch_are_not_replaced(double, provider):
    double.push(REPO, "main", {".devcontainer/Dockerfile": "FROM my-own-image\n"})
    generated = generate_outputs(
        ReportData(repository=REPO),
        dockerfile_text="FROM python:3.11-slim\n",
        existing=lambda p: provider.read_file(REPO, p, "main"),
    )
    assert ".devcontainer/Dockerfile" not in generated.files
    assert "-FROM my-own-image" in generated.kept[".devcontainer/Dockerfile"]
    publish(provider, generated)
    files = double.repos[REPO].files_at("setupbot/main")
    assert files[".devcontainer/Dockerfile"] == b"FROM my-own-image\n"
    assert "FROM my-own-image" in files[".devcontainer/setup-report.md"].decode()


def test_hostile_branch_and_title_travel_as_data(tmp_path, clock):
    """S2: a branch named like a shell payload and a title with a command substitution create no file."""
    canary = tmp_path / "pwned"
    spec_canary = Path("/tmp/pwned")
    existed = spec_canary.exists()
    for branch, title in [
        ('zzz";echo${IFS}pwned;#', "$(touch /tmp/pwned)"),
        (f'zzz";touch${{IFS}}{canary};#', f"$(touch {canary}) `touch {canary}`"),
    ]:
        with GitHubDouble(clock=clock.time) as d:
            d.add_repo(REPO, default_branch=branch)
            provider = GitHubProvider("t", d.base_url, policy=RetryPolicy(sleep=clock.sleep, clock=clock.time))
            result = publish(provider, outputs(), base=branch, title=title)
            assert result.action == "created"
            assert d.pulls(REPO)[0]["title"] == title
            assert d.pulls(REPO)[0]["head"] == "setupbot/" + branch
            assert d.repos[REPO].refs["heads/setupbot/" + branch]
            assert d.schema_errors == []
    assert not canary.exists()
    assert spec_canary.exists() == existed


@pytest.mark.parametrize(
    "path",
    [
        ".github/workflows/ci.yml",
        "./.github/workflows/ci.yml",
        ".github//workflows/x.yml",
        ".GitHub/Workflows/x.yml",
        "a/../.github/workflows/x.yml",
        "/etc/passwd",
        "../outside",
    ],
)
def test_paths_the_environment_pr_refuses(path):
    from bot.github.provider import check_paths

    with pytest.raises(GitHubError):
        check_paths([path], allow_workflows=False)


@pytest.mark.parametrize(
    "branch", ["main", "setupbot/", "other/setupbot/main", "setupbot/a..b", "setupbot/a b", "setupbot/x.lock"]
)
def test_branches_the_provider_refuses(branch):
    from bot.github.provider import check_branch

    with pytest.raises(GitHubError):
        check_branch(branch, "setupbot/")


def test_rate_limit_wait_reads_both_kinds_of_limit():
    from bot.github.provider import rate_limit_wait

    assert rate_limit_wait(403, {"Retry-After": "12"}, lambda: 0) == 12
    assert rate_limit_wait(403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "100"}, lambda: 40) == 61
    assert rate_limit_wait(429, {}, lambda: 0) == 60
    assert rate_limit_wait(403, {"x-ratelimit-remaining": "10"}, lambda: 0) is None  # a permission 403
    assert rate_limit_wait(502, {"retry-after": "1"}, lambda: 0) is None


def test_a_new_stage_timeline_alone_is_no_reason_for_a_pull_request(double, provider):
    """The timeline SVG changes with every run; it travels with the environment but never makes
    an update, or a pull request, of its own (issue 20, item 7)."""

    def with_timeline(seconds: float):
        report = ReportData(repository=REPO, verdict="Full", replay_ok=True, test_command=["python", "-m", "pytest"])
        return generate_outputs(
            report,
            dockerfile_text="FROM python:3.11-slim\n",
            plan_json={"nodes": []},
            timeline_steps=[{"action": "build", "duration": seconds, "at": 100.0 + seconds, "outcome": "ok"}],
        )

    first = with_timeline(10.0)
    svg = ".devcontainer/setup-timeline.svg"
    assert publish(provider, first).action == "created"
    assert double.repos[REPO].files_at("setupbot/main")[svg].decode() == first.files[svg]
    before = len(double.write_calls())
    slower = with_timeline(20.0)
    assert slower.files[svg] != first.files[svg]
    assert (
        publish_environment(
            provider,
            REPO,
            base="main",
            files=slower.files,
            fingerprint=slower.fingerprint,
            title="Add a proven development environment",
            body=render_pr_body(slower.report, slower.fingerprint),
            volatile=slower.volatile,
        ).action
        == "unchanged"
    )
    assert len(double.write_calls()) == before
    # once merged, a later run whose only difference is its timeline proposes nothing
    double.push(REPO, "main", first.files)
    later = with_timeline(30.0)
    result = publish_environment(
        provider,
        REPO,
        base="main",
        files=later.files,
        fingerprint=later.fingerprint,
        title="Add a proven development environment",
        body=render_pr_body(later.report, later.fingerprint),
        volatile=later.volatile,
    )
    assert result.action == "closed"  # main already has the environment: the open PR is closed
    # without the volatile list the same files would have counted as a change
    assert (
        publish_environment(
            provider, REPO, base="main", files=later.files, fingerprint=later.fingerprint, title="t", body="b"
        ).action
        != "none"
    )
