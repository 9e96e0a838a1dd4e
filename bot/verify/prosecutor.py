"""The prosecutor: a skeptical check of a built environment, independent of the loop that made
it. It runs in a fresh container of the built image (the caller passes an executor for one) and
brings charges, each with the command that showed it and the evidence:

  import_failed        a core dependency (or the project itself) does not import with the
                       configured interpreter
  entry_point_failed   a declared console script or README command does not launch with --help
  lifecycle_incomplete the test run did not finish: no JUnit report, the runner crashed or was
                       interrupted, or it timed out
  pip_check            `pip check` is not clean
  all_skipped          every test was skipped
  no_tests             there are no tests at all
  tests_failed         tests failed (the judge separates the environment's fault from the
                       repository's own assertions)
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.junit import ERROR, FAILED, TestResults
from bot.programs import source
from bot.verify.facts import RepoFacts

CRITICAL = "critical"  # the environment is not usable as set up
MAJOR = "major"  # part of it does not work
MINOR = "minor"  # works, with a blemish

SEVERITY = {
    "import_failed": MAJOR,
    "entry_point_failed": MINOR,
    "lifecycle_incomplete": CRITICAL,
    "pip_check": MINOR,
    "all_skipped": CRITICAL,
    "no_tests": CRITICAL,
    "tests_failed": MAJOR,
}


@dataclass
class Charge:
    id: str
    kind: str
    subject: str  # the module, command, or test(s) charged
    evidence: str  # output that shows it (tail)
    command: list[str] = field(default_factory=list)
    severity: str = MAJOR
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class CommandResult:
    argv: list[str]
    exit_code: int
    output: str
    duration: float = 0.0
    timed_out: bool = False


class Executor(Protocol):
    """What the prosecutor and judge run commands through: a RunnerSession of a fresh container
    from the built image (``bot.engine``), or LocalExecutor for a local interpreter."""

    def exec(
        self, argv: list[str], env: dict[str, str] | None = None, timeout: int = 600, workdir: str | None = None
    ) -> Any: ...


class LocalExecutor:
    """Runs commands on this machine with a given working directory and environment. Used where
    the interpreter to check is local (``setupbot verify --local``) and by the unit tests."""

    def __init__(self, cwd: str | os.PathLike[str], env: dict[str, str] | None = None) -> None:
        self.cwd = str(cwd)
        self.env = dict(env if env is not None else os.environ)

    def exec(
        self, argv: list[str], env: dict[str, str] | None = None, timeout: int = 600, workdir: str | None = None
    ) -> CommandResult:
        start = time.monotonic()
        try:
            proc = subprocess.run(
                argv,
                cwd=workdir or self.cwd,
                env={**self.env, **(env or {})},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                timeout=timeout,
            )
            return CommandResult(list(argv), proc.returncode, proc.stdout, time.monotonic() - start)
        except subprocess.TimeoutExpired as exc:
            out = exc.output.decode(errors="replace") if isinstance(exc.output, bytes) else (exc.output or "")
            return CommandResult(list(argv), 124, out, time.monotonic() - start, timed_out=True)
        except OSError as exc:
            return CommandResult(list(argv), 127, f"{argv[0]}: {exc.strerror}", time.monotonic() - start)


def run(executor: Executor, argv: list[str], timeout: int = 120) -> CommandResult:
    """Run through any executor and normalise the result."""
    r = executor.exec(list(argv), timeout=timeout)
    return CommandResult(
        list(argv),
        int(getattr(r, "exit_code", 1) if getattr(r, "exit_code", None) is not None else 1),
        str(getattr(r, "output", "") or ""),
        float(getattr(r, "duration", 0.0) or 0.0),
        bool(getattr(r, "timed_out", False)),
    )


def tail(text: str, lines: int = 12, chars: int = 2000) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])[-chars:]


# Imports every core distribution's top-level module(s); bot/programs/import_probe.py.
IMPORT_PROBE = source("import_probe")


def check_imports(executor: Executor, facts: RepoFacts, python: str = "python") -> tuple[list[Charge], dict[str, Any]]:
    payload = json.dumps({"dists": [[c.name, c.marker] for c in facts.core], "modules": facts.own_modules})
    argv = [python, "-c", IMPORT_PROBE, payload]
    res = run(executor, argv, timeout=300)
    line = next((ln for ln in res.output.splitlines() if ln.startswith("SETUPBOT-IMPORTS ")), None)
    shown = [python, "-c", "<import probe>", payload]
    if line is None:
        return [
            Charge("import-probe", "import_failed", "(import probe)", tail(res.output), shown, MAJOR, {"crashed": True})
        ], {"exit_code": res.exit_code}
    items = json.loads(line[len("SETUPBOT-IMPORTS ") :])
    charges = []
    for item in items:
        if item["ok"]:
            continue
        own = item["dist"] is None
        subject = item["module"] or item["dist"]
        charges.append(
            Charge(
                f"import:{subject}",
                "import_failed",
                subject,
                item["error"],
                [python, "-c", f"import {item['module']}"]
                if item["module"]
                else [python, "-m", "pip", "show", item["dist"]],
                CRITICAL if own else MAJOR,
                {"dist": item["dist"], "module": item["module"], "own": own},
            )
        )
    return charges, {"checked": len(items), "failed": len(charges)}


def check_entry_points(
    executor: Executor, facts: RepoFacts, python: str = "python"
) -> tuple[list[Charge], dict[str, Any]]:
    commands: list[list[str]] = [[name] for name in sorted(facts.console_scripts)]
    commands += [c for c in facts.readme_commands if c not in commands]
    charges = []
    for cmd in commands[:12]:
        argv = ([python] + cmd[1:] if cmd[0] == "python" else cmd) + ["--help"]
        res = run(executor, argv, timeout=60)
        if res.exit_code == 0 and not res.timed_out:
            continue
        why = "timed out" if res.timed_out else f"exit code {res.exit_code}"
        charges.append(
            Charge(
                f"entry:{' '.join(cmd)}",
                "entry_point_failed",
                " ".join(cmd),
                f"{why}\n{tail(res.output)}",
                argv,
                MINOR,
                {"target": facts.console_scripts.get(cmd[0], ""), "exit_code": res.exit_code},
            )
        )
    return charges, {"checked": len(commands[:12]), "failed": len(charges)}


def check_pip(executor: Executor, python: str = "python") -> tuple[list[Charge], dict[str, Any]]:
    argv = [python, "-m", "pip", "check"]
    res = run(executor, argv, timeout=120)
    if res.exit_code == 0:
        return [], {"clean": True}
    if "No module named pip" in res.output:
        return [], {"clean": None, "note": "pip is not installed in this interpreter"}
    problems = [
        ln.strip()
        for ln in res.output.splitlines()
        if " requires " in ln or " has requirement " in ln or "is not supported" in ln
    ]
    return [Charge("pip-check", "pip_check", "pip check", tail(res.output), argv, MINOR, {"problems": problems})], {
        "clean": False,
        "problems": len(problems),
    }


# pytest exit codes: 0 all passed, 1 some failed, 2 interrupted, 3 internal error, 4 usage
# error, 5 no tests collected. Only 0 and 1 mean the run went through its whole lifecycle.
_COMPLETE_EXIT = (0, 1)


def check_test_run(results: TestResults | None) -> tuple[list[Charge], dict[str, Any]]:
    if results is None:
        return [
            Charge(
                "lifecycle",
                "lifecycle_incomplete",
                "test run",
                "the tests were not run",
                [],
                CRITICAL,
                {"reason": "not run"},
            )
        ], {}
    charges: list[Charge] = []
    reasons = _incomplete_reasons(results)
    if reasons:
        charges.append(
            Charge(
                "lifecycle",
                "lifecycle_incomplete",
                "test run",
                "; ".join(reasons) + ("\n" + tail(results.output_tail) if results.output_tail else ""),
                [],
                CRITICAL,
                {"reasons": reasons, "exit_code": results.exit_code},
            )
        )
    for charge in (_collection_charge(results, reasons), _failed_tests_charge(results)):
        if charge is not None:
            charges.append(charge)
    return charges, results.summary()


def _incomplete_reasons(results: TestResults) -> list[str]:
    """Why the test run did not go through its whole lifecycle; empty when it did."""
    reasons = []
    if results.timed_out:
        reasons.append("the test run timed out")
    if not results.junit_found:
        reasons.append("no JUnit report was written")
    if results.exit_code is not None and results.exit_code not in _COMPLETE_EXIT and results.exit_code != 5:
        reasons.append(f"the runner exited with code {results.exit_code}")
    return reasons


def _collection_charge(results: TestResults, reasons: list[str]) -> Charge | None:
    """The charge when no test was collected or every test was skipped."""
    if results.exit_code == 5 or (results.junit_found and results.total == 0 and not reasons):
        return Charge("no-tests", "no_tests", "test run", "no test was collected", [], CRITICAL, {})
    if results.total and results.skipped == results.total:
        reasons_skipped = sorted({m for t, m in results.messages.items()})[:10]
        return Charge(
            "all-skipped",
            "all_skipped",
            "test run",
            f"all {results.total} tests were skipped\n" + "\n".join(reasons_skipped),
            [],
            CRITICAL,
            {"skip_messages": reasons_skipped},
        )
    return None


def _failed_tests_charge(results: TestResults) -> Charge | None:
    """The charge naming the tests that failed or errored, if any did."""
    failing = sorted(t for t, o in results.outcomes.items() if o in (FAILED, ERROR))
    if not failing:
        return None
    return Charge(
        "tests-failed",
        "tests_failed",
        f"{len(failing)} tests",
        "\n".join(f"{t}: {results.messages.get(t, '')}" for t in failing[:15]),
        [],
        MAJOR,
        {"tests": failing, "messages": {t: results.messages.get(t, "") for t in failing}},
    )


@dataclass
class Prosecution:
    charges: list[Charge]
    checks: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"charges": [c.to_json() for c in self.charges], "checks": self.checks}


def prosecute(
    executor: Executor,
    facts: RepoFacts,
    results: TestResults | None,
    *,
    python: str = "python",
    checks: Iterable[str] = ("imports", "entry_points", "pip", "tests"),
) -> Prosecution:
    """Bring every charge the evidence supports. ``executor`` runs in a fresh container of the
    built image; ``results`` are the test results of the replayed run (with services)."""
    charges: list[Charge] = []
    summary: dict[str, Any] = {}
    wanted = set(checks)
    if "imports" in wanted:
        c, summary["imports"] = check_imports(executor, facts, python)
        charges += c
    if "entry_points" in wanted:
        c, summary["entry_points"] = check_entry_points(executor, facts, python)
        charges += c
    if "pip" in wanted:
        c, summary["pip_check"] = check_pip(executor, python)
        charges += c
    if "tests" in wanted:
        c, summary["tests"] = check_test_run(results)
        charges += c
    return Prosecution(charges, summary)
