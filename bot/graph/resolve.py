"""Resolution with uv (``uv pip compile`` for the chosen Python): catches conflicts and floors
before any container is built. Time-boxed; a failure is a warning and evidence, not a crash."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as PkgReq
from packaging.utils import canonicalize_name

from bot.hostenv import host_env
from bot.indexes import host_index_config


@dataclass
class Resolution:
    ok: bool
    pins: dict[str, str] = field(default_factory=dict)
    error: str = ""
    seconds: float = 0.0
    skipped: str = ""
    # requirements kept away from the host (direct URL, path, VCS, options): (line, why)
    refused: list[tuple[str, str]] = field(default_factory=list)
    # distributions with no usable wheel: resolution would have to build them, which happens
    # only inside the runner container
    unbuilt: list[str] = field(default_factory=list)


# A build backend is code from the repository or from whoever uploaded the sdist: the host never
# runs one (SECURITY.md S12). Only plain "name[extras] specifier ; marker" lines from the
# configured index reach uv on the host; everything else is installed and resolved in the image.
def host_safe(lines: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """(lines uv may resolve on the host, [(line, why it was kept away)])."""
    safe: list[str] = []
    refused: list[tuple[str, str]] = []
    for raw in lines:
        line = str(raw).strip()
        if not line:
            continue
        if any(ord(c) < 32 or ord(c) == 127 for c in line):
            refused.append((line, "control character"))
            continue
        if line.startswith("-"):
            refused.append((line, "pip option (index, links, editable or included file)"))
            continue
        try:
            req = PkgReq(line)
        except InvalidRequirement:
            refused.append((line, "not a PEP 508 requirement (a path or archive)"))
            continue
        if req.url:
            refused.append((line, "direct URL, path or VCS requirement"))
            continue
        safe.append(line)
    return safe, refused


# a name, then uv's marker in braces (evdev{'linux' in sys_platform}>=1.3.0), then a version
_UNBUILT = re.compile(
    r"(?:all versions of |only )?(?<![\w.=<>!~}-])([A-Za-z0-9][A-Za-z0-9._\-]*)(?:\{[^}]*\})?"
    r"(?:[=<>!~]=?[^\s]*)? (?:has|have) no usable wheels"
)
_MAX_UNBUILT_RETRIES = 8


# Resolutions are cached on disk, keyed by a hash of everything the resolver is given (issue 16):
# planning the same inputs again takes no network round trips. A day is long enough to make
# repeated runs cheap and short enough that new releases are still seen; --refresh-lock skips it.
CACHE_SECONDS = 24 * 3600


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "setupbot" / "resolutions"


def resolution_key(requirements: list[str], python: str, **options: object) -> str:
    data = {
        "requirements": list(requirements),
        "python": python,
        **{k: v for k, v in sorted(options.items()) if v not in (None, False, [], "")},
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:40]


def read_entry(key: str) -> dict[str, Any] | None:
    """The cached entry with this key, when it is from the last day (``CACHE_SECONDS``); None
    when there is none, it is older or it cannot be read. Shared by every resolution kept here."""
    try:
        data = json.loads((cache_dir() / f"{key}.json").read_text())
        if not isinstance(data, dict) or time.time() - float(data["at"]) > CACHE_SECONDS:
            return None
        return data
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_entry(key: str, data: dict[str, Any]) -> None:
    """Keep ``data`` under ``key``, stamped with the time; written whole, then renamed, so a
    reader never sees half an entry and two runs writing one key do not mix."""
    try:
        folder = cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{key}.{os.getpid()}"
        tmp.write_text(json.dumps({**data, "at": time.time()}))
        tmp.replace(folder / f"{key}.json")
    except OSError:
        pass  # a cache that cannot be written only costs time


def _cached(key: str) -> Resolution | None:
    data = read_entry(key)
    if data is None:
        return None
    try:
        return Resolution(bool(data["ok"]), dict(data["pins"]), str(data["error"]), 0.0)
    except (ValueError, KeyError, TypeError):
        return None


def _store(key: str, res: Resolution) -> None:
    write_entry(key, {"ok": res.ok, "pins": res.pins, "error": res.error})


def uv_compile(
    requirements: list[str],
    python: str,
    timeout: float = 120.0,
    index_url: str | None = None,
    constraints: list[str] | None = None,
    only_binary: bool = False,
    exclude_newer: str | None = None,
    use_cache: bool = True,
    no_deps: bool = False,
) -> Resolution:
    """Resolve on the host without building anything: requirements that are not plain index
    requirements are left out (``refused``), and a distribution that only an sdist could satisfy
    is left out and the resolution retried (``unbuilt``); both are resolved in the image."""
    uv = shutil.which("uv")
    if uv is None:
        return Resolution(False, skipped="uv is not installed")
    safe, refused = host_safe(requirements)
    safe_constraints, refused_c = host_safe(constraints or [])
    refused += refused_c
    unbuilt: list[str] = []
    removed: list[str] = []
    total = 0.0
    for _ in range(_MAX_UNBUILT_RETRIES):
        res = _uv_compile_once(
            uv,
            safe,
            python,
            timeout,
            index_url,
            safe_constraints,
            only_binary,
            exclude_newer,
            use_cache=use_cache,
            no_deps=no_deps,
            removed=removed,
        )
        total += res.seconds
        names = _unbuilt_names(res.error) if not res.ok else []
        direct = {canonicalize_name(PkgReq(r).name) for r in safe}
        drop = [n for n in names if n in direct]
        # a dependency of a dependency with no wheel (antlr4-python3-runtime under hydra-core):
        # an override with a marker that never holds takes it out of the resolution, so the rest
        # still gets its pins; it is resolved and built in the image, under its dependents' ranges
        deeper = [n for n in names if n not in direct and n not in removed]
        if only_binary or not (drop or deeper):
            if names and not drop:
                unbuilt += names
            break
        unbuilt += drop + deeper
        removed += deeper
        safe = [r for r in safe if canonicalize_name(PkgReq(r).name) not in drop]
        safe_constraints = [r for r in safe_constraints if canonicalize_name(PkgReq(r).name) not in drop + deeper]
    res.seconds = total
    res.refused = refused
    res.unbuilt = sorted(set(unbuilt))
    return res


def _unbuilt_names(error: str) -> list[str]:
    if "--no-build" not in error and "no usable wheels" not in error:
        return []
    return sorted({canonicalize_name(m.group(1)) for m in _UNBUILT.finditer(error)})


def _uv_compile_once(
    uv: str,
    requirements: list[str],
    python: str,
    timeout: float,
    index_url: str | None,
    constraints: list[str],
    only_binary: bool,
    exclude_newer: str | None,
    *,
    use_cache: bool = True,
    no_deps: bool = False,
    removed: list[str] | None = None,
) -> Resolution:
    if not requirements:
        return Resolution(True)
    # the host's index configuration is an input too: another index may offer other releases
    key = resolution_key(
        requirements,
        python,
        index_url=index_url,
        constraints=constraints,
        only_binary=only_binary,
        exclude_newer=exclude_newer,
        # --no-deps resolves each requirement alone: another answer for the same inputs
        host_index=host_index_config().uv_args() + (["--no-deps"] if no_deps else []),
        removed=sorted(removed or []),
    )
    if use_cache:
        hit = _cached(key)
        if hit is not None:
            return hit
    res = _uv_compile(
        uv, requirements, python, timeout, index_url, constraints, only_binary, exclude_newer, no_deps, removed or []
    )
    # a timeout or a uv that did not run says nothing about the inputs: not cached
    if res.ok or (res.error and "timed out" not in res.error and "could not run" not in res.error):
        _store(key, res)
    return res


def _uv_compile(
    uv: str,
    requirements: list[str],
    python: str,
    timeout: float,
    index_url: str | None,
    constraints: list[str] | None,
    only_binary: bool,
    exclude_newer: str | None,
    no_deps: bool = False,
    removed: list[str] | None = None,
) -> Resolution:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="setupbot-uv-") as tmp:
        argv = _compile_argv(
            uv, Path(tmp), requirements, python, index_url, constraints, only_binary, exclude_newer, no_deps, removed
        )
        env = host_env()
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp)
        except subprocess.TimeoutExpired:
            return Resolution(
                False, error=f"uv pip compile timed out after {timeout:.0f}s", seconds=time.monotonic() - start
            )
        except OSError as exc:
            return Resolution(False, error=f"uv pip compile could not run: {exc}", seconds=time.monotonic() - start)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip()
        return Resolution(False, error="\n".join(err.splitlines()[-25:]), seconds=elapsed)
    return Resolution(True, _compiled_pins(proc.stdout), seconds=elapsed)


# uv on the host only reads the index: the target Python is --python-version, and nothing is
# built (--no-build, --only-binary). Without this flag, a version the host lacks (3.13 on a
# 3.11 host) makes every call try to download a managed interpreter first: 6.5 s of failed
# retries per call where no download host answers, a download where one does.
NO_PYTHON_DOWNLOADS = "--no-python-downloads"


def _compile_argv(
    uv: str,
    tmp: Path,
    requirements: list[str],
    python: str,
    index_url: str | None,
    constraints: list[str] | None,
    only_binary: bool,
    exclude_newer: str | None,
    no_deps: bool = False,
    removed: list[str] | None = None,
) -> list[str]:
    """The ``uv pip compile`` command line; the requirements (and constraints) files it reads
    are written into ``tmp``."""
    req = tmp / "requirements.in"
    req.write_text("\n".join(requirements) + "\n")
    argv = [
        uv,
        "pip",
        "compile",
        NO_PYTHON_DOWNLOADS,
        "--no-build",
        "--python-version",
        python,
        "--no-header",
        "--no-annotate",
        "--quiet",
        "--python-platform",
        "x86_64-unknown-linux-gnu",
        str(req),
    ]
    if index_url:
        argv[3:3] = ["--index-url", index_url]
    else:
        # The host's private index or mirror (PIP_INDEX_URL, pip.conf, ...): uv reads only
        # its own variables by itself.

        argv[3:3] = host_index_config().uv_args()
    if only_binary:
        # the same promise as --no-build (uv refuses both together): nothing is built
        i = argv.index("--no-build")
        argv[i : i + 1] = ["--only-binary", ":all:"]
    if exclude_newer:
        argv[3:3] = ["--exclude-newer", exclude_newer]
    if no_deps:
        argv[3:3] = ["--no-deps"]
    if constraints:
        cons = tmp / "constraints.txt"
        cons.write_text("\n".join(constraints) + "\n")
        argv[3:3] = ["--constraint", str(cons)]
    if removed:
        over = tmp / "overrides.txt"
        # names only (canonical names from uv's own message), each under a marker that is
        # false on every platform
        over.write_text("".join(f"{n} ; sys_platform == 'never'\n" for n in removed))
        argv[3:3] = ["--overrides", str(over)]
    return argv


def _compiled_pins(output: str) -> dict[str, str]:
    """The ``name==version`` lines of uv's output, by canonical name."""
    pins = {}
    for line in output.splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._\-]*)(?:\[[^\]]*\])?==([^\s;]+)", line.strip())
        if m:
            pins[str(canonicalize_name(m.group(1)))] = m.group(2)
    return pins


