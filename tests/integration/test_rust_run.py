"""`setupbot run` on a Rust-led repository, on the real engine: the Rust setup loop builds the
crate, runs its tests with no network, replays from scratch and writes the Dockerfile, the
devcontainer.json and the report; nothing of the run is left on the engine.

The rust:<ver>-slim stand-in comes from the same fixture as the other Rust engine tests
(test_rust_engine: built from the debian:trixie-slim stand-in when missing, then reused).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from engine_checks import run_leftovers
from test_rust_engine import _standins, engine  # noqa: F401  (the module's engine fixture)

ROOT = Path(__file__).resolve().parents[2]
REPOS = ROOT / "tests" / "fixtures" / "repos"

pytestmark = [pytest.mark.slow]


def _images_of(run_id: str) -> list[str]:
    out = subprocess.run(
        ["docker", "images", "-aq", "--filter", f"label=setupbot.run={run_id}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def _run(repo: Path, run_id: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETUPBOT_")}
    # the machine's engine settings (e.g. SETUPBOT_ENGINE_NETWORK_MODE on a host without docker0)
    env.update({k: v for k, v in os.environ.items() if k.startswith("SETUPBOT_ENGINE_")})
    # the local rust stand-ins only: a registry would offer (and pull) newer official images
    env.update(SETUPBOT_RUN_ID=run_id, PYTHONPATH=str(ROOT), SETUPBOT_IMAGES_SOURCE="standins")
    return subprocess.run(
        [sys.executable, "-m", "bot", "run", str(repo), "--json", "-"],
        capture_output=True,
        text=True,
        env=env,
        timeout=1500,
    )


@pytest.mark.timeout(1700)  # the run's own bound is 1500 s
def test_setupbot_run_sets_up_a_rust_crate_and_writes_the_three_files(engine, tmp_path):  # noqa: F811
    from bot.compile.devcontainer import parse_devcontainer
    from bot.engine.core import new_run_id

    _standins(engine, ["1.85"])
    repo = tmp_path / "rust-crate"
    shutil.copytree(REPOS / "rust-crate", repo)
    run_id = new_run_id()
    r = _run(repo, run_id)
    assert r.returncode == 0, r.stderr[-4000:]
    doc = json.loads(r.stdout)
    assert doc["status"] == "success" and doc["verdict"] == "Mostly" and doc["ecosystems"] == ["rust"]
    tests = doc["replay"]["tests"]
    assert (tests["total"], tests["passed"], tests["failed"], tests["skipped"]) == (5, 4, 0, 1)

    out = repo / ".devcontainer"
    dockerfile = (out / "Dockerfile").read_text()
    version = re.search(r"^FROM rust:(\d+\.\d+)-slim$", dockerfile, re.M).group(1)
    devcontainer = parse_devcontainer((out / "devcontainer.json").read_text())
    assert "rust-lang.rust-analyzer" in devcontainer["customizations"]["vscode"]["extensions"]
    report = (out / "setup-report.md").read_text()
    first_screen = report[: report.index("### Requirements")]
    assert "Verdict: **Mostly**" in first_screen
    assert f"**Rust {version}** on `rust:{version}-slim`" in first_screen
    assert "4 tests passed, 0 failed, 1 skipped" in first_screen and "no network" in first_screen
    assert "built from scratch (--no-cache)" in first_screen and "mutation check" in first_screen

    replays = [json.loads(line) for line in (repo / ".setupbot" / "trajectory.jsonl").read_text().splitlines()]
    assert any(s["action"] == "replay" and "--no-cache" in s["command"] for s in replays)
    assert run_leftovers(SimpleNamespace(run_id=run_id, _egress_net=None)) == [], "containers or networks left"
    assert _images_of(run_id) == [], "the run left images behind"


def _loop_on(engine, tmp_path: Path, fixture: str):  # noqa: F811
    """The Rust setup loop on a copy of ``fixture`` with the 1.85 stand-in: (outcome, record,
    the trajectory's steps as (action, outcome, command))."""
    from bot.config import load_settings
    from bot.ecosystems.rust import setup as rust_setup

    _standins(engine, ["1.85"])
    repo = tmp_path / fixture
    shutil.copytree(REPOS / fixture, repo)
    settings = load_settings(repo, environ={}, overrides={"images": {"source": "standins"}})
    out = rust_setup.run_rust_setup(repo, settings, engine, available=["1.85"])
    rec = out.run_record
    return out, rec, [(s.action, s.outcome, " ".join(s.command)) for s in rec.trajectory.steps]


@pytest.mark.extended
@pytest.mark.timeout(1700)
def test_a_sys_crate_whose_plan_lacks_its_library_is_repaired_from_the_build_log(
    engine,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    """The plan's -dev packages taken out: the build script's failure is diagnosed, the
    repair (libssl-dev and pkg-config) kept, and the replay from scratch links OpenSSL."""
    from bot.ecosystems.rust import setup as rust_setup

    planned = rust_setup.make_plan

    def without_system_packages(path, offered):
        plan = planned(path, offered)
        for node_id in [n for n in plan.graph.nodes if n.startswith("systemlib:")]:
            plan.graph.remove(node_id)
        return plan

    monkeypatch.setattr(rust_setup, "make_plan", without_system_packages)
    out, rec, steps = _loop_on(engine, tmp_path, "rust-sys")
    assert rec.status == "success", (rec.remaining, steps)
    assert [r.candidate.describe() for r in rec.repairs] == ["apt_install libssl-dev pkg-config"], steps
    assert "openssl-sys" in rec.repairs[0].log_excerpt
    assert rec.replay["tests"]["passed"] == 1 and "libssl-dev" in rec.dockerfile
    assert out.verification.verdict["tier"] == "Mostly"


def test_a_build_script_that_runs_rustfmt_gets_the_component_from_the_build_log(engine, tmp_path):  # noqa: F811
    """The build script formats generated code with rustfmt, which the stand-in's toolchain
    lacks: the failure is diagnosed, the component added (Debian's package on a stand-in), and
    the replay from scratch compiles the formatted code and passes its test."""
    _, rec, steps = _loop_on(engine, tmp_path, "rust-rustfmt")
    assert rec.status == "success", (rec.remaining, steps)
    assert [r.candidate.describe() for r in rec.repairs] == ["add the rustfmt component to the toolchain"], steps
    assert "error running rustfmt" in rec.repairs[0].log_excerpt
    assert rec.replay["tests"]["passed"] == 1 and "rustup component add rustfmt" in rec.dockerfile


@pytest.mark.timeout(1700)
def test_setupbot_github_publishes_a_rust_crate_and_the_merged_environment_stays(
    engine,  # noqa: F811
    tmp_path,
    monkeypatch,
    capsys,
):
    """`setupbot github` with the real pipeline against the REST double, on a Rust-led
    repository: a push opens the pull request with the Rust environment, the maintainer merges
    it, and the next push changes nothing (no write call, byte-identical files)."""
    from doubles.git import git
    from doubles.github_api import GitHubDouble

    from bot.cli import main

    _standins(engine, ["1.85"])
    monkeypatch.setenv("SETUPBOT_IMAGES_SOURCE", "standins")  # the local rust stand-ins only
    checkout = tmp_path / "checkout"
    shutil.copytree(REPOS / "rust-crate", checkout)
    git(checkout, "init", "-q", "-b", "main")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-q", "-m", "initial")
    source = {
        str(p.relative_to(checkout)): p.read_text()
        for p in checkout.rglob("*")
        if p.is_file() and ".git" not in p.parts
    }
    events = ROOT / "tests" / "fixtures" / "events"
    with GitHubDouble() as double:
        double.add_repo("octo/app", source)
        double.grant("ghs_rust_pipeline", contents="write", pull_requests="write")
        monkeypatch.setenv("GITHUB_TOKEN", "ghs_rust_pipeline")
        monkeypatch.setenv("SETUPBOT_GITHUB_API_URL", double.base_url)
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
        monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "output.txt"))
        argv = ["github", "--event-name", "push", "--event-path", str(events / "push.json"), "--repo", str(checkout)]

        assert main(argv) == 0, capsys.readouterr().out[-3000:]
        pulls = double.pulls("octo/app")
        assert len(pulls) == 1, pulls
        on_main = double.repos["octo/app"].files_at("main")
        proposed = {
            p: b.decode() for p, b in double.repos["octo/app"].files_at("setupbot/main").items() if on_main.get(p) != b
        }
        assert {".devcontainer/Dockerfile", ".devcontainer/devcontainer.json", ".devcontainer/setup-report.md"} <= set(
            proposed
        ), sorted(proposed)
        # the newest stand-in in the store that meets rust-version 1.70: 1.85, or 1.96 when an
        # earlier test on this engine bootstrapped it
        assert re.search(r"^FROM rust:1\.(85|96)-slim$", proposed[".devcontainer/Dockerfile"], re.M), proposed[
            ".devcontainer/Dockerfile"
        ][:600]
        assert "rust-lang.rust-analyzer" in proposed[".devcontainer/devcontainer.json"]
        assert "Verdict: **Mostly**" in proposed[".devcontainer/setup-report.md"]
        assert "pr-operation=created" in (tmp_path / "output.txt").read_text().splitlines()

        # the maintainer merges; the action's next checkout of main has the files
        double.push("octo/app", "main", proposed, "Merge pull request #1")
        double.close_pull("octo/app", 1, merged=True)
        git(checkout, "clean", "-q", "-fdx")
        for rel, text in proposed.items():
            (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
            (checkout / rel).write_text(text)
        git(checkout, "add", "-A")
        git(checkout, "commit", "-q", "-m", "Merge pull request #1")
        writes = len(double.write_calls())

        assert main(argv) == 0, capsys.readouterr().out[-3000:]
        assert len(double.write_calls()) == writes, "the merged environment came back"
        assert len(double.pulls("octo/app")) == 1
        assert "environment inputs unchanged since" in (tmp_path / "summary.md").read_text()
        assert {rel: (checkout / rel).read_text() for rel in proposed} == proposed
        assert double.schema_errors == []


@pytest.mark.timeout(1700)
def test_a_rust_crate_whose_tests_need_redis_runs_them_beside_the_service(engine, tmp_path):  # noqa: F811
    """The compose file names redis: the Rust loop starts it from the catalogue on a private
    network, the test reaches it through REDIS_URL and passes, in the replay too, and the outputs
    carry the compose file that extends the repository's own."""
    from bot.engine.core import new_run_id

    _standins(engine, ["1.85"])
    repo = tmp_path / "rust-redis"
    shutil.copytree(REPOS / "rust-redis", repo)
    run_id = new_run_id()
    r = _run(repo, run_id)
    assert r.returncode == 0, r.stderr[-4000:]
    doc = json.loads(r.stdout)
    assert doc["status"] == "success" and doc["ecosystems"] == ["rust"]
    tests = doc["replay"]["tests"]
    assert (tests["passed"], tests["failed"]) == (2, 0), tests  # the unit test and the one that pings redis
    out = repo / ".devcontainer"
    report = (out / "setup-report.md").read_text()
    assert "on a private network with only redis" in report
    assert (out / "compose.yaml").is_file()
    assert run_leftovers(SimpleNamespace(run_id=run_id, _egress_net=None)) == [], "containers or networks left"
