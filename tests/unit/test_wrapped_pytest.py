"""A test command that runs pytest inside a wrapper (``make test``, ``sh -c '... pytest'``, a
script): an option appended to the wrapper never reaches pytest, so the JUnit report is asked
for through pytest's own PYTEST_ADDOPTS. Before, such a run read as "no test results" and the
verdict was Shallow, whatever the tests did."""

from __future__ import annotations

import sys
from pathlib import Path

from bot.junit import JUNIT_PATH, junit_env, runs_pytest
from bot.verify.prosecutor import LocalExecutor
from bot.verify.run import run_tests, verification_argv


def test_pytest_itself_is_told_from_a_wrapper():
    assert runs_pytest(["python", "-m", "pytest", "-x"]) and runs_pytest(["/venv/bin/pytest"])
    assert runs_pytest(["uv", "run", "pytest"]) and runs_pytest(["py.test"])
    # an option appended to these goes to the wrapper (or becomes the script's $0)
    for wrapper in (["make", "test"], ["tox", "-e", "py"], ["sh", "-c", "pytest"], ["bash", "-c", "cd src && pytest"]):
        assert not runs_pytest(wrapper), wrapper
        assert verification_argv(wrapper) == wrapper


def test_a_wrapper_gets_the_report_through_pytest_addopts_and_the_repositorys_own_is_kept():
    want = f"--junitxml={JUNIT_PATH}"
    assert junit_env(["make", "test"], {}) == {"PYTEST_ADDOPTS": want}
    assert junit_env(["make", "test"], {"PYTEST_ADDOPTS": "-x -q"}) == {"PYTEST_ADDOPTS": f"-x -q {want}"}
    assert junit_env(["make", "test"], {"PYTEST_ADDOPTS": "--junitxml=/elsewhere.xml"}) == {}
    # pytest itself gets it on its command line; unittest and Django write no JUnit at all
    assert junit_env(["python", "-m", "pytest"], {}) == {}
    assert junit_env(["python", "-m", "unittest", "discover"], {}) == {}
    assert junit_env(["python", "manage.py", "test"], {}) == {}


class _OwnReportPath(LocalExecutor):
    """A real local run whose report goes to this test's own folder, not the shared path (other
    tests may run at once)."""

    def __init__(self, cwd: Path, report: Path) -> None:
        super().__init__(cwd)
        self.report = str(report)
        self.envs: list[dict[str, str]] = []

    def exec(self, argv, env=None, timeout=600, workdir=None, changes=True):
        self.envs.append(dict(env or {}))
        argv = [a.replace(JUNIT_PATH, self.report) for a in argv]
        env = {k: v.replace(JUNIT_PATH, self.report) for k, v in (env or {}).items()}
        return super().exec(argv, env=env, timeout=timeout, workdir=workdir)


def test_a_real_pytest_inside_a_shell_wrapper_writes_the_report_the_run_reads(tmp_path):
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_it.py").write_text(
        "def test_ok():\n    assert True\n\ndef test_bad():\n    assert 1 == 2\n"
    )
    executor = _OwnReportPath(repo, tmp_path / "report.xml")
    command = ["sh", "-c", f"echo preparing && {sys.executable} -m pytest -q -p no:cacheprovider tests"]
    results = run_tests(executor, command, timeout=120, env={"PYTEST_ADDOPTS": "-rA"})
    assert results.junit_found and results.exit_code == 1
    assert results.outcomes == {"tests.test_it::test_ok": "passed", "tests.test_it::test_bad": "failed"}
    ran = [e for e in executor.envs if "PYTEST_ADDOPTS" in e]
    assert ran == [{"PYTEST_ADDOPTS": f"-rA --junitxml={JUNIT_PATH}"}]
