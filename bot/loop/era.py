"""The repository's era: pins to the releases current at its reference date, as repair
candidates."""

from __future__ import annotations

import re
import time
from typing import Any

from bot.atoms import Atom
from bot.graph.era import reference_date, resolve_era
from bot.graph.specs import install_specs
from bot.loop.diagnose import Signature
from bot.loop.repair import Candidate, distribution_for
from bot.loop.state import LoopBase

# distributions that sdists need to build (build isolation): never pinned as part of an era set
BUILD_TOOLS = frozenset(
    {
        "pip",
        "setuptools",
        "wheel",
        "packaging",
        "setuptools-scm",
        "vcs-versioning",
        "cython",
        "hatchling",
        "hatch-vcs",
        "hatch-fancy-pypi-readme",
        "flit-core",
        "poetry-core",
        "pdm-backend",
        "meson-python",
        "meson",
        "ninja",
        "scikit-build-core",
        "scikit-build",
        "pybind11",
        "cffi",
        "pycparser",
        "tomli",
        "trove-classifiers",
        "pathspec",
        "pluggy",
        "setuptools-rust",
        "maturin",
        "versioneer",
        "extension-helpers",
        "cmake",
    }
)


_BUILDING = re.compile(
    r"(?:Failed building wheel for|Failed to build|Building wheel for|"
    r"Preparing metadata \(pyproject\.toml\)[^\n]*?for|Collecting) ([A-Za-z0-9][\w.\-]*)"
)


def failed_builds(log_text: str) -> list[str]:
    """The distributions pip was building when a native build failed, last first (the one that
    failed is the last one pip started)."""
    matches = list(_BUILDING.finditer(log_text or ""))
    names = []
    for i, m in enumerate(matches):
        # the output between this distribution's line and the next one is its own
        end = matches[i + 1].start() if i + 1 < len(matches) else len(log_text)
        if re.search(r"error", log_text[m.end() : end], re.I):
            names.append(m.group(1))
    return list(dict.fromkeys(reversed(names)))[:3]