def names_in_error(error: str, candidates: set[str]) -> list[str]:
    """Distribution names from ``candidates`` that uv's explanation mentions."""
    found = set()
    for word in re.findall(r"[A-Za-z0-9][A-Za-z0-9._\-]*", error):
        c = canonicalize_name(word)
        if c in candidates:
            found.add(c)
    return sorted(found)


_NO_WHEEL = re.compile(
    r"(?:Because|and) (?:only )?([A-Za-z0-9][A-Za-z0-9._\-]*)(?:==| ?[<>=])[^\s]* (?:has no|have no) (?:usable )?wheels?"
)
_NO_WHEEL_ALT = re.compile(r"([A-Za-z0-9][A-Za-z0-9._\-]*)==\S+ (?:has no|only has) .*wheel")


def wheel_resolution(
    pins: dict[str, str],
    python: str,
    timeout: float = 60.0,
    index_url: str | None = None,
    use_cache: bool = True,
    no_deps: bool = False,
) -> Resolution:
    """One ``--only-binary :all:`` resolution over the exact pins: it succeeds when every pinned
    distribution installs from a wheel for ``python`` on Linux (with ``no_deps``, these pins
    alone, not what they depend on)."""
    return uv_compile(
        [f"{n}=={v}" for n, v in sorted(pins.items())],
        python,
        timeout=timeout,
        index_url=index_url,
        only_binary=True,
        use_cache=use_cache,
        no_deps=no_deps,
    )


