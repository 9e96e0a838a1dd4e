"""The repository's own lock file, installed natively (issue 16).

A project that ships ``uv.lock``, ``poetry.lock``, ``pdm.lock`` or ``Pipfile.lock`` gets its
dependencies installed by the tool that wrote the lock (``uv sync --frozen``, ``poetry install``,
``pdm export``, ``pipenv install --deploy``), so the Dockerfile does not repeat 100+ ``==`` lines
that clash with every Dependabot or Renovate bump.

A lock that no longer satisfies the manifest (a declared dependency missing from it, or locked
at a version outside the declared range) is stale: the plan says so, with the command that
refreshes it, and falls back to resolving the ranges. The check is static: nothing runs on the
host.
"""

from __future__ import annotations

import re

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from bot.evidence.model import ScanWarning
from bot.graph.model import DepGraph

LOCK = "config:lock"
NATIVE_ACTION = "native-lock"
REFRESH = {"uv": "uv lock", "poetry": "poetry lock", "pdm": "pdm lock", "pipenv": "pipenv lock"}
MANIFEST = {"uv": "pyproject.toml", "poetry": "pyproject.toml", "pdm": "pyproject.toml", "pipenv": "Pipfile"}


def marker_env(python: str) -> dict[str, str]:
    """The environment markers of the image: CPython ``python`` (X.Y) on x86_64 Linux."""
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "platform_machine": "x86_64",
        "extra": "",
    }


def excluded_by_marker(spec: str, python: str) -> bool:
    """Whether ``spec``'s environment marker is false on the image's Python, so pip would
    install nothing for it. An unparsable requirement, an unknown Python, a marker naming an
    extra (which one is asked for is not known here) or one that cannot be evaluated is not
    excluded."""
    if not python:
        return False
    try:
        marker = Requirement(spec).marker
        if marker is None or "extra" in str(marker):
            return False
        return not marker.evaluate(marker_env(python))
    except Exception:  # noqa: BLE001 - InvalidRequirement, or a marker naming an unknown variable
        return False


def stale_reason(graph: DepGraph, versions: dict[str, list[str]], manifest: str = "") -> str | None:
    """Why the lock does not satisfy the manifest, or None. Only what the manifest declares is
    checked: imports, repairs and what a noxfile, tox.ini or workflow installs are setupbot's
    additions, not the lock's business. ``manifest``: the file the lock's tool locks (a
    requirement with no evidence from it is skipped; "" checks every declared requirement). A
    requirement whose marker excludes the image's Python is skipped."""
    python = graph.runtime.attrs.get("version", "")
    env = marker_env(python)
    for n in sorted(graph.of_type("PACKAGE"), key=lambda n: n.id):
        if n.action != "pip" or n.attrs.get("source") in ("import", "removed-stdlib") or "spec" not in n.attrs:
            continue
        if manifest and not any(src == manifest for src, *_ in n.evidence):
            continue
        try:
            req = Requirement(n.attrs["spec"])
        except InvalidRequirement:
            continue
        if req.url:
            continue
        try:
            if req.marker is not None and python and not req.marker.evaluate(env):
                continue
        except Exception:  # noqa: BLE001 - an unknown marker variable: check the requirement anyway
            pass
        name = canonicalize_name(req.name)
        locked = versions.get(name)
        if not locked:
            return f"{req.name} is declared but not in the lock"
        if req.specifier and not any(_satisfies(req, v) for v in locked):
            return f"{req.name}{req.specifier} is declared but the lock has {', '.join(locked)}"
    return None


def _satisfies(req: Requirement, version: str) -> bool:
    try:
        return req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return True


# What each tool says when it refuses a lock whose manifest changed since it was written (the
# lock's own content hash, which the static check above does not compute): Poetry, pipenv
# --deploy, uv --locked. The loop then falls back to resolving, as for a stale lock found here.
REFUSED_STALE = re.compile(
    r"pyproject\.toml changed significantly since poetry\.lock was last generated"
    r"|Your Pipfile\.lock \([0-9a-f]+\) is out of date"
    r"|The lockfile at `uv\.lock` needs to be updated"
)


def refused_as_stale(log: str) -> str:
    """The line in which the lock's own tool refused it as out of date; empty when it did not."""
    m = REFUSED_STALE.search(log or "")
    return m.group(0) if m else ""


def drop_stale_lock(graph: DepGraph, why: str) -> ScanWarning | None:
    """Stop using the repository's lock (``why`` it is stale): its pins go, the plan's ranges are
    installed instead, and the returned finding says how to refresh it."""
    node = graph.nodes.get(LOCK)
    tool = node.attrs.get("tool") if node is not None else None
    if node is None or tool not in REFRESH:
        return None
    node.action = None
    node.attrs["stale"] = why
    for n in graph.of_type("PACKAGE"):
        n.attrs.pop("pinned", None)
        n.attrs.pop("lock", None)
    proj = graph.nodes.get("package:@project")
    if proj is not None and proj.attrs.get("install_with") == tool:
        proj.attrs.pop("install_with", None)
    return ScanWarning(
        node.name,
        None,
        f"{node.name} is stale: {why}; it no longer satisfies "
        f"{MANIFEST[tool]}. Refresh it with `{REFRESH[tool]}`; this plan resolves "
        "the ranges instead",
    )


def use_native_lock(graph: DepGraph, warnings: list[ScanWarning]) -> bool:
    """Switch the repository's lock from pins inlined as constraints to a native install, or,
    when it is stale, drop its pins with a finding (the plan then resolves the ranges)."""
    node = graph.nodes.get(LOCK)
    if node is None or node.action != "constraint" or node.attrs.get("tool") not in REFRESH:
        return False
    tool = node.attrs["tool"]
    versions = node.attrs.get("versions") or {k: [v] for k, v in (node.attrs.get("pins") or {}).items()}
    why = stale_reason(graph, versions, MANIFEST[tool])
    if why:
        finding = drop_stale_lock(graph, why)
        if finding is not None:
            warnings.append(finding)
        return False
    node.action = NATIVE_ACTION
    node.attrs["covers"] = sorted(versions)
    node.add_evidence(node.name, None, f"installed with {tool} from the lock, as it is")
    for n in graph.of_type("PACKAGE"):
        n.attrs.pop("pinned", None)  # the tool installs the locked versions itself
    proj = graph.nodes.get("package:@project")
    if proj is not None and tool in ("poetry", "pdm", "uv"):
        proj.attrs["install_with"] = tool
    return True


def native_lock(graph: DepGraph):
    node = graph.nodes.get(LOCK)
    return node if node is not None and node.action == NATIVE_ACTION else None
