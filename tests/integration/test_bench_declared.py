"""`declared` end to end on the real engine: a tiny repository in a mirror-layout git
directory, exported at its pinned commit, built without cache on python:3.11-slim, collected
and tested; the JUnit counts, the image size and the cleanup are checked."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest
from doubles.git import git as _git

from bot.bench import results as results_io
from bot.bench.repos import BenchRepo
from bot.bench.runner import BenchOptions, run_bench
from bot.config import load_settings

pytestmark = pytest.mark.slow

FILES = {
    "pyproject.toml": textwrap.dedent("""
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "tinycalc"
        version = "0.1"

        [project.optional-dependencies]
        test = ["pytest"]

        [tool.setuptools]
        packages = ["tinycalc"]
    """),
    "tinycalc/__init__.py": "def add(a, b):\n    return a + b\n",
    "tests/test_calc.py": textwrap.dedent("""
        from tinycalc import add

        def test_add():
            assert add(1, 2) == 3

        def test_add_negative():
            assert add(-1, -2) == -3

        def test_known_failure():
            assert add(0.1, 0.2) == 0.3
    """),
}


def _mirror(tmp_path: Path, name: str, files: dict[str, str]) -> tuple[Path, BenchRepo]:
    work = tmp_path / "work" / name.replace("/", "-")
    work.mkdir(parents=True)
    _git(work, "init", "-q")
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "pinned")
    sha = _git(work, "rev-parse", "HEAD")
    (work / "tinycalc" / "__init__.py").write_text("raise SystemExit('not the pinned commit')\n")
    _git(work, "commit", "-qam", "later")
    root = tmp_path / "mirror"
    dest = root / name.replace("/", "+") / "repo"
    dest.parent.mkdir(parents=True)
    _git(tmp_path, "clone", "-q", "--bare", str(work), str(dest))
    return root, BenchRepo(name=name, sha=sha, difficulty="easy", gold=3)


def _left_behind(run_id: str) -> list[str]:
    """Images and containers that still carry the pair's run label."""
    found = []
    for kind in (["images", "-a"], ["ps", "-a"]):
        found += subprocess.run(
            ["docker", *kind, "-q", "--filter", f"label=setupbot.run={run_id}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    return found


def test_declared_baseline_end_to_end(docker_available, tmp_path):
    if subprocess.run(["docker", "image", "inspect", "python:3.11-slim"], capture_output=True).returncode != 0:
        pytest.skip("python:3.11-slim is not present (setupbot images bootstrap builds it)")
    root, repo = _mirror(tmp_path, "acme/tinycalc", FILES)
    root_broken, broken = _mirror(
        tmp_path / "b", "acme/broken", {**FILES, "requirements.txt": "setupbot-no-such-distribution-xyz==1.0\n"}
    )
    out = tmp_path / "results"
    for mirror_root, bench_repo in ((root, repo), (root_broken, broken)):
        run_bench(
            BenchOptions(
                repos=[bench_repo],
                systems=("declared",),
                out=out,
                git_root=mirror_root,
                settings=load_settings(None),
                test_timeout=300,
                collect_timeout=180,
            )
        )
    records = {r["repo"]: r for r in results_io.load_records(out)}

    ok = records["acme/tinycalc"]
    assert ok["status"] == "ok", ok.get("reason")
    assert ok["ebsr"] is True and ok["collected"] == 3
    assert ok["tests"] == {"passed": 2, "failed": 1, "errors": 0, "skipped": 0, "total": 3}
    assert ok["counts_from"] == "junit" and ok["essr"] == round(2 / 3, 4)
    assert ok["image_bytes"] > 50_000_000 and ok["build_seconds"] > 0
    assert ok["replay_reused"] is False and ok["tokens"] == 0
    artifacts = out / "artifacts" / "acme+tinycalc" / "declared"
    assert '"-e", ".[test]"' in (artifacts / "Dockerfile").read_text()
    assert 'name="test_known_failure"' in (artifacts / "junit.xml").read_text()

    bad = records["acme/broken"]
    assert bad["status"] == "build-failed" and bad["ebsr"] is False
    assert "setupbot-no-such-distribution-xyz" in bad["build_log_tail"]

    # Nothing either pair created is left in the engine.
    assert _left_behind(ok["run_id"]) == [] and _left_behind(bad["run_id"]) == []
