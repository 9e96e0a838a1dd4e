"""The mutation check: break the project's main module on purpose, in a throwaway container of
the built image, and confirm that the tests now fail. Tests that still pass with the package
raising on import do not exercise the installed code, so their passing proves little."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.junit import PASSED, TestResults
from bot.programs import source
from bot.verify.prosecutor import Executor, run, tail

MARKER = "setupbot mutation check"

# Breaks the module on purpose; bot/programs/mutate.py.
MUTATE = source("mutate")


def mutation_check(
    executor: Executor,
    module: str,
    baseline: TestResults,
    run_tests: Callable[[Executor], TestResults],
    python: str = "python",
) -> dict[str, Any]:
    """``executor`` must be a container nobody else uses (it is changed for good).
    Returns {ran, module, path, killed, survivors, note}."""
    out: dict[str, Any] = {"ran": False, "module": module, "killed": None, "survivors": []}
    res = run(executor, [python, "-c", MUTATE, module, MARKER], timeout=60)
    line = next((ln for ln in res.output.splitlines() if ln.startswith("SETUPBOT-MUTATION ")), "")
    path = line[len("SETUPBOT-MUTATION ") :].strip()
    if res.exit_code != 0 or not path or path == "none":
        out["note"] = f"could not locate a source file for {module}: {tail(res.output, 4)}"
        return out
    out["path"] = path
    mutated = run_tests(executor)
    passed_before = {t for t, o in baseline.outcomes.items() if o == PASSED}
    survivors = sorted(t for t in passed_before if mutated.outcomes.get(t) == PASSED)
    out.update(
        ran=True,
        survivors=survivors[:50],
        survivor_count=len(survivors),
        passed_before=len(passed_before),
        passed_after=mutated.passed,
        killed=bool(passed_before) and len(survivors) < len(passed_before) * 0.5,
    )
    out["note"] = (
        f"{len(passed_before) - len(survivors)} of {len(passed_before)} passing tests fail with {module} broken"
    )
    return out
