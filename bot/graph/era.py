"""The repository's era: the releases that were current when its code was written.

A repository that declares ``faststream`` or ``cryptography>=42`` without an upper bound gets
today's release, and today's release may have removed a module (``faststream.broker``) or
tightened a check the test data does not meet. The era is the reference date (the commit date of
HEAD, or ``target.as_of``); resolving the same requirements with ``uv pip compile
--exclude-newer DATE`` gives the versions the authors tested against. The loop offers them as
``pip_constraint`` repairs, one distribution first, then the whole set, and keeps one only when
the failure it targets goes away.
"""

from __future__ import annotations

import dataclasses
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from bot.graph.resolve import Resolution, uv_compile
from bot.hostenv import host_env


def normalise_date(text: str) -> str:
    """``text`` (ISO 8601 date or timestamp, any offset) as an RFC 3339 UTC timestamp, which is
    what ``uv --exclude-newer`` takes; "" when it is not a date."""
    text = (text or "").strip()
    if not text:
        return ""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return ""
    if when.tzinfo is None:
        # a bare date means the end of that day: releases from that day count
        if len(text) <= 10:
            when = when.replace(hour=23, minute=59, second=59)
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def commit_date(repo: Path, timeout: float = 10.0) -> str:
    """The committer date of HEAD when ``repo`` is a git checkout, else ""."""
    if not (Path(repo) / ".git").exists():
        return ""
    try:
        # the checkout's .git/config is the repository's: nothing it names may run here (no
        # fsmonitor hook, no signature program), and the environment is allow-listed
        proc = subprocess.run(
            [
                "git",
                "-c",
                "core.fsmonitor=false",
                "-c",
                "log.showSignature=false",
                "-c",
                "gpg.program=false",
                "-C",
                str(repo),
                "log",
                "-1",
                "--no-show-signature",
                "--format=%cI",
                "HEAD",
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=host_env({"GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}),
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def reference_date(repo: Path, settings: Any) -> tuple[str, str]:
    """(date, where it came from): ``target.as_of`` first, then the commit date of HEAD."""
    as_of = getattr(getattr(settings, "target", None), "as_of", "") or ""
    if normalise_date(as_of):
        return normalise_date(as_of), "target.as_of"
    found = commit_date(repo)
    if normalise_date(found):
        return normalise_date(found), "the commit date of HEAD"
    return "", ""


@dataclass
class Era:
    """The era resolution of one requirement set, computed once per run and on demand."""

    date: str
    source: str = ""
    python: str = ""
    resolution: Resolution | None = None
    requirements: list[str] = field(default_factory=list)
    # the set did not resolve together; the pins are each requirement's own release of the date
    partial: bool = False
    releases: dict[str, str] = field(default_factory=dict)  # release_of, by canonical name

    @property
    def pins(self) -> dict[str, str]:
        return dict(self.resolution.pins) if self.resolution is not None and self.resolution.ok else {}

    def version_of(self, dist: str) -> str:
        return self.pins.get(canonicalize_name(dist), "")

    def release_of(self, dist: str, timeout: float = 60.0) -> str:
        """The newest release of ``dist`` before the date that installs on the Python from a
        wheel, resolved alone: what "current on that date" means for one distribution. The
        set's pin can be older: on the host nothing is built, so a newer release whose extra
        needs an sdist (faststream[nats] and nats-py) is passed over for one from a year before.
        Empty when uv cannot say."""
        key = canonicalize_name(dist)
        if self.partial:
            return self.version_of(key)
        if key not in self.releases:
            res = uv_compile([key], self.python, timeout=timeout, exclude_newer=self.date, no_deps=True)
            self.releases[key] = res.pins.get(key, "") if res.ok else ""
        return self.releases[key]

    def drifted(self, current: dict[str, str]) -> dict[str, str]:
        """Distributions whose era version differs from ``current`` (name -> era version); a
        distribution without a current version counts as drifted."""
        out = {}
        for name, version in self.pins.items():
            if current.get(name) != version:
                out[name] = version
        return out


def resolve_era(
    requirements: list[str],
    python: str,
    date: str,
    source: str = "",
    timeout: float = 120.0,
    index_url: str | None = None,
) -> Era:
    era = Era(date=date, source=source, python=python, requirements=sorted(set(requirements)))
    if date and requirements:
        era.resolution = uv_compile(era.requirements, python, timeout=timeout, index_url=index_url, exclude_newer=date)
        if not era.resolution.ok:
            # The set does not resolve without building (the host builds nothing: a dependency
            # of that era may have only an sdist, as cf-units and cftime had in June 2024).
            # Each requirement's own release of that date still answers "which release was
            # current", which is what an era pin for one named distribution needs.
            alone = uv_compile(
                era.requirements, python, timeout=timeout, index_url=index_url, exclude_newer=date, no_deps=True
            )
            if alone.ok and alone.pins:
                why = "resolved each requirement alone (--no-deps): " + (era.resolution.error or "")[-500:]
                era.resolution = dataclasses.replace(alone, error=why)
                era.partial = True
    return era
