"""Rust in the benchmark, with an engine double: the lead ecosystem picks what each system does
(setupbot runs the Rust setup loop, declared is the naive Rust template, pipreqs is skipped),
scoring is `cargo test --no-run` plus libtest counts, and the summary keeps Rust apart from the
Python figures."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from doubles.git import git as _git

from bot.bench import results as results_io
from bot.bench.baselines import produce_declared_rust
from bot.bench.repos import BenchRepo
from bot.bench.runner import BenchOptions, export_ecosystem, export_ecosystems, run_bench
from bot.bench.score import Score, cargo_cause, run_cargo_tests_in_image, score_dockerfile
from bot.bench.summary import ecosystem_of, render_summary, section_of, write_report
from bot.config import load_settings
from bot.engine.results import BuildResult, ExecResult

ROOT = Path(__file__).resolve().parents[2]
RUST_CRATE = ROOT / "tests" / "fixtures" / "repos" / "rust-crate"
PASS_LOG = (ROOT / "tests" / "fixtures" / "rust-logs" / "cargo-test-pass.log").read_text()
COMPILE_ERROR = (
    "   Compiling rust-crate v0.1.0 (/workspace)\n"
    "error[E0425]: cannot find value `x` in this scope\n"
    " --> tests/api.rs:3:5\n"
    'error: could not compile `rust-crate` (test "api") due to 1 previous error\n'
)


def _cargo_container(script: str, ebsr_exit: int, test_output: str = PASS_LOG) -> tuple[int, str]:
    """What the one scoring container prints for ``script`` (bot.bench.score.cargo_score_script):
    the build's output, the marker line with its status, then the tests' output."""
    nonce = re.search(r"setupbot-([0-9a-f]+) ", script).group(1)
    if ebsr_exit:
        return ebsr_exit, f"{COMPILE_ERROR}setupbot-{nonce} {ebsr_exit} 3\n"
    return 0, f"   Compiling rust-crate v0.1.0\nsetupbot-{nonce} 0 3\n{test_output}"


class RustEngine:
    """Builds succeed; `cargo test --no-run` exits ``ebsr_exit``; the tests print PASS_LOG.
    Offers rust:1.85-slim and rust:1.96-slim. Records builds and one-off runs."""

    instances: list[RustEngine] = []

    def __init__(self, settings=None, ebsr_exit: int = 0):
        self.run_id = f"rustbench{len(RustEngine.instances)}"
        self.ebsr_exit = ebsr_exit
        self.builds: list[dict] = []
        self.runs: list[dict] = []
        self.cleaned = False
        RustEngine.instances.append(self)

    def image_tags(self, repository):
        return ["rust:1.85-slim", "rust:1.96-slim"] if repository == "rust" else []

    def build(self, context, text, tag, no_cache=False, timeout=None, log_path=None, **kw):
        self.builds.append({"tag": tag, "text": text, "no_cache": no_cache, "context": Path(context)})
        return BuildResult(True, tag, "Successfully built", 20.0)

    def run_once(self, image, argv, *, timeout=300, env=None, network="none"):
        self.runs.append({"image": image, "argv": list(argv), "network": network})
        if not re.search(r"setupbot-[0-9a-f]+ ", argv[-1]):  # the Rust loop's own test run
            return ExecResult(list(argv), 0, PASS_LOG, 1.0)
        return ExecResult(list(argv), *_cargo_container(argv[-1], self.ebsr_exit), 4.0)

    def image_size(self, tag):
        return 456_000_000

    def clean(self, run_id=None):
        self.cleaned = True
        return {"images": 1}


@pytest.fixture(autouse=True)
def _reset():
    RustEngine.instances.clear()


@pytest.fixture
def rust_mirror(tmp_path) -> tuple[Path, BenchRepo]:
    """The rust-crate fixture as a bare repository in the mirror layout."""
    work = tmp_path / "work"
    shutil.copytree(RUST_CRATE, work)
    _git(work, "init", "-q")
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "c")
    root = tmp_path / "mirror"
    (root / "acme+crate").mkdir(parents=True)
    _git(tmp_path, "clone", "-q", "--bare", str(work), str(root / "acme+crate" / "repo"))
    return root, BenchRepo(name="acme/crate", sha=_git(work, "rev-parse", "HEAD"), difficulty="easy")


def _options(root, repo, out, systems, **kw) -> BenchOptions:
    settings = load_settings(root, environ={}, overrides={"images": {"source": "standins"}})
    return BenchOptions(
        repos=[repo],
        systems=systems,
        out=out,
        git_root=root,
        settings=settings,
        engine_factory=kw.pop("engine_factory", RustEngine),
        **kw,
    )


# ------------------------------------------------------------------ the runner


def test_a_maturin_package_is_python_led_with_rust_beside_it():
    assert export_ecosystems(RUST_CRATE.parent / "rust-maturin") == ["python", "rust"]
    assert export_ecosystems(RUST_CRATE) == ["rust"]


def test_the_lead_ecosystem_of_an_export_decides(tmp_path):
    assert export_ecosystem(RUST_CRATE) == "rust"
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert export_ecosystem(tmp_path) == "python"
    assert export_ecosystem(tmp_path / "missing") == "python"  # nothing recognised: the Python systems


def test_setupbot_runs_the_rust_loop_and_its_replay_image_is_scored(rust_mirror, tmp_path):
    root, repo = rust_mirror
    (record,) = run_bench(_options(root, repo, tmp_path / "out", ("setupbot",)))
    assert record["ecosystem"] == "rust" and record["status"] == "ok", record.get("reason")
    assert record["details"]["loop_status"] == "success" and record["details"]["verdict"]
    assert record["replay_reused"] is True and record["ebsr"] is True
    assert record["tests"] == {"passed": 4, "failed": 0, "errors": 0, "skipped": 1, "total": 5}
    assert record["counts_from"] == "libtest" and record["image_bytes"] == 456_000_000
    assert record["status"] == "ok" and record["pass_share"] == 1.0
    engine = RustEngine.instances[0]
    # the loop's clean replay is the only no-cache build: the benchmark did not build it again
    assert [b["no_cache"] for b in engine.builds] == [False, True]
    replay_tag = engine.builds[-1]["tag"]
    scored = [r for r in engine.runs if r["image"] == replay_tag][-1:]
    # one container builds the tests, then runs them (a second one compiled them again)
    assert "cargo test --no-run" in scored[0]["argv"][-1] and "cargo test --no-fail-fast" in scored[0]["argv"][-1]
    assert all(r["network"] == "none" for r in engine.runs)
    assert "FROM rust:1.96-slim" in engine.builds[0]["text"]  # the Rust loop's own Dockerfile
    assert engine.cleaned


def test_declared_is_the_naive_rust_template_on_the_newest_image(rust_mirror, tmp_path):
    root, repo = rust_mirror
    out = tmp_path / "out"
    (record,) = run_bench(_options(root, repo, out, ("declared",)))
    dockerfile = (out / "artifacts" / "acme+crate" / "declared" / "Dockerfile").read_text()
    assert "FROM rust:1.96-slim" in dockerfile and "COPY . /workspace" in dockerfile
    assert '["cargo", "fetch"]' in dockerfile and '["cargo", "test", "--no-run"]' in dockerfile
    assert 'CMD ["cargo", "test"]' in dockerfile and "pip" not in dockerfile
    engine = RustEngine.instances[0]
    assert engine.builds[0]["no_cache"] is True and not (engine.builds[0]["context"] / ".git").exists()
    assert record["ebsr"] and record["replay_reused"] is False and record["tests"]["passed"] == 4
    assert record["collect_exit"] == 0 and record["collected"] == 5


def test_tests_that_do_not_build_are_not_ebsr_and_are_not_run(rust_mirror, tmp_path):
    root, repo = rust_mirror

    def factory(settings):
        return RustEngine(settings, ebsr_exit=101)

    (record,) = run_bench(_options(root, repo, tmp_path / "out", ("declared",), engine_factory=factory))
    assert not record["ebsr"] and record["status"] == "tests-not-built"
    assert record["reason"] == "`cargo test --no-run` exited 101: error[E0425]: cannot find value `x` in this scope"
    assert len(RustEngine.instances[0].runs) == 1  # no test run after the binaries failed to build


def test_pipreqs_is_skipped_for_rust_with_its_reason(rust_mirror, tmp_path):
    root, repo = rust_mirror
    out = tmp_path / "out"
    (record,) = run_bench(_options(root, repo, out, ("pipreqs",)))
    assert record["status"] == "skipped" and record["ecosystem"] == "rust"
    assert "pipreqs infers Python requirements" in record["reason"] and "rust repository" in record["reason"]
    assert RustEngine.instances[0].builds == [] and RustEngine.instances[0].runs == []
    assert not (out / "artifacts" / "acme+crate" / "pipreqs").exists()
    assert run_bench(_options(root, repo, out, ("pipreqs",))) == []  # a skip is a result: not redone


def test_a_tree_that_could_not_be_exported_has_no_ecosystem(rust_mirror, tmp_path):
    root, _ = rust_mirror
    (record,) = run_bench(_options(root, BenchRepo(name="acme/gone", sha="c" * 40), tmp_path / "out", ("declared",)))
    assert record["status"] == "input-error" and record["ecosystem"] == "" and ecosystem_of(record) == ""


def test_no_rust_image_offered_means_no_declared_dockerfile():
    produced = produce_declared_rust([])
    assert not produced.ok and "setupbot images bootstrap --ecosystem rust" in produced.reason
    assert "FROM rust:1.85-slim" in produce_declared_rust(["1.85"]).dockerfile


# ------------------------------------------------------------------ scoring


def test_cargo_scoring_builds_the_tests_then_counts_them(tmp_path):
    engine = RustEngine()
    score = score_dockerfile(
        engine,
        tmp_path,
        "FROM rust:1.85-slim\n",
        "t:1",
        score_image=lambda e, tag, s: run_cargo_tests_in_image(e, tag, s, collect_timeout=60, test_timeout=90),
    )
    assert score.built and score.ebsr and score.counts_from == "libtest"
    assert (score.tests.passed, score.tests.failed, score.tests.skipped) == (4, 0, 1)
    assert len(engine.runs) == 1 and engine.runs[0]["argv"][:2] == ["sh", "-c"]
    assert score.collect_seconds == 3.0 and score.test_seconds == 1.0
    timed_out = RustEngine()
    timed_out.run_once = lambda image, argv, **kw: ExecResult(list(argv), 137, "", 60.0, timed_out=True)
    score = run_cargo_tests_in_image(timed_out, "t:2", Score(built=True), collect_timeout=60, test_timeout=90)
    assert not score.ebsr and score.collect_exit is None and score.reason == "`cargo test --no-run` timed out"


def test_cargo_scoring_keeps_each_phase_in_its_own_time_and_no_test_can_forge_the_marker():
    # the build stopped by its own timeout (coreutils' 124)
    slow_build = RustEngine()
    slow_build.run_once = lambda image, argv, **kw: ExecResult(
        list(argv), 124, "   Compiling big\n" + f"setupbot-{_nonce(argv)} 124 60\n", 61.0
    )
    score = run_cargo_tests_in_image(slow_build, "t:3", Score(built=True), collect_timeout=60, test_timeout=90)
    assert not score.ebsr and score.reason == "`cargo test --no-run` timed out" and score.collect_exit is None
    # the tests stopped by theirs: EBSR holds, the run is marked timed out
    slow_tests = RustEngine()
    slow_tests.run_once = lambda image, argv, **kw: ExecResult(
        list(argv), 124, f"setupbot-{_nonce(argv)} 0 5\nrunning 3 tests\ntest a ... ok\n", 95.0
    )
    score = run_cargo_tests_in_image(slow_tests, "t:4", Score(built=True), collect_timeout=60, test_timeout=90)
    assert score.ebsr and score.test_timed_out and score.reason == "test run stopped by the 90s timeout"
    # a test that prints a marker of its own does not pass for the build's report
    forged = RustEngine()
    forged.run_once = lambda image, argv, **kw: ExecResult(
        list(argv), 101, COMPILE_ERROR + "setupbot-0000000000000000 0 1\n", 3.0
    )
    score = run_cargo_tests_in_image(forged, "t:5", Score(built=True), collect_timeout=60, test_timeout=90)
    assert not score.ebsr and score.reason.startswith("`cargo test --no-run` exited 101: error[E0425]")


def _nonce(argv) -> str:
    return re.search(r"setupbot-([0-9a-f]+) ", argv[-1]).group(1)


def test_cargo_cause_is_the_first_error_line():
    assert cargo_cause(COMPILE_ERROR) == "error[E0425]: cannot find value `x` in this scope"
    assert cargo_cause("warning: x\nerror: failed to select a version for `foo`\n").startswith("error: failed")
    assert cargo_cause("just this\n") == "just this" and cargo_cause("") == ""


# ------------------------------------------------------------------ the summary


def _record(repo, system, ecosystem, ebsr, passed=0, status=None, **kw):
    record = {
        "repo": repo,
        "sha": "b" * 40,
        "system": system,
        "difficulty": "easy",
        "ebsr": ebsr,
        "tests": {"passed": passed, "failed": 0, "errors": 0, "skipped": 1, "total": passed + 1},
        "pass_share": 1.0 if passed else 0.0,
        "essr": None,
        "produce_seconds": 5.0,
        "build_seconds": 50.0,
        "image_bytes": 8e8,
        "status": status or ("ok" if ebsr else "build-failed"),
        "tokens": 0,
        "steps": 3,
        "repairs": 0,
        **kw,
    }
    if ecosystem is not None:
        record["ecosystem"] = ecosystem
    return record


MIXED = [
    _record("py/a", "setupbot", None, True, 3),  # from before records named the ecosystem
    _record("py/a", "declared", "python", False, reason="build failed: ERROR: pip"),
    _record("rs/itoa", "setupbot", "rust", True, 40),
    _record("rs/itoa", "declared", "rust", True, 38),
    _record("rs/itoa", "pipreqs", "rust", False, status="skipped", reason="pipreqs infers Python requirements"),
    _record("rs/fd", "setupbot", "rust", False, status="tests-not-built", reason="`cargo test --no-run` exited 101"),
    _record("rs/fd", "declared", "rust", False, reason="build failed: error: linker `cc` not found"),
    _record("gone/x", "setupbot", "", False, status="input-error", reason="no git directory for gone/x"),
]


def test_rust_rows_have_their_own_section_and_stay_out_of_the_python_figures():
    assert [ecosystem_of(r) for r in MIXED[:3]] == ["python", "python", "rust"]
    text = render_summary(MIXED, commands=["setupbot bench --repos x.tsv"])
    python, rust = text.split("## Rust repositories")
    # the tree that could not be exported counts as a Python failure: it never raises an EBSR
    assert "2 repositories × 2 systems (setupbot, declared)" in python
    assert "| setupbot | 2 | 1/2 (50.0%) |" in python and "rs/itoa" not in python
    assert "Targets for setupbot: EBSR 50.0%" in python
    assert "`cargo test --no-run`" in rust and "2 Rust repositories, not counted in the Python figures." in rust
    assert "| setupbot | 2 | 1/2 (50.0%) |" in rust and "| declared | 2 | 1/2 (50.0%) |" in rust
    assert "| pipreqs |" not in rust and "`pipreqs` skipped on 1 repository: pipreqs infers Python" in rust
    assert "| repository | difficulty | setupbot | declared |" in rust
    assert "| rs/itoa@bbbbbbbb | easy | ✓ 40 / 0 / 1, 50s, 800 MB | ✓ 38 / 0 / 1, 50s, 800 MB |" in rust
    assert "✗ tests-not-built: `cargo test --no-run` exited 101" in rust
    assert "## Not exported" in rust and "- gone/x@bbbbbbbb: no git directory for gone/x" in rust


def test_a_rust_only_run_has_no_python_figures_and_no_chart(tmp_path):
    rust_only = [r for r in MIXED if ecosystem_of(r) == "rust"]
    text = render_summary(rust_only)
    assert "## Per system" not in text and "Targets for setupbot" not in text and "chart.png" not in text
    summary, chart = write_report(rust_only, tmp_path / "SUMMARY.md", tmp_path / "chart.png")
    assert chart is None and not (tmp_path / "chart.png").exists()
    assert "## Rust repositories" in summary.read_text()


def test_records_round_trip_with_their_ecosystem(tmp_path):
    for record in MIXED:
        results_io.append_record(tmp_path, record)
    loaded = {(r["repo"], r["system"]): ecosystem_of(r) for r in results_io.load_records(tmp_path)}
    assert loaded[("rs/fd", "declared")] == "rust" and loaded[("py/a", "setupbot")] == "python"
    assert loaded[("gone/x", "setupbot")] == ""


def test_python_packages_that_build_rust_have_their_own_section_scored_the_python_way():
    pyrust = [
        _record("py/ext", "setupbot", "python", True, 12, ecosystems=["python", "rust"]),
        _record("py/ext", "declared", "python", False, ecosystems=["python", "rust"], reason="error: cargo not found"),
    ]
    records = MIXED + pyrust
    assert [section_of(r) for r in pyrust] == ["python+rust", "python+rust"]
    text = render_summary(records)
    python, rest = text.split("## Python packages that build Rust")
    # the Python figures are the Python repositories' alone
    assert "py/ext" not in python and "| setupbot | 2 | 1/2 (50.0%) |" in python
    section = rest.split("## Rust repositories")[0]
    assert "1 repository, not counted in the Python figures." in section
    assert "`python -m pytest --collect-only -q`" in section
    assert "| setupbot | 1 | 1/1 (100.0%) |" in section and "| declared | 1 | 0/1 (0.0%) |" in section
    assert "| py/ext@bbbbbbbb | easy | ✓ 12 / 0 / 1, 50s, 800 MB | ✗ build-failed: error: cargo not found |" in section


def test_setupbot_in_the_bench_plans_as_setupbot_run_does_with_rust_joined(tmp_path, monkeypatch):
    # a maturin project: the bench's setupbot plans through the ecosystem registry, as `setupbot
    # run` does, so the Rust toolchain joins the Python plan (the loop's default plan is
    # Python's alone, and maturin then fetched a toolchain of its own during the build)
    from bot.bench import systems
    from bot.bench.systems import SystemContext, run_setupbot

    repo = tmp_path / "ext"
    shutil.copytree(RUST_CRATE.parent / "rust-maturin", repo)
    seen = {}

    def fake_run_setup(repo_dir, settings, engine, store, llm=None, make_plan=None):
        seen["plan"] = make_plan(repo_dir, settings, ["3.13"])
        raise RuntimeError("planned")  # the loop itself is not the point here

    monkeypatch.setattr(systems, "run_setup", fake_run_setup)
    settings = load_settings(repo, environ={}, overrides={"images": {"source": "standins"}})
    ctx = SystemContext(repo_dir=repo, scratch=tmp_path / "s", engine=None, settings=settings)
    (tmp_path / "s").mkdir()
    with pytest.raises(RuntimeError, match="planned"):
        run_setupbot(ctx)
    graph = seen["plan"].graph
    assert {"systemlib:rustc-web", "systemlib:cargo-web"} <= set(graph.nodes)  # Cargo.lock format 4
    assert graph.meta["ecosystems"] == ["python", "rust"]
    assert "rustc-web" in seen["plan"].dockerfile.text
