"""Choosing the Python version: hard constraints (requires-python, lock files) must hold; among
the versions that satisfy them prefer a developer's pin, then the newest version the project
tests (CI matrix, classifiers, tox, nox), then the newest available."""

from __future__ import annotations

from dataclasses import dataclass, field

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from bot.evidence.model import PythonConstraint, ScanWarning

# The official image's supported tags (bot.engine.sources.REGISTRY_PYTHONS says the same).
OFFICIAL_PYTHONS = ["3.9", "3.10", "3.11", "3.12", "3.13", "3.14"]
# the day each CPython series had its first final release (python.org): code written before it
# was never run on that series, nor were the releases it depends on built for it
PYTHON_RELEASED = {
    "3.6": "2016-12-23",
    "3.7": "2018-06-27",
    "3.8": "2019-10-14",
    "3.9": "2020-10-05",
    "3.10": "2021-10-04",
    "3.11": "2022-10-24",
    "3.12": "2023-10-02",
    "3.13": "2024-10-07",
    "3.14": "2025-10-07",
    "3.15": "2026-10-01",
}


@dataclass
class RuntimeChoice:
    version: str
    satisfied: bool
    reason: str
    used: list[PythonConstraint] = field(default_factory=list)
    warnings: list[ScanWarning] = field(default_factory=list)


def _key(v: str) -> Version:
    return Version(v)


def series_allows(spec: SpecifierSet, version: str) -> bool:
    # "3.12" stands for the whole minor series (python:3.12-slim carries a late patch release):
    # the series is allowed when its first or a late patch release is.
    return spec.contains(f"{version}.0", prereleases=True) or spec.contains(f"{version}.99", prereleases=True)


def choose_python(
    constraints: list[PythonConstraint],
    available: list[str],
    ceilings: list[tuple[str, str]] | None = None,
    era: tuple[str, str] = ("", ""),
) -> RuntimeChoice:
    """``ceilings``: soft upper bounds (version, why), e.g. a removed stdlib module the code
    imports; honoured when a version below them satisfies the hard constraints. ``era``: (date,
    where it came from), the code's reference date; when nothing the project states chooses,
    the newest offered series released by then, not one that came later."""
    if not available:
        raise ValueError("choose_python needs at least one available Python version")
    available = sorted(set(available), key=_key)
    warnings: list[ScanWarning] = []
    hard = _hard_constraints(constraints, warnings)
    ok = [v for v in available if all(series_allows(s, v) for s, _ in hard)]
    if not ok:
        return _unsatisfiable(hard, available, warnings)
    used = [c for _, c in hard]
    pins = [c for c in constraints if c.kind == "pin" and c.value in ok]
    if pins:
        # .python-version over a Dockerfile or conda pin: the first pin in scan order wins
        return RuntimeChoice(pins[0].value, True, f"pinned by {pins[0].source.short()}", used + [pins[0]], warnings)
    candidates = ok
    for version, _why in ceilings or []:
        below = [v for v in candidates if _key(v) < _key(version)]
        if below:
            candidates = below
    nearest = _nearest_to_pin(constraints, candidates, warnings)
    if nearest is not None:
        pin, version = nearest
        why = f"nearest offered to Python {pin.value}, pinned by {pin.source.short()}"
        return RuntimeChoice(version, True, why, used + [pin], warnings)
    kept_below = f" (kept below {ceilings[0][0]}: {ceilings[0][1]})" if ceilings and candidates != ok else ""
    return _prefer_tested(constraints, candidates, used, warnings, kept_below, era)


def _nearest_to_pin(
    constraints: list[PythonConstraint], candidates: list[str], warnings: list[ScanWarning]
) -> tuple[PythonConstraint, str] | None:
    """A pin (.python-version, ...) whose version is not offered or not allowed: the allowed
    version nearest to it (the newer one on a tie), since that is the closest to what its
    developers run -- and to what their lock's wheels were made for. Each such pin is a
    warning; the first one in scan order chooses."""
    chosen: tuple[PythonConstraint, str] | None = None
    for c in constraints:
        if c.kind != "pin":
            continue
        try:
            pinned = _key(c.value)
        except ValueError:
            continue
        near = min(
            candidates,
            key=lambda v: (abs(_key(v).minor - pinned.minor) + 100 * abs(_key(v).major - pinned.major), -_key(v).minor),
        )
        warnings.append(
            ScanWarning(
                c.source.file,
                c.source.line,
                f"Python {c.value} is pinned but not offered here or not allowed; the nearest offered, {near}, is used",
            )
        )
        chosen = chosen or (c, near)
    return chosen


