"""The bench's determinism check (issue 16): the final Dockerfile built a second time with no
cache, the package sets compared, the share reported; with an engine double."""

from __future__ import annotations

from pathlib import Path

from bot.bench import runner as runner_mod
from bot.bench import systems as systems_mod
from bot.bench.baselines import Produced
from bot.bench.determinism import PackageSets, check_determinism, compare, identical_share, package_sets
from bot.bench.repos import BenchRepo, ExportResult
from bot.bench.runner import BenchOptions, Progress, run_pair
from bot.bench.score import Score
from bot.bench.summary import render_summary
from bot.bench.systems import SystemResult
from bot.engine.results import BuildResult, ExecResult
from bot.junit import TestCounts

FREEZE_A = "attrs==23.1.0\npip==24.0\nrequests==2.31.0\n[notice] A new release of pip is available\n"
FREEZE_B = "attrs==23.2.0\npip==24.0\nrequests==2.31.0\n"
DPKG = "libc6=2.36-9+deb12u7\nlibpq5=15.8-0+deb12u1\n"


class Engine:
    """Images are package sets; a build gives ``next_freeze``."""

    def __init__(self, next_freeze: str = FREEZE_A, build_ok: bool = True) -> None:
        self.run_id = "det1"
        self.images: dict[str, str] = {"first": FREEZE_A}
        self.next_freeze = next_freeze
        self.build_ok = build_ok
        self.builds: list[tuple[Path, str, str, bool]] = []

    def run_once(self, image, argv, timeout=300, env=None, network="none"):
        if argv[0] == "dpkg-query":
            return ExecResult(list(argv), 0, DPKG, 0.1)
        if image not in self.images:
            return ExecResult(list(argv), 125, "No such image", 0.1)
        return ExecResult(list(argv), 0, self.images[image], 0.1)

    def build(self, context, text, tag, no_cache=False, log_path=None):
        self.builds.append((Path(context), text, tag, no_cache))
        if self.build_ok:
            self.images[tag] = self.next_freeze
        return BuildResult(self.build_ok, tag, "ok" if self.build_ok else "E: Unable to locate package x", 3.0)

    def image_size(self, tag):
        return 100

    def clean(self, run_id=None):
        return {}


def test_package_sets_leave_out_pips_notices():
    sets = package_sets(Engine(), "first")
    assert sets.pip == ["attrs==23.1.0", "pip==24.0", "requests==2.31.0"]
    assert sets.dpkg == ["libc6=2.36-9+deb12u7", "libpq5=15.8-0+deb12u1"]
    assert not package_sets(Engine(), "missing").ok


def test_compare_names_what_differs():
    a = PackageSets(["attrs==23.1.0", "six==1.16.0"], ["libc6=1"])
    assert compare(a, PackageSets(list(a.pip), list(a.dpkg)))["identical"] is True
    d = compare(a, PackageSets(["attrs==23.2.0", "six==1.16.0"], ["libc6=1"]))
    assert d["identical"] is False and d["pip_differs"] == ["-attrs==23.1.0", "+attrs==23.2.0"]
    assert compare(a, PackageSets(error="boom"))["identical"] is None


def test_second_build_without_cache_is_compared_with_the_first(tmp_path):
    engine = Engine()
    same = check_determinism(engine, tmp_path, "FROM x\n", "first", "t:again")
    assert same["identical"] is True and engine.builds[0][3] is True
    differs = check_determinism(Engine(next_freeze=FREEZE_B), tmp_path, "FROM x\n", "first", "t:again")
    assert differs["identical"] is False and "+attrs==23.2.0" in differs["pip_differs"]
    failed = check_determinism(Engine(build_ok=False), tmp_path, "FROM x\n", "first", "t:again")
    assert failed["identical"] is False and "second build failed" in failed["error"]


def _record(repo: str, identical, lock_status="locked") -> dict:
    return {
        "repo": repo,
        "sha": "a" * 40,
        "system": "setupbot",
        "status": "ok",
        "ebsr": True,
        "tests": {"passed": 1},
        "determinism": {"identical": identical} if identical is not None else None,
        "details": {"lock": {"status": lock_status}},
    }


def test_summary_reports_the_identical_share_and_the_lock_per_row():
    records = [_record(f"o/r{i}", True) for i in range(19)] + [_record("o/x", False, "failed"), _record("o/y", None)]
    assert identical_share(records) == (19, 20)
    text = render_summary(records)
    assert "Determinism: 19/20 repositories (95.0%)" in text and "✓" in text.split("Determinism:")[1].splitlines()[0]
    row = next(ln for ln in text.splitlines() if ln.startswith("| o/x@"))
    assert "| no | differs |" in row
    row = next(ln for ln in text.splitlines() if ln.startswith("| o/r0@"))
    assert "| yes | identical |" in row


def test_runner_builds_with_the_lock_in_the_context_and_checks_determinism(tmp_path, monkeypatch):
    engine = Engine()
    engine.images["setupbot-loop-x:locked"] = FREEZE_A

    def fake_setupbot(ctx):
        produced = Produced(
            "setupbot",
            "FROM python:3.11-slim AS env\nCOPY .devcontainer/requirements.lock /tmp/\n"
            "\n# the development container\nFROM env AS dev\nRUN useradd --create-home dev\n",
            5.0,
            files={".devcontainer/requirements.lock": "attrs==23.1.0\n"},
            details={"lock": {"status": "locked"}},
        )
        replay = Score(built=True, ebsr=True, collect_exit=0, tests=TestCounts(passed=1))
        return SystemResult(produced, replay=replay, extra={"image": "setupbot-loop-x:locked"})

    monkeypatch.setitem(systems_mod.RUNNERS, "setupbot", fake_setupbot)
    pristine = tmp_path / "tree"
    pristine.mkdir()
    (pristine / "test_a.py").write_text("def test(): pass\n")
    seen = {}
    real_check = runner_mod.check_determinism

    def spy(engine_, context, text, first, tag):
        seen["lock"] = (context / ".devcontainer" / "requirements.lock").read_text()
        seen["pristine_untouched"] = not (pristine / ".devcontainer").exists()
        return real_check(engine_, context, text, first, tag)

    monkeypatch.setattr(runner_mod, "check_determinism", spy)
    opts = BenchOptions(
        repos=[], systems=("setupbot",), out=tmp_path / "out", engine_factory=lambda s: engine, determinism=True
    )
    record = run_pair(
        BenchRepo(name="o/r", sha="a" * 40), "setupbot", pristine, ExportResult(pristine), opts, Progress(1)
    )
    assert record["status"] == "ok", record
    assert record["determinism"]["identical"] is True
    assert seen == {"lock": "attrs==23.1.0\n", "pristine_untouched": True}
    assert engine.builds[-1][3] is True and engine.builds[-1][2].endswith("-again")
    # the replay built the tested stage alone: so does the second build, to compare like with like
    assert engine.builds[-1][1] == "FROM python:3.11-slim AS env\nCOPY .devcontainer/requirements.lock /tmp/\n"
    # without the option, no second build
    engine.builds.clear()
    opts.determinism = False
    record = run_pair(
        BenchRepo(name="o/r", sha="a" * 40), "setupbot", pristine, ExportResult(pristine), opts, Progress(1)
    )
    assert "determinism" not in record and engine.builds == []
