"""Resolution with uv (``uv pip compile`` for the chosen Python): catches conflicts and floors
before any container is built. Time-boxed; a failure is a warning and evidence, not a crash."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name


@dataclass
class Resolution:
    ok: bool
    pins: dict[str, str] = field(default_factory=dict)
    error: str = ""
    seconds: float = 0.0
    skipped: str = ""


def uv_compile(requirements: list[str], python: str, timeout: float = 120.0,
               index_url: str | None = None, constraints: list[str] | None = None,
               only_binary: bool = False, exclude_newer: str | None = None) -> Resolution:
    uv = shutil.which("uv")
    if uv is None:
        return Resolution(False, skipped="uv is not installed")
    if not requirements:
        return Resolution(True)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="setupbot-uv-") as tmp:
        req = Path(tmp) / "requirements.in"
        req.write_text("\n".join(requirements) + "\n")
        argv = [uv, "pip", "compile", "--python-version", python, "--no-header", "--no-annotate",
                "--quiet", "--python-platform", "x86_64-unknown-linux-gnu", str(req)]
        if index_url:
            argv[3:3] = ["--index-url", index_url]
        else:
            # The host's private index or mirror (PIP_INDEX_URL, pip.conf, ...): uv reads only
            # its own variables by itself.
            from bot.indexes import host_index_config

            argv[3:3] = host_index_config().uv_args()
        if only_binary:
            argv[3:3] = ["--only-binary", ":all:"]
        if exclude_newer:
            argv[3:3] = ["--exclude-newer", exclude_newer]
        if constraints:
            cons = Path(tmp) / "constraints.txt"
            cons.write_text("\n".join(constraints) + "\n")
            argv[3:3] = ["--constraint", str(cons)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SETUPBOT_")}
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp)
        except subprocess.TimeoutExpired:
            return Resolution(False, error=f"uv pip compile timed out after {timeout:.0f}s", seconds=time.monotonic() - start)
        except OSError as exc:
            return Resolution(False, error=f"uv pip compile could not run: {exc}", seconds=time.monotonic() - start)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip()
        return Resolution(False, error="\n".join(err.splitlines()[-25:]), seconds=elapsed)
    pins = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._\-]*)(?:\[[^\]]*\])?==([^\s;]+)", line.strip())
        if m:
            pins[canonicalize_name(m.group(1))] = m.group(2)
    return Resolution(True, pins, seconds=elapsed)


def names_in_error(error: str, candidates: set[str]) -> list[str]:
    """Distribution names from ``candidates`` that uv's explanation mentions."""
    found = set()
    for word in re.findall(r"[A-Za-z0-9][A-Za-z0-9._\-]*", error):
        c = canonicalize_name(word)
        if c in candidates:
            found.add(c)
    return sorted(found)


_NO_WHEEL = re.compile(r"(?:Because|and) (?:only )?([A-Za-z0-9][A-Za-z0-9._\-]*)(?:==| ?[<>=])[^\s]* (?:has no|have no) (?:usable )?wheels?")
_NO_WHEEL_ALT = re.compile(r"([A-Za-z0-9][A-Za-z0-9._\-]*)==\S+ (?:has no|only has) .*wheel")


def sdist_only(pins: dict[str, str], python: str, timeout: float = 60.0, index_url: str | None = None) -> str | None:
    """The first pinned distribution with no wheel for ``python`` on Linux (it would compile in
    the image), or None. One more resolution with ``--only-binary :all:`` over the exact pins."""
    if not pins:
        return None
    res = uv_compile([f"{n}=={v}" for n, v in sorted(pins.items())], python, timeout=timeout,
                     index_url=index_url, only_binary=True)
    if res.ok or res.skipped:
        return None
    for rx in (_NO_WHEEL, _NO_WHEEL_ALT):
        m = rx.search(res.error)
        if m:
            return canonicalize_name(m.group(1))
    names = names_in_error(res.error, set(pins))
    return names[0] if names else None
