"""Determinism check (issue 16): is the produced Dockerfile reproducible? It is built a second
time with no cache, later in the run than the image that was scored, and the two images'
package sets are compared: ``pip freeze --all`` and ``dpkg-query -W``. The bench summary gives
the share of repositories whose sets are identical."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PIP_FREEZE = ["python", "-m", "pip", "freeze", "--all"]
DPKG_LIST = ["dpkg-query", "-W", "-f", "${Package}=${Version}\\n"]


@dataclass
class PackageSets:
    pip: list[str] = field(default_factory=list)
    dpkg: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def _lines(output: str) -> list[str]:
    # pip's own notices ("[notice] A new release of pip...") are not part of the set
    return sorted(
        {
            ln.strip()
            for ln in output.splitlines()
            if ln.strip() and not ln.startswith("[") and not ln.lower().startswith(("warning", "debug"))
        }
    )


def package_sets(engine: Any, image: str, timeout: float = 300) -> PackageSets:
    """The image's Python and Debian package sets, read in a throwaway container with no network."""
    pip = engine.run_once(image, PIP_FREEZE, timeout=timeout)
    if not pip.ok:
        return PackageSets(error=f"pip freeze exited {pip.exit_code}: {pip.output.strip()[-200:]}")
    dpkg = engine.run_once(image, DPKG_LIST, timeout=timeout)
    if not dpkg.ok:
        return PackageSets(error=f"dpkg-query exited {dpkg.exit_code}: {dpkg.output.strip()[-200:]}")
    return PackageSets(_lines(pip.output), _lines(dpkg.output))


def compare(first: PackageSets, second: PackageSets) -> dict[str, Any]:
    """The record's ``determinism`` entry: identical or not, and what differs (first → second)."""
    if not first.ok or not second.ok:
        return {"identical": None, "error": first.error or second.error}
    pip_diff = sorted(set(first.pip) ^ set(second.pip))
    dpkg_diff = sorted(set(first.dpkg) ^ set(second.dpkg))
    return {
        "identical": not pip_diff and not dpkg_diff,
        "pip_count": len(first.pip),
        "dpkg_count": len(first.dpkg),
        "pip_differs": [f"{'-' if x in first.pip else '+'}{x}" for x in pip_diff][:20],
        "dpkg_differs": [f"{'-' if x in first.dpkg else '+'}{x}" for x in dpkg_diff][:20],
    }


def check_determinism(engine: Any, context: Path, dockerfile_text: str, first_image: str, tag: str) -> dict[str, Any]:
    """Rebuild ``dockerfile_text`` with no cache as ``tag`` and compare its package sets with
    ``first_image`` (the image built earlier from the same Dockerfile)."""
    started = time.monotonic()
    first = package_sets(engine, first_image)
    build = engine.build(context, dockerfile_text, tag, no_cache=True)
    if not build.ok:
        return {
            "identical": False,
            "error": "the second build failed: " + " ".join(build.log.strip().splitlines()[-2:])[-300:],
            "seconds": round(time.monotonic() - started, 1),
        }
    result = compare(first, package_sets(engine, tag))
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def identical_share(records: list[dict], system: str = "setupbot") -> tuple[int, int]:
    """(identical, checked) over the records of ``system`` that have a determinism result."""
    checked = [
        r["determinism"]
        for r in records
        if r.get("system") == system
        and isinstance(r.get("determinism"), dict)
        and r["determinism"].get("identical") is not None
    ]
    return sum(1 for d in checked if d["identical"]), len(checked)