class EraMixin(LoopBase):
    """Era pins for the signatures a newer release explains."""

    ERA_KINDS = {
        "dependency_error",
        "import_name_error",
        "module_attribute",
        "missing_module",
        "wheel_build_failed",
        "collection_error",
        # a pytest plugin and pytest from different eras: the era releases of both
        "plugin_hook_mismatch",
        # tests that fail on their own assertions: the whole era set, tried once (SetupLoop.drift_step)
        "assertion_drift",
    }
    # a native build that fails for want of a library: a release from the repository's era may
    # build against the libraries this Debian has (pygobject 3.48 needs girepository-1.0, 3.52
    # girepository-2.0)
    ERA_BUILD_KINDS = {"missing_pkg_config_module", "missing_header", "missing_shared_lib"}

    def _era(self) -> Any:
        """The era resolution of the graph's requirements (once per Python), or None when the
        run has no reference date."""
        cache = self._era_cache
        if cache is not None and cache.python == self.python:
            return cache
        date, source = reference_date(self.repo, self.settings)
        if not date:
            return None

        t0 = time.monotonic()
        era = resolve_era(install_specs(self.graph), self.python, date, source)
        res = era.resolution
        self.traj.record(
            "era",
            command=["uv", "pip", "compile", "--exclude-newer", date],
            duration=time.monotonic() - t0,
            outcome="ok" if era.pins else "failed",
            output_tail=(res.error if res is not None else "")[-2000:],
            detail={"date": date, "source": source, "pins": len(era.pins)},
        )
        self._era_cache = era
        return era

    def _current_pins(self) -> dict[str, str]:
        pins = dict((self.graph.meta.get("resolution") or {}).get("pins") or {})
        for n in self.graph.of_type("PACKAGE"):
            if n.attrs.get("resolved"):
                pins.setdefault(n.name, n.attrs["resolved"])
        return pins

    def era_candidates(self, sig: Signature, log_text: str = "") -> list[Candidate]:
        """Pins to the releases current at the repository's reference date: first the one
        distribution the signature names (when its era release differs from what is installed),
        then every distribution whose era release differs."""
        building: list[str] = []
        if sig.kind in self.ERA_BUILD_KINDS:
            building = failed_builds(log_text)
            if not building:
                return []
        elif sig.kind not in self.ERA_KINDS:
            return []
        if sig.kind == "missing_module" and "." not in sig.message.split("No module named", 1)[-1].strip(" '\""):
            return []  # a plain missing module is an install, not a newer release
        era = self._era()
        if era is None or not era.pins:
            return []
        from packaging.utils import canonicalize_name

        current = self._current_pins()
        drifted = era.drifted(current)
        out: list[Candidate] = []
        names = (
            [canonicalize_name(b) for b in building]
            if building
            else [canonicalize_name(sig.key if sig.kind == "wheel_build_failed" else distribution_for(sig.key))]
            if sig.key
            else []
        )
        for dist in names:
            out += _named_era_pins(era, dist, drifted.get(dist, ""), current.get(dist, ""))
        whole = _whole_era(era, drifted)
        return out + ([whole] if whole is not None else [])

    def era_pin_candidate(self, dists: list[str]) -> Candidate | None:
        """The releases current at the repository's reference date for ``dists`` (the linters
        whose rules its files fail), those of them installed newer. None when none drifted."""
        era = self._era()
        if era is None or not era.pins:
            return None
        drifted = era.drifted(self._current_pins())
        specs = [f"{d}=={drifted[d]}" for d in dists if d in drifted]
        if not specs:
            return None
        return Candidate(
            [Atom("pip_constraint", {"constraints": specs})],
            "rule",
            why=f"{', '.join(specs)} current on {era.date[:10]} ({era.source}); newer releases add rules",
        )

    def whole_era_candidate(self) -> Candidate | None:
        """The releases current at the repository's reference date for every distribution
        installed newer: the one trial ``drift_step`` and the last generic strategy make. None
        without a reference date or when nothing drifted."""
        era = self._era()
        if era is None or not era.pins:
            return None
        return _whole_era(era, era.drifted(self._current_pins()))


def _named_era_pins(era: Any, dist: str, in_set: str, was: str) -> list[Candidate]:
    """Pins of the one distribution a failure names: its own newest release of the date first,
    then the release the whole era set resolved it to, when that differs (the set may hold it
    back). None that is what is installed."""
    if not in_set:
        return []  # not in the era set, or installed at its era release already
    own = era.release_of(dist)
    newer = f"; {was} is newer than the repository" if was else ""
    out = []
    if own and own != was and own != in_set:
        out.append(
            Candidate(
                [Atom("pip_constraint", {"constraints": [f"{dist}=={own}"]})],
                "rule",
                why=f"{dist} {own} was its newest release on {era.date[:10]} ({era.source}){newer}",
            )
        )
    held = f" with the rest of the requirements as of {era.date[:10]}" if out else ""
    out.append(
        Candidate(
            [Atom("pip_constraint", {"constraints": [f"{dist}=={in_set}"]})],
            "rule",
            why=f"{dist} {in_set} was current{held or ' on ' + era.date[:10]} ({era.source}){newer}",
        )
    )
    return out


def _whole_era(era: Any, drifted: dict[str, str]) -> Candidate | None:
    # PIP_CONSTRAINT reaches the isolated build environments too: pinning the packaging tools
    # there breaks sdists whose build needs a newer one (python-pkcs11's setuptools-scm wants
    # packaging>=26.2), so the whole-era set leaves them alone
    drifted_all = {n: v for n, v in drifted.items() if n not in BUILD_TOOLS}
    if not drifted_all:
        return None
    specs = [f"{n}=={v}" for n, v in sorted(drifted_all.items())]
    return Candidate(
        [Atom("pip_constraint", {"constraints": specs})],
        "rule",
        why=f"the releases current on {era.date[:10]} ({era.source}) for "
        f"{len(specs)} distribution(s) newer than the repository",
    )
