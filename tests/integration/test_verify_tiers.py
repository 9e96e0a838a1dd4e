"""An end-to-end verification for each verdict tier, on small fixture repositories, with the
prosecutor and judge in their own containers of a plain pytest image."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.junit import TestResults
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


class _Roles:
    """The engine, noting the role of every container a verification opens."""

    def __init__(self, engine):
        self._engine, self.roles = engine, []

    def session(self, image, **kw):
        self.roles.append(kw.get("name_hint"))
        return self._engine.session(image, **kw)

    def __getattr__(self, name):
        return getattr(self._engine, name)


@pytest.mark.slow
def test_a_replayed_run_is_examined_without_running_the_suite_again(verify_engine, plain_pytest_image):
    """The clean replay ran this command on this image: the prosecutor and the judge examine its
    results, and the verdict is the one a run of its own gives."""
    first = _verify(verify_engine, plain_pytest_image, "verify-partial")
    replayed = TestResults.from_json(first.tests_with_siblings)
    engine = _Roles(verify_engine)
    again = _verify(engine, plain_pytest_image, "verify-partial", replayed=replayed, replayed_from="the replay")
    assert "verify-with" not in engine.roles and "prosecutor" in engine.roles and "judge" in engine.roles
    assert again.tests_from == "the replay" and first.tests_from == ""
    assert again.tier == first.tier == "Partial"
    assert again.tests_with_siblings["tests"] == first.tests_with_siblings["tests"]
    assert {(r["kind"], r["decision"]) for r in again.rulings} == {(r["kind"], r["decision"]) for r in first.rulings}
