"""A test command that names the folders it runs (CI's `unittest tests/core/test_*.py`, read as
`pytest tests/core`) installs what those tests import, not what the tests it never runs import:
test modules outside the folders and functions of an `__init__.py` above them (bm25s: its
comparison tests and their helpers pulled in beir, transformers and, through them, torch)."""

from __future__ import annotations

from bot.compile.plan import make_plan
from bot.graph.specs import command_paths

WORKFLOW = """\
name: tests
on: [push]
jobs:
  test-core:
    runs-on: ubuntu-latest
    steps:
    - uses: actions/checkout@v4
    - run: pip install -e .
    - run: python -m unittest tests/core/test_*.py
  test-comparison:
    runs-on: ubuntu-latest
    steps:
    - uses: actions/checkout@v4
    - run: pip install -r tests/requirements-comparison.txt
    - run: python -m unittest tests/comparison/test_*.py
"""

FILES = {
    "pyproject.toml": ('[project]\nname = "demo"\nversion = "1"\n[project.optional-dependencies]\ncore = ["orjson"]\n'),
    "demo/__init__.py": "",
    "tests/requirements-comparison.txt": "beir\ntransformers\nattrs\n",
    # the package above tests/core: loading it runs no function body
    "tests/__init__.py": "import unittest\n\nclass Base(unittest.TestCase):\n    def compare(self):\n        import transformers\n",
    # a conftest above tests/core is loaded, and its fixtures run
    "tests/conftest.py": "def fixture():\n    import attrs\n",
    "tests/core/test_core.py": "import orjson\n\ndef test_core():\n    pass\n",
    "tests/comparison/test_cmp.py": "import beir\nimport transformers\n\ndef test_cmp():\n    pass\n",
}


def _installed(plan) -> set[str]:
    return {n.name for n in plan.graph.of_type("PACKAGE") if n.action == "pip"}


def test_imports_of_tests_the_command_does_not_run_are_left_out_and_said(write_tree):
    repo = write_tree({**FILES, ".github/workflows/tests.yml": WORKFLOW})
    plan = make_plan(repo, available_pythons=["3.11"], resolve=False)
    assert plan.test_command == ["python", "-m", "pytest", "tests/core"]
    installed = _installed(plan)
    # what tests/core imports, and what the conftest above it imports in a fixture, stay
    assert {"orjson", "attrs"} <= installed
    # what only the comparison tests and a helper function of tests/__init__.py import does not
    assert not {"beir", "transformers"} & installed
    said = [w.message for w in plan.warnings if "not installed for the tests" in w.message]
    assert len(said) == 1 and "beir, transformers" in said[0] and "tests/core" in said[0]
    assert "transformers" not in plan.dockerfile.text and "orjson" in plan.dockerfile.text


def test_a_command_that_runs_the_whole_suite_installs_every_test_import(write_tree):
    repo = write_tree(FILES)  # no workflow: pytest runs every test folder
    plan = make_plan(repo, available_pythons=["3.11"], resolve=False)
    assert plan.test_command == ["python", "-m", "pytest"]
    assert {"orjson", "attrs", "beir", "transformers"} <= _installed(plan)
    assert not [w for w in plan.warnings if "not installed for the tests" in w.message]


def test_the_paths_a_pytest_command_names():
    assert command_paths(["python", "-m", "pytest", "tests/core", "tests/b.py::test_x"]) == ["tests/core", "tests/b.py"]
    # -m and -k take an expression, not a path; options are not paths
    assert command_paths(["python", "-m", "pytest", "-m", "fast", "-k", "db", "--timeout=60"]) == []
    assert command_paths(["python", "-m", "pytest", "."]) == []
    assert command_paths(["python", "-m", "unittest", "tests/core"]) == []
