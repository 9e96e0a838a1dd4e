"""The retrieval figures on real bench logs (bot/bench/retrieval_eval.py): what is harvested,
how precision@1 and recall@3 count, and that every harvested log in the repository is labelled."""

from __future__ import annotations

import json
from pathlib import Path

from bot.bench.retrieval_eval import ROOT, harvest, score, seed_retriever


def _write(results: Path, rows: list[dict]) -> None:
    results.mkdir(parents=True, exist_ok=True)
    (results / "setupbot.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_harvest_takes_the_failing_part_of_failed_runs_once(tmp_path):
    _write(
        tmp_path,
        [
            {
                "repo": "a/b",
                "system": "setupbot",
                "status": "build-failed",
                "build_log_tail": "E: boom",
                "collect_tail": "x",
            },
            {"repo": "a/b", "system": "setupbot", "status": "collect-failed", "collect_tail": "No module named 'q'"},
            {"repo": "c/d", "system": "setupbot", "status": "collect-failed", "collect_tail": "No module named 'q'"},
            {"repo": "e/f", "system": "setupbot", "status": "ok", "collect_tail": "fine", "test_tail": "1 failed"},
        ],
    )
    logs = harvest(tmp_path)
    assert [(lg.case, lg.text) for lg in logs] == [
        ("a/b|setupbot|build_log_tail", "E: boom"),
        ("a/b|setupbot|collect_tail", "No module named 'q'"),
    ]


def test_precision_counts_offering_nothing_as_right_when_no_unit_holds_the_fix():
    from bot.bench.retrieval_eval import RealLog

    logs = [RealLog("1", "one"), RealLog("2", "two"), RealLog("3", "three"), RealLog("4", "four")]
    labels = {"1": {"units": ["u1"]}, "2": {"units": ["u2", "u2b"]}, "3": {"units": []}}
    answers = {"one": ["u1", "x"], "two": ["x", "y", "u2b"], "three": [], "four": ["u4"]}
    s = score(logs, labels, answers.__getitem__)
    assert (s.cases, s.with_unit, s.hits1, s.hits3) == (3, 2, 2, 2)
    assert s.unlabelled == ["4"] and [m[0] for m in s.misses] == ["2"]
    assert round(s.precision_at_1, 3) == 0.667 and s.recall_at_3 == 1.0 and s.precision_at_1_with_unit == 0.5


def test_a_label_may_carry_the_repository_context_the_loop_would_add(tmp_path):
    """pytest finds no tests: in a Django project (the loop reads that from manage.py) the
    right fix is Django's runner, elsewhere unittest discovery; the label says which it was."""
    from bot.bench.retrieval_eval import RealLog

    log = RealLog("d", "no tests collected in 0.16s")
    labels = {"d": {"units": ["verify-django-no-tests"], "context": {"framework": "django"}}}
    retrieve = seed_retriever(tmp_path)
    assert retrieve(log.text)[:1] == ["verify-no-tests-collected"]
    assert score([log], labels, retrieve).hits1 == 1
    assert score([log], {"d": {"units": ["verify-django-no-tests"]}}, retrieve).hits1 == 0


def test_every_harvested_bench_log_is_labelled_with_known_units(tmp_path):
    logs = harvest(ROOT / "bench" / "results") + harvest(ROOT / "bench" / "results-fresh")
    labels = json.loads((ROOT / "bench" / "retrieval-labels.json").read_text())["cases"]
    assert logs and all(lg.case in labels for lg in logs)
    retrieve = seed_retriever(tmp_path)
    from bot.knowledge import seed_units

    known = {u.id for u in seed_units()}
    assert all(u in known for label in labels.values() for u in label["units"])
    # the seed store answers a real log: the setuptools-scm failure of a real build
    scm = next(lg for lg in logs if "setuptools-scm was unable to detect version" in lg.text)
    assert retrieve(scm.text)[:3] and "install-setuptools-scm" in retrieve(scm.text)[:3]


def test_the_bench_summary_carries_the_retrieval_figures_of_its_results(tmp_path):
    """`setupbot bench --report-only` writes the section when the hand labels sit beside the
    results; its figures are those of the evaluation."""
    from bot.cli import main

    out = tmp_path / "results"
    _write(
        out,
        [
            {
                "repo": "a/b",
                "system": "setupbot",
                "status": "collect-failed",
                "ecosystem": "python",
                "collect_tail": "E   ModuleNotFoundError: No module named 'yaml'",
            },
            {
                "repo": "c/d",
                "system": "setupbot",
                "status": "collect-failed",
                "ecosystem": "python",
                "collect_tail": "E   AssertionError: the fixture data is not there",
            },
        ],
    )
    labels = {
        "cases": {
            "a/b|setupbot|collect_tail": {"units": ["install-module-generic"]},
            "c/d|setupbot|collect_tail": {"units": []},
        }
    }
    (tmp_path / "retrieval-labels.json").write_text(json.dumps(labels))
    assert main(["bench", "--report-only", "--out", str(out)]) == 0
    text = (tmp_path / "SUMMARY.md").read_text()
    assert "## Experience-base retrieval on the real failure logs" in text
    logs = harvest(out)
    s = score(logs, labels["cases"], seed_retriever(tmp_path))
    assert f"| recall@3 where a unit holds the fix | {s.recall_at_3:.3f} ({s.hits3}/1) |" in text
    assert f"({s.hits1}/2)" in text and "2 distinct logs" in text


def test_the_context_keeps_fixes_that_cannot_help_in_this_checkout_out_of_the_offers(tmp_path):
    """What the loop reads from the checkout beside the log: a missing submodule of a package the
    checkout holds gets no namesake from the index (NESCL's Cython module), and a checkout with
    no test file at all gets no other test command (unixmd). Elsewhere the same logs keep them."""
    retrieve = seed_retriever(tmp_path)
    missing = "E   ModuleNotFoundError: No module named 'recbole.util.cython.random_choice'"
    assert retrieve(missing)[:1] == ["install-module-generic"]
    assert "install-module-generic" not in retrieve(missing, {"checkout_modules": ["debug", "recbole"]})
    # another package of the checkout does not hide a dependency's namesake
    assert retrieve(missing, {"checkout_modules": ["other"]})[:1] == ["install-module-generic"]
    no_tests = "collected 0 items\n\n============================ no tests ran in 0.02s ============================"
    assert "verify-no-tests-collected" in retrieve(no_tests)
    assert "verify-no-tests-collected" not in retrieve(no_tests, {"test_files": "none"})


def test_the_checkout_context_reads_test_files_and_is_bounded_to_the_checkout(tmp_path):
    from bot.loop.repair import repo_context

    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "core.py").write_text("x = 1\n")
    (repo / "contest.py").write_text("")
    # a test folder reached through a link out of the checkout is not the checkout's
    outside = tmp_path / "outside"
    (outside / "tests").mkdir(parents=True)
    (outside / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    (repo / "linked").symlink_to(outside)
    assert repo_context(repo) == {"test_files": "none"}
    (repo / "pkg" / "tests").mkdir()
    (repo / "pkg" / "tests" / "helpers.py").write_text("")
    assert repo_context(repo) == {}