def _hard_constraints(
    constraints: list[PythonConstraint], warnings: list[ScanWarning]
) -> list[tuple[SpecifierSet, PythonConstraint]]:
    """The readable ``requires`` constraints as specifier sets; an unreadable one is a warning."""
    hard: list[tuple[SpecifierSet, PythonConstraint]] = []
    for c in constraints:
        if c.kind != "requires":
            continue
        try:
            hard.append((SpecifierSet(c.value.replace(" ", "")), c))
        except InvalidSpecifier:
            warnings.append(
                ScanWarning(c.source.file, c.source.line, f"cannot read Python requirement {c.value!r}; ignored")
            )
    return hard


def _unsatisfiable(
    hard: list[tuple[SpecifierSet, PythonConstraint]], available: list[str], warnings: list[ScanWarning]
) -> RuntimeChoice:
    """The choice when no available version satisfies the hard constraints: said in a warning
    and flagged unsatisfied."""
    text = ", ".join(f"{c.value} ({c.source.short()})" for _, c in hard)
    warnings.append(
        ScanWarning(
            hard[0][1].source.file if hard else ".",
            hard[0][1].source.line if hard else None,
            f"no available Python ({', '.join(available)}) satisfies {text}",
        )
    )
    # the nearest version in the direction of the floor, flagged MISSING: never a silent guess
    floor_above = all(s.contains("3.40.0") for s, _ in hard)
    version = available[-1] if floor_above else available[0]
    return RuntimeChoice(version, False, f"unsatisfiable: {text}", [c for _, c in hard], warnings)


def _prefer_tested(
    constraints: list[PythonConstraint],
    candidates: list[str],
    used: list[PythonConstraint],
    warnings: list[ScanWarning],
    kept_below: str,
    era: tuple[str, str] = ("", ""),
) -> RuntimeChoice:
    """Among the allowed ``candidates`` (oldest first): the newest the project tests; else the
    newest not above what it tests, or the closest to it; else the newest that existed at the
    ``era`` date (the oldest when none did); else the newest. ``kept_below`` says why a ceiling
    narrowed the candidates, for the last case."""
    tested = sorted({c.value for c in constraints if c.kind == "tested"}, key=_key)
    tested_ok = [v for v in candidates if v in tested]
    if tested_ok:
        v = tested_ok[-1]
        srcs = [c for c in constraints if c.kind == "tested" and c.value == v]
        return RuntimeChoice(v, True, f"newest tested version ({srcs[0].source.short()})", used + srcs[:2], warnings)
    if tested:
        newest_tested = tested[-1]
        # don't go above what the project tests when an older tested-ish version is available
        not_above = [v for v in candidates if _key(v) <= _key(newest_tested)]
        if not_above:
            return RuntimeChoice(
                not_above[-1], True, f"newest available not above tested {newest_tested}", used, warnings
            )
        # everything offered is newer than what the project tests: stay as close as possible
        return RuntimeChoice(candidates[0], True, f"closest available to the tested {newest_tested}", used, warnings)
    reason = "newest available satisfying " + (", ".join(c.value for c in used) if used else "no stated constraint")
    day, source = era[0][:10], era[1]
    if day:
        existed = [v for v in candidates if PYTHON_RELEASED.get(v, "9999") <= day]
        version = existed[-1] if existed else candidates[0]
        if version != candidates[-1]:
            later = candidates[-1]
            when = f"{day}, {source}" if source else day
            satisfying = f", satisfying {', '.join(c.value for c in used)}" if used else ""
            why = (
                f"newest offered that existed when the code was written ({when}; "
                f"{later} came out {PYTHON_RELEASED.get(later, 'later')}){satisfying}"
                if existed
                else f"oldest offered: every offered Python came out after the code was written ({when}){satisfying}"
            )
            return RuntimeChoice(version, True, why + kept_below, used, warnings)
    return RuntimeChoice(candidates[-1], True, reason + kept_below, used, warnings)
