"""The tests CI selects are the tests the loop runs: a make/just recipe a workflow step names is
read for its test command, and the selection in CI's pytest command (test paths, -m, -k,
--ignore, --deselect, --timeout with its plugin) is kept; everything else on the line is not."""

from __future__ import annotations

from pathlib import Path

from bot.compile.plan import make_plan
from bot.evidence import scan_repository
from bot.evidence.shellcmd import make_targets
from bot.graph.specs import ci_pytest_selection, pytest_selection

WORKFLOW = """\
name: tests
on: [push]
jobs:
  run-tests:
    runs-on: ubuntu-latest
    steps:
    - uses: actions/checkout@v4
    - name: Install dependencies
      run: make install-dev
    - name: Run tests
      run: make local-test
"""

MAKEFILE = """\
install-dev:
\tpip install -e ".[dev]"

slow-test:
\tpytest -n auto tests

local-test:
\tpytest -n auto -m "fast or local"
"""


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def _project(tmp_path: Path, **files: str) -> Path:
    base = {
        "pyproject.toml": '[project]\nname = "demo"\nversion = "1"\n[project.optional-dependencies]\ndev = ["pytest"]\n',
        "demo/__init__.py": "",
        "tests/unit/test_a.py": "def test_a():\n    pass\n",
        "tests/integration/test_b.py": "def test_b():\n    pass\n",
    }
    return _repo(tmp_path, {**base, **{k.replace("__", "/").replace("_DOT_", "."): v for k, v in files.items()}})


def test_the_recipe_a_workflow_runs_gives_the_test_command_and_its_markers(tmp_path):
    repo = _project(tmp_path, **{".github/workflows/ci.yml": WORKFLOW, "Makefile": MAKEFILE})
    ev = scan_repository(repo)
    assert [t for t, _ in ev.ci_targets] == ["install-dev", "local-test"]
    # the recipe is read although its name is not one of the test names; slow-test is not
    recipes = [(c.source.detail, c.ci) for c in ev.test_commands if "pytest" in c.argv]
    assert recipes == [
        ('Makefile local-test (run by .github/workflows/ci.yml:11): pytest -n auto -m "fast or local"', True)
    ]
    plan = make_plan(repo, available_pythons=["3.11"], resolve=False)
    assert plan.test_command == ["python", "-m", "pytest", "-m", "fast or local"]
    assert plan.collect_command == ["python", "-m", "pytest", "-m", "fast or local", "--collect-only", "-q"]
    assert any(f == "Makefile" and "run by .github/workflows/ci.yml" in d for f, _ln, d in plan.graph.target.evidence)
    assert '"-m", "fast or local"' in plan.dockerfile.text


def test_ci_commands_that_select_differently_or_nothing_leave_the_suite_to_the_configuration(tmp_path):
    differ = """\
on: [push]
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
    - run: pytest tests/unit
  b:
    runs-on: ubuntu-latest
    steps:
    - run: pytest tests/integration
"""
    repo = _project(tmp_path / "differ", **{".github/workflows/ci.yml": differ})
    assert ci_pytest_selection(scan_repository(repo), set()) == ([], [])
    whole = differ.replace("pytest tests/integration", "pytest --cov")
    repo = _project(tmp_path / "whole", **{".github/workflows/ci.yml": whole})
    assert ci_pytest_selection(scan_repository(repo), set()) == ([], [])
    same = differ.replace("pytest tests/integration", "python -m pytest -v --cov=demo tests/unit")
    repo = _project(tmp_path / "same", **{".github/workflows/ci.yml": same})
    selection, sources = ci_pytest_selection(scan_repository(repo), set())
    assert selection == ["tests/unit"] and sources[0].file == ".github/workflows/ci.yml"
    assert make_plan(repo, available_pythons=["3.11"], resolve=False).test_command == [
        "python",
        "-m",
        "pytest",
        "tests/unit",
    ]


def test_tox_environments_that_split_the_suite_do_not_narrow_it(tmp_path):
    tox = "[tox]\nenvlist = a,b\n[testenv:a]\ncommands = pytest tests/unit\n[testenv:b]\ncommands = pytest tests/integration\n"
    repo = _project(tmp_path, tox_DOT_ini=tox)
    assert make_plan(repo, available_pythons=["3.11"], resolve=False).test_command == ["python", "-m", "pytest"]


def test_a_name_that_reads_like_ci_provenance_is_only_a_name(tmp_path):
    """Whether CI runs a command, and where, is set by the scanner that read it, not read back
    out of its description: a tox section named like a workflow's recipe is still tox's, and a
    job whose name holds " (in " still runs at the root."""
    tox = "[tox]\nenvlist = x\n[testenv:unit (run by .github/workflows/y.yml:1)]\ncommands = pytest tests/unit\n"
    repo = _project(tmp_path / "tox", tox_DOT_ini=tox)
    [cmd] = [c for c in scan_repository(repo).test_commands if "pytest" in c.argv]
    assert "(run by .github/workflows/" in cmd.source.detail and not cmd.ci
    assert make_plan(repo, available_pythons=["3.11"], resolve=False).test_command == ["python", "-m", "pytest"]
    job = WORKFLOW.replace("make local-test", "pytest tests/unit").replace("make install-dev", "true")
    job = job.replace("  run-tests:\n", "  t (in elsewhere):\n")
    assert "t (in elsewhere):" in job
    repo = _project(tmp_path / "job", **{".github/workflows/ci.yml": job})
    [cmd] = [c for c in scan_repository(repo).test_commands if "pytest" in c.argv]
    assert " (in elsewhere)" in cmd.source.detail and (cmd.ci, cmd.cwd) == (True, "")
    assert ci_pytest_selection(scan_repository(repo), set())[0] == ["tests/unit"]


