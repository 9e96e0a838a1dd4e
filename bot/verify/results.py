"""The comparison of a test run without sibling services against a run with them: which tests
needed which service (the results themselves are bot.junit.TestResults)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.junit import PASSED, TestResults


@dataclass(frozen=True)
class Attribution:
    """Tests that fail without the siblings and pass with them, by sibling name."""

    needed: Mapping[str, tuple[str, ...]]  # sibling name -> tests
    unattributed: tuple[str, ...]  # fixed by the siblings together, not by one
    fixed: tuple[str, ...]  # all tests fixed by the siblings

    def to_json(self) -> dict[str, Any]:
        return {
            "needed": {k: list(v) for k, v in self.needed.items()},
            "unattributed": list(self.unattributed),
            "fixed": list(self.fixed),
        }


def fixed_by(without: TestResults, with_: TestResults) -> list[str]:
    """Tests that did not pass without and passed with."""
    return sorted(t for t, o in with_.outcomes.items() if o == PASSED and without.outcomes.get(t) != PASSED)


def attribute(
    without: TestResults,
    with_all: TestResults,
    leave_one_out: Mapping[str, TestResults] | None = None,
    names: Iterable[str] = (),
) -> Attribution:
    """Which tests needed which sibling. With one sibling every fixed test is its; with several,
    a run with each sibling left out (``leave_one_out[name]``) tells: a fixed test that fails
    when ``name`` is missing needed ``name``."""
    fixed = fixed_by(without, with_all)
    names = list(names) or list((leave_one_out or {}).keys())
    needed: dict[str, list[str]] = {n: [] for n in names}
    if len(names) == 1:
        needed[names[0]] = list(fixed)
        return Attribution({k: tuple(v) for k, v in needed.items()}, (), tuple(fixed))
    claimed: set[str] = set()
    for name in names:
        run = (leave_one_out or {}).get(name)
        if run is None:
            continue
        for t in fixed:
            if run.outcomes.get(t) != PASSED:
                needed[name].append(t)
                claimed.add(t)
    return Attribution(
        {k: tuple(v) for k, v in needed.items()}, tuple(t for t in fixed if t not in claimed), tuple(fixed)
    )
