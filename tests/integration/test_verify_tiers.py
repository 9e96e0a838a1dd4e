"""An end-to-end verification for each verdict tier, on small fixture repositories, with the
prosecutor and judge in their own containers of a plain pytest image."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.verify.run import verify_environment

# one worker builds the module's pytest image once (conftest's module-scoped fixtures)
pytestmark = pytest.mark.xdist_group("verify_tiers")
REPOS = Path(__file__).resolve().parents[1] / "fixtures" / "repos"


def _verify(engine, image, case, **kw):
    return verify_environment(engine, REPOS / case, image, copy_repo=True, test_timeout=300, **kw)


@pytest.mark.slow
def test_full_with_mutation_check(verify_engine, plain_pytest_image):
    record = _verify(verify_engine, plain_pytest_image, "verify-full", mutation=True)
    assert record.tier == "Full", record.verdict
    assert record.mutation["ran"] and record.mutation["killed"], record.mutation
    assert record.mutation["path"].endswith("calc/__init__.py")


@pytest.mark.slow
def test_mostly_when_a_console_script_does_not_launch(verify_engine, plain_pytest_image):
    record = _verify(verify_engine, plain_pytest_image, "verify-mostly")
    assert record.tier == "Mostly", record.verdict
    upheld = [r for r in record.rulings if r["decision"] == "upheld"]
    assert [r["kind"] for r in upheld] == ["entry_point_failed"]
    charge = next(c for c in record.charges if c["kind"] == "entry_point_failed")
    assert charge["command"] == ["greet-cli", "--help"]


@pytest.mark.slow
def test_partial_when_a_core_dependency_is_missing(verify_engine, plain_pytest_image):
    record = _verify(verify_engine, plain_pytest_image, "verify-partial")
    assert record.tier == "Partial", record.verdict
    kinds = {(r["kind"], r["decision"]) for r in record.rulings}
    assert ("import_failed", "upheld") in kinds and ("tests_failed", "upheld") in kinds
    failed = next(r for r in record.rulings if r["kind"] == "tests_failed")
    assert sorted(failed["upheld_tests"]) == ["tests.test_shapes::test_dump", "tests.test_shapes::test_dump_nested"]


@pytest.mark.slow
def test_shallow_when_everything_is_skipped(verify_engine, plain_pytest_image):
    record = _verify(verify_engine, plain_pytest_image, "verify-shallow")
    assert record.tier == "Shallow", record.verdict
    assert any(c["kind"] == "all_skipped" for c in record.charges)