def sdist_only(
    pins: dict[str, str], python: str, timeout: float = 60.0, index_url: str | None = None, use_cache: bool = True
) -> str | None:
    """The first pinned distribution with no wheel for ``python`` on Linux (it would compile in
    the image), or None. One more resolution with ``--only-binary :all:`` over the exact pins."""
    if not pins:
        return None
    res = wheel_resolution(pins, python, timeout=timeout, index_url=index_url, use_cache=use_cache)
    if res.ok or res.skipped:
        return None
    return no_wheel_name(res, pins)


def no_wheel_name(res: Resolution, pins: dict[str, str], strict: bool = False) -> str | None:
    """The pinned distribution a failed ``--only-binary`` resolution names as having no wheel;
    unless ``strict``, else the first pin the error names at all."""
    for rx in (_NO_WHEEL, _NO_WHEEL_ALT):
        m = rx.search(res.error)
        if m:
            return canonicalize_name(m.group(1))
    if strict:
        return None
    names = names_in_error(res.error, set(pins))
    return names[0] if names else None


# The exact pins (index, Python, name, version) this process saw a wheel for: a run checks its
# lock's set up to three times (from the plan, the tested container, the replay), mostly the
# same pins, and each --only-binary resolution waits on the index (about 8 s for 100 pins). A
# release's files do not change within a run.
_HAS_WHEEL: set[tuple[str | None, str, str, str]] = set()


def wheel_less(
    pins: dict[str, str], python: str, timeout: float = 60.0, index_url: str | None = None, limit: int = 12
) -> list[str] | None:
    """Every pinned distribution with no wheel for ``python`` on Linux: [] when all have one,
    None when that cannot be told (uv missing, a failure other than a missing wheel, more than
    ``limit``).
    One ``--only-binary`` resolution, then one more for each distribution found. Pins already
    seen with a wheel are left out, and the others are then checked alone (``--no-deps``: the
    set is a whole environment, so what they depend on is pinned in it too)."""
    key = (index_url, python)
    left = {n: v for n, v in pins.items() if (*key, canonicalize_name(n), v) not in _HAS_WHEEL}
    alone = len(left) < len(pins)
    found: list[str] = []
    for _ in range(limit + 1):
        if not left:
            return found
        res = wheel_resolution(left, python, timeout=timeout, index_url=index_url, no_deps=alone)
        if res.skipped:
            return None
        if res.ok:
            _HAS_WHEEL.update((*key, canonicalize_name(n), v) for n, v in left.items())
            return found
        name = no_wheel_name(res, left, strict=True)
        if name is None or name not in left:
            return None
        found.append(name)
        left.pop(name)
    return None