def test_only_the_selection_is_kept_and_only_what_stays_in_the_repository(tmp_path):
    repo = _project(tmp_path)
    (tmp_path / "tests" / "outside").symlink_to("/etc")  # a link out of the repository is not a test folder
    tree = scan_repository(repo).tree
    argv = [
        "pytest",
        "-n",
        "auto",
        "--cov=demo",
        "--junitxml=out.xml",
        "-x",
        "./tests/unit",
        "tests/unit/test_a.py::test_a",
        "tests/missing",
        "/etc",
        "../outside",
        "-k",
        "not slow",
        "--ignore",
        "tests/integration",
        "--ignore=../x",
        "--deselect=tests/unit/test_a.py::test_a",
        "--timeout=60",
        "tests/outside",
    ]
    assert pytest_selection(argv, tree, set()) == [
        "tests/unit",
        "tests/unit/test_a.py::test_a",
        "-k",
        "not slow",
        "--ignore=tests/integration",
        "--deselect=tests/unit/test_a.py::test_a",
    ]
    # --timeout needs its plugin: without it pytest stops at the unknown option
    assert pytest_selection(["pytest", "--timeout", "60"], tree, {"pytest-timeout"}) == ["--timeout=60"]
    assert pytest_selection(["pytest", "--timeout=x"], tree, {"pytest-timeout"}) == []
    # an expression that is not one pytest reads is not carried into the Dockerfile
    assert pytest_selection(["pytest", "-m", "a; rm -rf /", "-k", "$(id)"], tree, set()) == []
    assert pytest_selection(["pytest", "-m"], tree, set()) == []
    assert pytest_selection(["python", "-m", "pytest", "-m", "fast"], tree, set()) == ["-m", "fast"]


def test_the_targets_of_a_make_line():
    assert make_targets("make local-test") == ["local-test"]
    assert make_targets("make -j 2 VERBOSE=1 test lint") == ["test", "lint"]
    assert make_targets("sudo make check") == ["check"]
    assert make_targets("just test") == ["test"]
    assert make_targets("make -C docs html") == []  # another folder's Makefile
    assert make_targets("python -m pytest") == []
    assert make_targets("make $(TARGET)") == []


def test_a_command_run_in_another_folder_selects_nothing_at_the_root(tmp_path):
    """`cd tests && pytest .` or a job's working-directory: the paths are that folder's."""
    in_folder = """\
on: [push]
jobs:
  tests:
    runs-on: ubuntu-latest
    defaults:
      run:
        working-directory: source/pkg
    steps:
    - run: |
        cd tests
        pytest -vv --import-mode=importlib .
"""
    repo = _project(tmp_path / "wd", **{".github/workflows/ci.yml": in_folder})
    ev = scan_repository(repo)
    [cmd] = [c for c in ev.test_commands if "pytest" in c.argv]
    assert cmd.source.detail.startswith("workflow tests (in source/pkg/tests): pytest")
    assert (cmd.ci, cmd.cwd) == (True, "source/pkg/tests")
    assert ci_pytest_selection(ev, set()) == ([], [])
    step_cd = in_folder.replace("    defaults:\n      run:\n        working-directory: source/pkg\n", "").replace(
        "        cd tests\n        pytest -vv --import-mode=importlib .", "        cd tests && pytest unit"
    )
    repo = _project(tmp_path / "cd", **{".github/workflows/ci.yml": step_cd})
    assert ci_pytest_selection(scan_repository(repo), set()) == ([], [])
    # a make target run in another folder is that folder's Makefile, not the root's
    make_in = in_folder.replace(
        "        cd tests\n        pytest -vv --import-mode=importlib .", "        make local-test"
    )
    repo = _project(tmp_path / "make", **{".github/workflows/ci.yml": make_in, "Makefile": MAKEFILE})
    ev = scan_repository(repo)
    assert ev.ci_targets == [] and not [c for c in ev.test_commands if "pytest" in c.argv]
    # `cd .` stays at the root
    here = step_cd.replace("cd tests && pytest unit", "cd . && pytest tests/unit")
    repo = _project(tmp_path / "here", **{".github/workflows/ci.yml": here})
    assert ci_pytest_selection(scan_repository(repo), set())[0] == ["tests/unit"]


def test_a_checkout_into_a_folder_makes_that_folder_the_root(tmp_path):
    """python-control's CI checks the repository out at python-control/ and runs its tests with
    working-directory: python-control; another repository's checkout beside it is not the root."""
    workflow = """\
on: [push]
jobs:
  build-linux:
    runs-on: ubuntu-latest
    steps:
    - uses: actions/checkout@v3
      with:
        path: python-control
    - uses: actions/checkout@v3
      with:
        repository: python-control/Slycot
        path: slycot
    - working-directory: slycot
      run: pytest tests/unit
    - name: Test with pytest
      working-directory: python-control
      run: pytest -v tests/unit
"""
    repo = _project(tmp_path / "root", **{".github/workflows/ci.yml": workflow})
    details = [(c.source.detail, c.cwd) for c in scan_repository(repo).test_commands if "pytest" in c.argv]
    assert details == [
        ("workflow build-linux (in slycot): pytest tests/unit", "slycot"),
        ("workflow build-linux: pytest -v tests/unit", ""),
    ]
    # slycot's tests are another repository's: they keep the selection from being read
    assert ci_pytest_selection(scan_repository(repo), set()) == ([], [])
    alone = workflow.replace("    - working-directory: slycot\n      run: pytest tests/unit\n", "")
    repo = _project(tmp_path / "alone", **{".github/workflows/ci.yml": alone})
    assert ci_pytest_selection(scan_repository(repo), set())[0] == ["tests/unit"]
