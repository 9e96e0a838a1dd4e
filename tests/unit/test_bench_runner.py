"""Scoring, resumability, aggregation and the summary/chart, with an in-process engine double
that follows the Engine contract (docs/architecture.md) and records every call."""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from doubles.git import git as _git

from bot.bench import results as results_io
from bot.bench.repos import BenchRepo
from bot.bench.runner import BenchOptions, run_bench
from bot.bench.score import COLLECT_COMMAND, parse_junit_counts, parse_pytest_summary, score_dockerfile
from bot.bench.summary import aggregate, ebsr_by_difficulty, render_summary, write_report
from bot.bench.systems import replay_score_from_record

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="5">
<testcase classname="t" name="a"/><testcase classname="t" name="b"/>
<testcase classname="t" name="c"><failure message="boom">x</failure></testcase>
<testcase classname="t" name="d"><error message="fixture">y</error></testcase>
<testcase classname="t" name="e"><skipped message="no"/></testcase>
</testsuite></testsuites>"""


@dataclass
class Exec:
    argv: list
    exit_code: int
    output: str
    duration: float
    timed_out: bool = False


@dataclass
class Built:
    ok: bool
    tag: str
    log: str
    seconds: float


class FakeEngine:
    """Builds succeed unless the Dockerfile contains FAIL; collection fails when it contains
    NOCOLLECT; the test run writes JUNIT."""

    instances: list[FakeEngine] = []

    def __init__(self, settings=None):
        self.run_id = f"fake{len(FakeEngine.instances)}"
        self.builds: list[tuple[Path, str, str, bool]] = []
        self.execs: list[list[str]] = []
        self.cleaned = False
        self.text = ""
        self.pack_fails = False
        FakeEngine.instances.append(self)

    def build(self, context, text, tag, no_cache=False, log_path=None, timeout=None):
        self.builds.append((Path(context), text, tag, no_cache))
        self.text = text
        ok = "FAIL" not in text
        return Built(ok, tag, "Step 1/3\nERROR: No matching distribution found for nope\n" if not ok else "ok", 12.5)

    def image_size(self, tag):
        return 321_000_000

    @contextlib.contextmanager
    def session(self, image, env=None, workdir="/workspace", network=None, name_hint="runner"):
        engine = self

        class Session:
            def exec(self, argv, env=None, timeout=600, workdir=None, changes=True):
                engine.execs.append(list(argv))
                if argv == COLLECT_COMMAND:
                    if "NOCOLLECT" in engine.text:
                        return Exec(argv, 2, "ERROR collecting tests/test_a.py\nImportError", 1.0)
                    return Exec(argv, 0, "t::a\n5 tests collected in 0.1s", 1.0)
                if argv[:2] == ["python", "-c"]:  # the gzip+base64 transfer of the JUnit file
                    if engine.pack_fails:
                        return Exec(argv, 1, "python: not found", 0.1)
                    return Exec(argv, 0, base64.b64encode(gzip.compress(JUNIT.encode())).decode(), 0.1)
                if argv[:1] == ["cat"]:
                    return Exec(argv, 0, JUNIT, 0.1)
                return Exec(argv, 1, "== 1 failed, 2 passed, 1 error, 1 skipped in 3.0s ==", 3.0)

        yield Session()

    def clean(self, run_id=None):
        self.cleaned = True
        return {"images": 1}

    free = 500 * 2**30  # bytes free where the engine keeps images (every instance)
    pruned = 0

    def free_disk_bytes(self):
        return FakeEngine.free

    def prune_build_cache(self):
        FakeEngine.pruned += 1
        FakeEngine.free += 40 * 2**30
        return True


@pytest.fixture(autouse=True)
def _reset_fake():
    FakeEngine.instances.clear()
    FakeEngine.free, FakeEngine.pruned = 500 * 2**30, 0


def test_junit_counts_and_summary_line_fallback():
    counts = parse_junit_counts(JUNIT)
    assert (counts.passed, counts.failed, counts.errors, counts.skipped, counts.total) == (2, 1, 1, 1, 5)
    assert parse_junit_counts("<not xml") is None and parse_junit_counts("") is None
    line = parse_pytest_summary("....\n===== 3 failed, 10 passed, 2 skipped, 1 error in 4.2s =====\n")
    assert (line.passed, line.failed, line.errors, line.skipped) == (10, 3, 1, 2)
    assert parse_pytest_summary("[setupbot] killed after the 900s timeout") is None


def test_score_builds_without_cache_and_copies_the_junit_out(tmp_path):
    engine = FakeEngine()
    junit = tmp_path / "junit.xml"
    score = score_dockerfile(engine, tmp_path, "FROM python:3.11-slim\n", "t:1", junit_dest=junit)
    assert engine.builds[0][3] is True  # no cache
    assert score.ebsr and score.built and score.image_bytes == 321_000_000
    assert score.collected == 5 and score.counts_from == "junit"
    assert (score.tests.passed, score.tests.failed) == (2, 1)
    assert junit.read_text() == JUNIT
    assert engine.execs[1][:5] == ["python", "-m", "pytest", "-p", "no:cacheprovider"]
    assert engine.execs[2][-1] == "/tmp/setupbot-bench-junit.xml" and len(engine.execs) == 3


def test_junit_falls_back_to_cat_when_the_image_cannot_pack_it(tmp_path):
    engine = FakeEngine()
    engine.pack_fails = True
    score = score_dockerfile(engine, tmp_path, "FROM python:3.11-slim\n", "t:1")
    assert score.counts_from == "junit" and score.tests.passed == 2
    assert engine.execs[-1][0] == "cat"


def test_failed_build_and_failed_collection_are_scored_as_such(tmp_path):
    score = score_dockerfile(FakeEngine(), tmp_path, "FROM x\nRUN FAIL\n", "t:1")
    assert not score.built and not score.ebsr and "No matching distribution" in score.reason
    engine = FakeEngine()
    score = score_dockerfile(engine, tmp_path, "FROM x\n# NOCOLLECT\n", "t:2")
    assert score.built and not score.ebsr and score.collect_exit == 2
    assert len(engine.execs) == 1  # no test run after a failed collection


@pytest.fixture
def mirror(tmp_path) -> tuple[Path, list[BenchRepo]]:
    """Two repositories in the mirror layout, one with a requirements file and one without."""
    root = tmp_path / "mirror"
    repos = []
    for name, files in (
        ("Acme/alpha", {"requirements.txt": "six\n", "test_a.py": "def test(): pass\n"}),
        ("acme/beta", {"setup.py": "from setuptools import setup\nsetup()\n"}),
    ):
        work = tmp_path / name.replace("/", "-")
        work.mkdir()
        _git(work, "init", "-q")
        for rel, text in files.items():
            (work / rel).write_text(text)
        _git(work, "add", "-A")
        _git(work, "commit", "-qm", "c")
        sha = _git(work, "rev-parse", "HEAD")
        (root / name.replace("/", "+")).mkdir(parents=True)
        _git(tmp_path, "clone", "-q", "--bare", str(work), str(root / name.replace("/", "+") / "repo"))
        repos.append(
            BenchRepo(
                name=name.lower(),
                sha=sha,
                difficulty="easy" if "alpha" in name else "hard",
                gold=4 if "alpha" in name else None,
            )
        )
    return root, repos


def _options(root, repos, out, **kw) -> BenchOptions:
    return BenchOptions(
        repos=repos,
        systems=("declared",),
        out=out,
        git_root=root,
        engine_factory=FakeEngine,
        command="setupbot bench --repos x.tsv",
        **kw,
    )


def test_run_writes_records_and_resumes_without_redoing_pairs(mirror, tmp_path, capsys):
    root, repos = mirror
    out = tmp_path / "results"
    first = run_bench(_options(root, repos, out))
    assert [r["status"] for r in first] == ["ok", "ok"]
    alpha = first[0]
    assert alpha["ebsr"] and alpha["tests"]["passed"] == 2 and alpha["essr"] == 0.5
    assert alpha["pass_share"] == round(2 / 4, 4) and alpha["replay_reused"] is False
    assert alpha["image_bytes"] == 321_000_000 and alpha["produce_seconds"] >= 0
    assert (out / "artifacts" / "acme+alpha" / "declared" / "junit.xml").is_file()
    dockerfile = (out / "artifacts" / "acme+alpha" / "declared" / "Dockerfile").read_text()
    assert '"-r", "requirements.txt"' in dockerfile
    # The build context is the exported tree at the pinned commit, without .git.
    context = FakeEngine.instances[0].builds[0][0]
    assert not context.exists()  # scratch removed after the pair
    assert all(e.cleaned for e in FakeEngine.instances)
    assert "[2/2" in capsys.readouterr().err

    built_before = len(FakeEngine.instances)
    again = run_bench(_options(root, repos, out))
    assert again == [] and len(FakeEngine.instances) == built_before
    assert "2 pair(s) already in" in capsys.readouterr().err
    forced = run_bench(_options(root, repos[:1], out, force=True))
    assert len(forced) == 1
    lines = (out / "declared.jsonl").read_text().splitlines()
    assert len(lines) == 3 and len(results_io.load_records(out)) == 2
    assert results_io.read_meta(out)["commands"] == ["setupbot bench --repos x.tsv"]


def test_a_pair_that_leaves_little_disk_prunes_the_build_cache_before_the_next(mirror, tmp_path):
    """A long bench under BuildKit filled the disk with build cache until a build failed for
    room: after a pair, when less than --min-free-gb is free, the unused build cache goes and
    the record says how much was free before and after; with room, or with the guard off,
    nothing is pruned."""
    root, repos = mirror
    FakeEngine.free = 12 * 2**30
    first = run_bench(_options(root, repos[:1], tmp_path / "a", min_free_gb=20))
    assert FakeEngine.pruned == 1
    assert first[0]["disk"] == {"free_gb": 12.0, "pruned_build_cache": True, "free_gb_after": 52.0}
    # 52 GB free now: the next pair leaves the cache alone
    second = run_bench(_options(root, repos[1:], tmp_path / "b", min_free_gb=20))
    assert FakeEngine.pruned == 1 and "disk" not in second[0]
    FakeEngine.free = 1 * 2**30
    off = run_bench(_options(root, repos[:1], tmp_path / "c", min_free_gb=0))
    assert FakeEngine.pruned == 1 and "disk" not in off[0]


def test_infra_errors_are_retried_and_missing_repos_recorded(mirror, tmp_path):
    root, repos = mirror
    out = tmp_path / "results"
    results_io.append_record(
        out, {"repo": repos[0].name, "sha": repos[0].sha, "system": "declared", "status": "infra-error"}
    )
    absent = BenchRepo(name="acme/gamma", sha="a" * 40)
    records = run_bench(_options(root, [repos[0], absent], out))
    assert [r["status"] for r in records] == ["ok", "input-error"]
    assert "no git directory" in records[1]["reason"]


def _record(repo, system, difficulty, ebsr, passed=0, failed=0, produce=1.0, build=10.0, size=5e8, **kw):
    ran = passed + failed
    return {
        "repo": repo,
        "sha": "a" * 40,
        "system": system,
        "difficulty": difficulty,
        "ebsr": ebsr,
        "tests": {"passed": passed, "failed": failed, "errors": 0, "skipped": 0, "total": ran},
        "pass_share": passed / ran if ran else 0.0,
        "essr": kw.pop("essr", None),
        "produce_seconds": produce,
        "build_seconds": build,
        "image_bytes": size,
        "status": "ok" if ebsr else "build-failed",
        "tokens": 0,
        "steps": kw.pop("steps", 0),
        "repairs": 0,
        **kw,
    }


RECORDS = [
    _record(
        "o/a", "setupbot", "easy", True, 9, 1, produce=30, build=60, size=6e8, essr=0.9, steps=4, replay_reused=True
    ),
    _record("o/b", "setupbot", "hard", True, 5, 5, produce=90, build=100, size=1.2e9, steps=8),
    _record("o/a", "declared", "easy", True, 8, 2, produce=0.01, build=40, size=4e8, essr=0.8),
    _record("o/b", "declared", "hard", False, reason="build failed: ERROR: pip", size=None),
    _record("o/a", "pipreqs", "easy", False),
    _record("o/b", "pipreqs", "hard", False),
]


def test_aggregates_per_system_and_difficulty():
    aggs = {a.system: a for a in aggregate(RECORDS)}
    assert list(aggs) == ["setupbot", "declared", "pipreqs"]
    assert aggs["setupbot"].ebsr_rate == 1.0 and aggs["declared"].ebsr_rate == 0.5
    assert aggs["setupbot"].median_produce == 60 and aggs["setupbot"].median_image == 9e8
    assert aggs["setupbot"].mean_pass_share == pytest.approx(0.7)
    assert aggs["setupbot"].mean_essr == 0.9 and aggs["setupbot"].essr_repos == 1
    assert aggs["declared"].median_image == 4e8  # a missing size is not a zero
    assert aggs["setupbot"].replay_reused == 1
    table = ebsr_by_difficulty(RECORDS)
    assert table["easy"] == {"setupbot": (1, 1), "declared": (1, 1), "pipreqs": (0, 1)}
    assert table["hard"]["declared"] == (0, 1)


def test_summary_starts_with_the_command_and_has_every_pair(tmp_path):
    text = render_summary(RECORDS, commands=["setupbot bench --repos dev.tsv"])
    lines = text.splitlines()
    assert lines[0] == "# setupbot benchmark" and "setupbot bench --repos dev.tsv" in lines[4]
    assert "| setupbot | 2 | 2/2 (100.0%) |" in text
    assert "| hard | 2/2" not in text and "| hard | 1/1 (100.0%) | 0/1 (0.0%) | 0/1 (0.0%) |" in text
    assert text.count("| o/a@aaaaaaaa |") == 3 and "build-failed: build failed: ERROR: pip" in text
    assert "1 of 2 scores come from the clean replay" in text
    assert "Targets for setupbot: EBSR 100.0% ≥ 85% ✓; tokens 0 = 0 ✓; median image 900 MB ≤ 1 GB ✓." in text
    summary, chart = write_report(
        RECORDS, tmp_path / "SUMMARY.md", tmp_path / "chart.png", commands=["setupbot bench --repos dev.tsv"]
    )
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and chart.stat().st_size > 10_000
    assert "](chart.png)" in summary.read_text()


def test_report_only_command_redraws_from_the_jsonl(tmp_path):
    from bot.cli import main

    out = tmp_path / "bench" / "results"
    for record in RECORDS:
        results_io.append_record(out, record)
    results_io.write_meta(out, {"commands": ["setupbot bench --repos dev.tsv --out bench/results"]})
    assert main(["bench", "--report-only", "--out", str(out)]) == 0
    summary = (tmp_path / "bench" / "SUMMARY.md").read_text()
    assert "setupbot bench --repos dev.tsv --out bench/results" in summary.splitlines()[4]
    assert (tmp_path / "bench" / "chart.png").is_file()


def test_replay_from_a_run_record_is_reused_only_after_a_replayed_success():
    from bot.loop.records import RunRecord
    from bot.loop.trajectory import Trajectory

    record = RunRecord(repo="r", run_id="x", status="success", dockerfile="FROM python:3.11-slim\n")
    record.trajectory = Trajectory()
    record.trajectory.record("build", duration=50.0)
    record.trajectory.record("replay", duration=80.0)
    record.trajectory.record("replay-result", duration=95.0)
    record.replay = {
        "ok": True,
        "collect_exit": 0,
        "test_exit": 1,
        "tag": "setupbot-loop-x:replay-2",
        "tests": {"passed": 7, "failed": 1, "error": 2, "skipped": 2, "total": 12},
    }
    score = replay_score_from_record(record, FakeEngine())
    assert score.ebsr and score.build_seconds == 80.0 and score.image_bytes == 321_000_000
    assert (score.tests.passed, score.tests.errors, score.tests.skipped) == (7, 2, 2)
    json.dumps(score.to_json())
    # a replay through runtests.py has no JUnit counts: the benchmark scores with pytest itself
    no_counts = dict(record.replay, tests={"passed": 0, "failed": 0, "error": 0, "skipped": 0, "total": 0})
    assert replay_score_from_record(RunRecord(repo="r", run_id="z", status="success", replay=no_counts)) is None
    record.status = "unresolved"  # the replay then belongs to an earlier Dockerfile
    assert replay_score_from_record(record) is None
    assert replay_score_from_record(RunRecord(repo="r", run_id="y", status="success")) is None


def test_image_tags_are_valid_references():
    from bot.bench.runner import image_tag

    tag = image_tag(BenchRepo(name="Mause/duckdb_engine", sha="a" * 40), "declared", "20261130-abc")
    assert tag == "setupbot-bench/mause-duckdb_engine:declared-20261130-abc"
    assert image_tag(BenchRepo(name="a+b/c..d", sha="a" * 40), "x", "r").startswith("setupbot-bench/a-b-c..d:")


def test_build_failure_reason_is_the_telling_line():
    from bot.bench.score import _last_error_line

    log = (
        "Step 3/4 : RUN pip install -e .\n      LookupError: setuptools-scm was unable to detect version\n"
        "error: subprocess-exited-with-error\nnote: This error originates from a subprocess\n"
        "The command 'python -m pip install -e .' returned a non-zero code: 1\n"
    )
    assert _last_error_line(log).startswith("LookupError: setuptools-scm")
    assert _last_error_line("a\nThe command 'x' returned a non-zero code: 2\n").startswith("The command 'x'")
    assert _last_error_line("") == "no build log"


def test_collection_failure_cause_is_the_most_frequent_exception():
    from bot.bench.score import collect_cause

    out = (
        "ERROR collecting a.py\nE   ModuleNotFoundError: No module named 'yapf_third_party'\n"
        "E   ModuleNotFoundError: No module named 'yapf_third_party'\nE   ImportError: cannot import x\n"
        "!!! Interrupted: 2 errors during collection !!!\n"
    )
    assert collect_cause(out) == "ModuleNotFoundError: No module named 'yapf_third_party'"
    usage = "ERROR: usage: python -m pytest [options]\npython -m pytest: error: unrecognized arguments: --hypo\n"
    assert collect_cause(usage) == "error: unrecognized arguments: --hypo"
    assert collect_cause("ERROR: file or directory not found: t/\n") == "ERROR: file or directory not found: t/"
    assert collect_cause("nothing useful") == ""


def test_parallel_jobs_score_every_pair_once(mirror, tmp_path):
    root, repos = mirror
    out = tmp_path / "results"
    records = run_bench(_options(root, repos, out, jobs=2))
    assert sorted(r["repo"] for r in records) == sorted(r.name for r in repos)
    assert len((out / "declared.jsonl").read_text().splitlines()) == 2


def test_report_only_with_a_list_covers_the_listed_repositories(tmp_path, capsys):
    from bot.cli import main

    out = tmp_path / "bench" / "results"
    for record in RECORDS:
        results_io.append_record(out, record)
    listing = tmp_path / "list.tsv"
    listing.write_text(f"o/a\t{'a' * 40}\teasy\nbad line\n")
    assert main(["bench", "--report-only", "--repos", str(listing), "--only", "o/a", "--out", str(out)]) == 0
    summary = (tmp_path / "bench" / "SUMMARY.md").read_text()
    assert "| o/a@aaaaaaaa |" in summary and "| o/b@" not in summary
    assert "warning" in capsys.readouterr().err
    assert main(["bench", "--out", str(out)]) == 3  # no list and no --report-only: an input error


def test_summary_says_which_code_produced_each_setupbot_result():
    same = [dict(r, setupbot_commit="abc123") for r in RECORDS]
    assert "setupbot code per result" not in render_summary(same)
    mixed = [dict(r, setupbot_commit="def456" if r["repo"] == "o/b" else "abc123") for r in RECORDS]
    assert "setupbot code per result (resumed runs): `abc123`: a; `def456`: b." in render_summary(mixed)
    older = [dict(r) for r in RECORDS]
    older[0]["setupbot_commit"] = "abc123"
    assert "`abc123`: a; not recorded (runs before commit tracking): b." in render_summary(older)


def test_summary_gives_the_largest_overshoot_over_the_budget():
    from bot.bench.summary import overshoot

    records = [dict(r) for r in RECORDS]
    assert overshoot(records) is None  # results from before budgets were recorded
    records[0]["budget_seconds"] = 100  # o/a: 30 s of 100 s
    records[1]["budget_seconds"] = 80  # o/b: 90 s of 80 s, 12.5 % over
    assert overshoot(records) == (90 / 80 - 1, "o/b", 90, 80)
    text = render_summary(records)
    assert (
        "largest overshoot of a setupbot run over budgets.wall_clock is +12.5 % (o/b: 90s of 80s; target ≤ 5 %) ✗"
        in text
    )


def test_the_recorded_command_says_every_flag_that_changes_the_results():
    from bot.cli import build_parser
    from bot.commands.bench import command_line

    args = build_parser().parse_args(
        ["bench", "--repos", "r.tsv", "--systems", "setupbot", "--jobs", "2", "--determinism", "--force"]
    )
    line = command_line(args)
    assert line.startswith("setupbot bench --repos r.tsv --systems setupbot")
    assert "--jobs 2" in line and "--force" in line and line.endswith("--determinism")


def test_summary_says_where_setupbot_spends_its_time():
    """A table of the stages each timed setupbot run spent its produce time in, slowest first,
    with the shares across runs; runs recorded before target runs were timed are left out."""
    from bot.bench.summary import stage_times

    def rec(repo, total, build, test, lock, plan=2.0, replay=30.0):
        timings = {
            "plan_seconds": plan,
            "build_seconds": build,
            "test_seconds": test,
            "lock_seconds": lock,
            "replay_seconds": replay,
            "total_seconds": total,
        }
        return {"repo": repo, "sha": "a" * 40, "system": "setupbot", "ebsr": True, "details": {"timings": timings}}

    slow, quick = rec("o/slow", 1000.0, 300.0, 600.0, 50.0), rec("o/quick", 100.0, 60.0, 20.0, 10.0)
    old = {"repo": "o/old", "sha": "b" * 40, "system": "setupbot", "details": {"timings": {"total_seconds": 50.0}}}
    assert stage_times(old) is None
    t = stage_times(slow)
    assert t is not None and t["other"] == 48.0 and t["total"] == 1000.0
    text = render_summary([quick, slow, old])
    section = text[text.index("## Where setupbot's time goes") :]
    table = [ln for ln in section.splitlines() if ln.startswith("| o/")]
    assert [ln.split(" | ")[0] for ln in table] == ["| o/slow", "| o/quick"]
    assert table[0] == "| o/slow | 16.7m | 2.0s (0%) | 300s (30%) | 10.0m (60%) | 50s (5%) | 48s (5%) | 30s |"
    # across both: builds 360 of 1100, target runs 620, lock 60, plan 4, other 56
    assert "Across the 2 timed runs: target runs 56%, builds 33%, lock 5%, other 5%, plan 0%." in section


def test_the_bench_builds_setupbot_with_the_build_context_setupbot_run_gives(tmp_path, monkeypatch):
    """`setupbot run` puts its .dockerignore in place before the first build; the bench's
    setupbot does too, and its scoring build gets the same file. Without it the bench never
    saw that every *.pem was kept out (pyHanko's test keys)."""
    from bot.bench import systems
    from bot.bench.systems import SystemContext, run_setupbot
    from bot.config import load_settings
    from bot.loop.records import RunRecord

    repo = tmp_path / "repo"
    (repo / "pkg_tests").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("[project]\nname = 'p'\nversion = '1'\n")
    (repo / "pkg_tests" / "ca.key.pem").write_text("fixture\n")
    seen = {}

    def fake_run_setup(repo_dir, settings, engine, store, llm=None, make_plan=None):
        seen["ignore"] = (repo_dir / ".dockerignore").read_text()
        return RunRecord("p", "r1", status="unresolved", dockerfile="FROM python:3.11-slim\nCOPY . /workspace\n")

    monkeypatch.setattr(systems, "run_setup", fake_run_setup)
    settings = load_settings(repo, environ={}, overrides={"images": {"source": "standins"}})
    (tmp_path / "s").mkdir()
    result = run_setupbot(SystemContext(repo_dir=repo, scratch=tmp_path / "s", engine=None, settings=settings))
    assert "**/*.pem" in seen["ignore"] and "!**/*test*/**/*.pem" in seen["ignore"]
    assert result.produced.files[".dockerignore"] == seen["ignore"]
    # a repository's own .dockerignore is its own: left as it is, and not sent again
    (repo / ".dockerignore").write_text("node_modules\n")
    result = run_setupbot(SystemContext(repo_dir=repo, scratch=tmp_path / "s", engine=None, settings=settings))
    assert seen["ignore"] == "node_modules\n" and ".dockerignore" not in result.produced.files
