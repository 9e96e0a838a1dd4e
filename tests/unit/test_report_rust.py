"""The report's words for a Rust-led run: a Cargo.lock pins crates, not distributions, and a
missing rust image points at `setupbot images bootstrap --ecosystem rust` (the plain command
builds no rust image). A Python report keeps its words."""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.config import load_settings
from bot.ecosystems.rust.setup import run_rust_setup
from bot.engine.results import BuildResult, ExecResult
from bot.errors import ImageUnavailableError
from bot.report import ReportData, from_pipeline, render_report

REPOS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "repos"
PASS_LOG = (REPOS.parent / "rust-logs" / "cargo-test-pass.log").read_text()


class Engine:
    """Offers ``tags``; ``resolve_image`` gives a stand-in or raises ``missing``."""

    run_id = "rustreport1"

    def __init__(self, tags=("rust:1.85-slim",), missing: bool = False) -> None:
        self.tags = list(tags)
        self.missing = missing

    def image_tags(self, repository):
        return self.tags

    def resolve_image(self, image):
        if self.missing:
            raise ImageUnavailableError(f"image {image} is not in the local store", "Run `setupbot images bootstrap`.")
        return type("Resolved", (), {"digest": None, "origin": "standin"})()

    def build(self, context, text, tag, no_cache=False, timeout=None, **kw):
        return BuildResult(True, tag, "Successfully built", 2.0)

    def run_once(self, image, argv, *, timeout=300, env=None, network="none"):
        return ExecResult(list(argv), 0, PASS_LOG, 1.0)

    def clean(self, run_id=None):
        return {}


def _run(tmp_path: Path, engine: Engine):
    repo = tmp_path / "rust-crate"
    shutil.copytree(REPOS / "rust-crate", repo)
    settings = load_settings(repo, environ={}, overrides={"images": {"source": "standins"}})
    outcome = run_rust_setup(repo, settings, engine)
    return outcome, render_report(from_pipeline(outcome.plan, outcome.run_record, outcome.verification))


def test_a_rust_report_counts_crates_and_names_the_rust_stand_ins(tmp_path):
    outcome, report = _run(tmp_path, Engine())
    assert outcome.run_record.status == "success"
    assert "the repository's own `Cargo.lock` (" in report and " crates), installed with" in report
    assert "distributions" not in report
    assert "offline stand-in (`setupbot images bootstrap --ecosystem rust`)" in report


def test_a_missing_rust_image_points_at_the_rust_bootstrap(tmp_path):
    none_offered, report = _run(tmp_path / "a", Engine(tags=()))
    assert none_offered.run_record.status == "unresolved"
    assert "`setupbot images bootstrap --ecosystem rust`" in none_offered.run_record.remaining
    assert "setupbot images bootstrap --ecosystem rust" in report  # inline text: the backticks become quotes
    not_built, report = _run(tmp_path / "b", Engine(missing=True))
    assert not_built.run_record.status == "unresolved" and "not in the local store" in not_built.run_record.remaining
    assert "setupbot images bootstrap --ecosystem rust' builds the offline stand-ins" in report


def test_a_python_report_keeps_its_words():
    report = render_report(
        ReportData(
            python="3.12",
            base_image="python:3.12-slim",
            base_image_origin="standin",
            lock={"native": True, "file": "uv.lock", "count": 12, "tool": "uv sync"},
        )
    )
    assert "(12 distributions)" in report
    assert "offline stand-in (`setupbot images bootstrap`)" in report
