"""Benchmark inputs: the TSV list and the export of a pinned tree from a git directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from doubles.git import git as _git

from bot.bench.repos import BenchRepo, export_tree, find_git_dir, parse_repo_list, prepare_git_dir, read_repo_list
from bot.errors import InputError

SHA = "f3901686abc47853523f3b211873fc2b9e0c5ab5"


def test_parses_columns_comments_and_optional_gold_count():
    text = (
        "# repo\tsha\tdifficulty\tnote\n"
        f"python/importlib_metadata\t{SHA}\teasy\tpure-Python backport\n"
        "\n"
        f"google/yapf\t{SHA.upper()}\t412\tmedium\n"
        f"mause/duckdb_engine\t{SHA}\n"
    )
    parsed = parse_repo_list(text)
    assert parsed.warnings == []
    first, second, third = parsed.repos
    assert (first.name, first.sha, first.difficulty, first.gold, first.note) == (
        "python/importlib_metadata",
        SHA,
        "easy",
        None,
        "pure-Python backport",
    )
    assert (second.sha, second.gold, second.difficulty) == (SHA, 412, "medium")
    assert (third.difficulty, third.gold, third.line) == ("", None, 5)
    assert third.slug == "mause+duckdb_engine"


def test_bad_lines_are_warnings_and_the_rest_still_runs():
    text = (
        f"not a repo\t{SHA}\n"
        "owner/name deadbeef\n"  # spaces instead of a tab
        "owner/name\tnot-a-sha\n"
        f"owner/name\t{SHA}\thard\n"
        f"owner/name\t{SHA}\teasy\n"
    )  # listed twice
    parsed = parse_repo_list(text, origin="list.tsv")
    assert [r.name for r in parsed.repos] == ["owner/name"]
    assert len(parsed.warnings) == 4
    assert "list.tsv:2" in parsed.warnings[1] and "tabs" in parsed.warnings[1]
    assert "not a commit sha" in parsed.warnings[2]
    assert "listed twice" in parsed.warnings[3]


def test_url_in_first_column_names_the_repository():
    parsed = parse_repo_list(f"https://example.org/Owner/Project.git\t{SHA}\n")
    assert parsed.repos[0].name == "Owner/Project"
    assert parsed.repos[0].source == "https://example.org/Owner/Project.git"


def test_unreadable_list_is_an_input_error(tmp_path):
    with pytest.raises(InputError):
        read_repo_list(tmp_path / "absent.tsv")


def test_dev_list_parses_without_warnings():
    parsed = read_repo_list(Path(__file__).resolve().parents[2] / "bench" / "dev-repos.tsv")
    assert parsed.warnings == [] and len(parsed.repos) == 21
    assert {r.difficulty for r in parsed.repos} == {"easy", "medium", "hard"}


# --- export ------------------------------------------------------------------------------------


@pytest.fixture
def work_repo(tmp_path) -> tuple[Path, str]:
    """A small repository with a nested file, an executable, a symlink and two commits."""
    repo = tmp_path / "work"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "__init__.py").write_text("VERSION = 1\n")
    (repo / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (repo / "run.sh").chmod(0o755)
    (repo / "big.bin").write_bytes(b"\0" * 4096)
    (repo / "link").symlink_to("pkg/__init__.py")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "first")
    pinned = _git(repo, "rev-parse", "HEAD")
    (repo / "pkg" / "__init__.py").write_text("VERSION = 2\n")
    (repo / "later.txt").write_text("not at the pinned commit\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "second")
    return repo, pinned


def test_export_writes_the_pinned_tree_without_git(work_repo, tmp_path):
    repo, pinned = work_repo
    dest = tmp_path / "out"
    result = export_tree(repo / ".git", pinned, dest)
    assert (dest / "pkg" / "__init__.py").read_text() == "VERSION = 1\n"
    assert not (dest / "later.txt").exists()
    assert not (dest / ".git").exists()
    assert (dest / "run.sh").stat().st_mode & 0o111
    assert (dest / "link").is_symlink() and (dest / "link").read_text() == "VERSION = 1\n"
    assert (result.files, result.symlinks, result.missing) == (3, 1, [])


def test_export_skips_and_counts_blobs_absent_from_the_snapshot(work_repo, tmp_path):
    repo, pinned = work_repo
    oid = _git(repo, "rev-parse", f"{pinned}:big.bin")
    # A snapshot without large blobs: delete the loose object file of one blob.
    (repo / ".git" / "objects" / oid[:2] / oid[2:]).unlink()
    result = export_tree(repo / ".git", pinned, tmp_path / "out")
    assert result.missing == ["big.bin"]
    assert not (tmp_path / "out" / "big.bin").exists()
    assert (tmp_path / "out" / "pkg" / "__init__.py").is_file()
    assert result.to_json()["missing_blobs"] == ["big.bin"]


def test_mirror_layout_is_matched_case_insensitively(work_repo, tmp_path):
    repo, pinned = work_repo
    root = tmp_path / "mirror"
    (root / "Mause+duckdb_engine").mkdir(parents=True)
    _git(tmp_path, "clone", "-q", "--bare", str(repo), str(root / "Mause+duckdb_engine" / "repo"))
    bench_repo = BenchRepo(name="mause/duckdb_engine", sha=pinned)
    found = find_git_dir(bench_repo, root)
    assert found == root / "Mause+duckdb_engine" / "repo"
    result = export_tree(found, pinned, tmp_path / "out")
    assert result.files == 3 and (tmp_path / "out" / "big.bin").stat().st_size == 4096


def test_unknown_repository_and_unknown_commit_are_input_errors(work_repo, tmp_path):
    repo, _ = work_repo
    with pytest.raises(InputError, match="no git directory"):
        prepare_git_dir(BenchRepo(name="a/b", sha="0" * 40), tmp_path, tmp_path)
    with pytest.raises(InputError, match="not readable"):
        export_tree(repo / ".git", "0" * 40, tmp_path / "out")


def test_local_path_source_is_used_directly(work_repo, tmp_path):
    repo, pinned = work_repo
    bench_repo = parse_repo_list(f"{repo}\t{pinned}\n").repos[0]
    assert prepare_git_dir(bench_repo, None, tmp_path) == repo / ".git"
