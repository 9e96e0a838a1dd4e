"""The plan's resolution completed in a container (issue 16).

The host never builds a distribution (SECURITY.md S12), so a requirement that only an sdist
satisfies is left out of the plan's resolution, with what it depends on (``unbuilt``). The plan's
lock then could not be drafted, and the first image installed the version ranges with a compiler,
which the clean replay of the lock drafted afterwards built again: a second full build and test
run for a repository that needed no repair.

Here the same requirements are resolved in a hardened container on the run's base image, where
building an sdist for its metadata is allowed, as it is in any build of the image. Each pin
with no wheel is then built there as a wheel, alone, on the base image, which has no compiler:
a wheel tagged ``none-any`` is pure Python, and installing it from its sdist needs no compiler.
When every such pin is, the plan's resolution covers the whole set and the plan's lock is
drafted from it (``bot.loop.lock.draft_from_plan``); otherwise the plan stays as it was and the
record says why. What the container printed is read as data: names and versions that parse,
nothing else."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from bot.errors import SetupbotError
from bot.graph.resolve import read_entry, resolution_key, write_entry

_MARK = "SETUPBOT-RESOLVED:"
_WORK = "/tmp/setupbot-resolve"
# uv is installed by pip into a folder of its own and left there only for this container
RESOLVE_SCRIPT = (
    "import json, os, pathlib, subprocess, sys\n"
    f"MARK = {_MARK!r}\n"
    "spec = json.loads(os.environ['SETUPBOT_RESOLVE'])\n"
    f"work = pathlib.Path({_WORK!r})\n"
    "work.mkdir(parents=True, exist_ok=True)\n"
    "def run(argv):\n"
    "    p = subprocess.run(argv, capture_output=True, text=True)\n"
    "    return p.returncode, p.stdout, (p.stderr or p.stdout)[-2000:]\n"
    "def done(**kw):\n"
    "    print(MARK + json.dumps(kw))\n"
    "    sys.exit(0)\n"
    "if spec['mode'] == 'compile':\n"
    "    rc, _, err = run([sys.executable, '-m', 'pip', 'install', '-q', '--disable-pip-version-check',\n"
    "                      '--no-cache-dir', '--target', str(work / 'uv'), 'uv'])\n"
    "    if rc:\n"
    "        done(error='uv did not install: ' + err)\n"
    "    (work / 'requirements.in').write_text('\\n'.join(spec['requirements']) + '\\n')\n"
    "    argv = [str(work / 'uv' / 'bin' / 'uv'), 'pip', 'compile', '--no-header', '--no-annotate', '--quiet',\n"
    "            '--no-python-downloads', '--python', sys.executable, str(work / 'requirements.in')]\n"
    "    if spec['constraints']:\n"
    "        (work / 'constraints.txt').write_text('\\n'.join(spec['constraints']) + '\\n')\n"
    "        argv += ['-c', str(work / 'constraints.txt')]\n"
    "    rc, out, err = run(argv)\n"
    "    done(compiled=out) if rc == 0 else done(error='uv pip compile: ' + err)\n"
    "wheels = {}\n"
    "for name, version in spec['build']:\n"
    "    dest = work / 'wheels' / name\n"
    "    rc, _, err = run([sys.executable, '-m', 'pip', 'wheel', '-q', '--disable-pip-version-check', '--use-pep517',\n"
    "                      '--no-cache-dir', '--no-deps', '--no-binary', name, '-w', str(dest),\n"
    "                      name + '==' + version])\n"
    "    files = sorted(p.name for p in dest.glob('*.whl')) if rc == 0 else []\n"
    "    wheels[name] = {'files': files, 'error': '' if rc == 0 else err[-500:]}\n"
    "done(wheels=wheels)\n"
)
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,200}[A-Za-z0-9])?$")
_PINS_MAX = 2000


@dataclass
class InImageResolution:
    """What the container gave: every pin, and for each pin with no wheel whether its wheel,
    built on the base image, is pure Python (``pure``) or why it is not (``not_pure``)."""

    pins: dict[str, str] = field(default_factory=dict)
    pure: list[str] = field(default_factory=list)
    not_pure: dict[str, str] = field(default_factory=dict)
    error: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.error and bool(self.pins) and not self.not_pure

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "pins": len(self.pins),
            "built_pure": list(self.pure),
            "not_pure": dict(self.not_pure),
            "error": self.error[-500:],
            "seconds": round(self.seconds, 3),
        }


def cache_key(requirements: Sequence[str], constraints: Sequence[str], python: str, image_id: str, index: Any) -> str:
    """The key of a resolution in a container: its inputs, the base image's id (another image
    may hold another pip or Python) and the host's index settings that the session passes on."""
    return "in-image-" + resolution_key(
        list(requirements), python, constraints=list(constraints), image=image_id, host_index=index
    )


def load_cached(key: str) -> InImageResolution | None:
    """A resolution with this key from the last day, kept as the host's resolutions are
    (``bot.graph.resolve.read_entry``); None when there is none or it cannot be read."""
    data = read_entry(key)
    if data is None:
        return None
    try:
        return InImageResolution(
            pins={str(k): str(v) for k, v in dict(data["pins"]).items()},
            pure=[str(n) for n in data["pure"]],
            not_pure={str(k): str(v) for k, v in dict(data["not_pure"]).items()},
        )
    except (ValueError, KeyError, TypeError):
        return None


def store(key: str, res: InImageResolution) -> None:
    """Keep a resolution that says something of its inputs: a set, and which of its wheel-less
    pins built pure. An error (a timeout, an index that did not answer) is not kept."""
    if res.error or not res.pins:
        return
    write_entry(key, {"pins": res.pins, "pure": res.pure, "not_pure": res.not_pure})


def read_marked(output: str) -> dict[str, Any]:
    """The script's one marked line, as a mapping; an error entry when there is none."""
    line = next((ln for ln in reversed(output.splitlines()) if ln.startswith(_MARK)), None)
    if line is None:
        return {"error": "the container printed no result: " + output.strip()[-300:]}
    try:
        data = json.loads(line[len(_MARK) :])
    except ValueError as exc:
        return {"error": f"an unreadable result: {exc}"}
    return data if isinstance(data, dict) else {"error": "an unreadable result"}


def parse_pins(compiled: str) -> dict[str, str]:
    """``name==version`` lines by canonical name; anything else (an option, a URL, a line whose
    name or version does not parse) is not a pin. Raises on a set too large to be one."""
    pins: dict[str, str] = {}
    for raw in compiled.splitlines():
        line = raw.split(";", 1)[0].split("#", 1)[0].strip()
        name, sep, version = line.partition("==")
        name = name.split("[", 1)[0].strip()
        version = version.strip()
        if not sep or not _NAME.match(name):
            continue
        try:
            Version(version)
        except InvalidVersion:
            continue
        pins[str(canonicalize_name(name))] = version
        if len(pins) > _PINS_MAX:
            raise SetupbotError(f"the container's resolution named more than {_PINS_MAX} distributions")
    return pins


def is_pure_wheel(filename: str) -> bool:
    """A wheel file name whose ABI and platform tags are ``none`` and ``any``."""
    parts = filename[: -len(".whl")].split("-") if filename.endswith(".whl") else []
    return len(parts) >= 5 and parts[-2] == "none" and parts[-1] == "any"


def resolve_in_image(
    session: Any,
    requirements: Sequence[str],
    constraints: Sequence[str],
    *,
    wheel_less: Callable[[dict[str, str]], list[str] | None],
    timeout: float = 300.0,
) -> InImageResolution:
    """Resolve ``requirements`` in ``session`` (an open runner session on the base image), then
    build there each pin ``wheel_less`` names (the index has no wheel for it) to tell whether it
    is pure Python."""
    t0 = time.monotonic()
    out = InImageResolution()

    def run(spec: dict[str, Any]) -> dict[str, Any]:
        r = session.exec(["python", "-c", RESOLVE_SCRIPT], env={"SETUPBOT_RESOLVE": json.dumps(spec)}, timeout=timeout)
        if getattr(r, "timed_out", False):
            return {"error": f"timed out after {timeout:.0f}s"}
        return read_marked(str(getattr(r, "output", "")))

    got = run({"mode": "compile", "requirements": list(requirements), "constraints": list(constraints)})
    compiled = got.get("compiled")
    if not isinstance(compiled, str):
        out.error = str(got.get("error") or "no resolution")
    else:
        try:
            out.pins = parse_pins(compiled)
        except SetupbotError as exc:
            out.error = exc.what
    if not out.error and not out.pins:
        out.error = "the resolution named no distribution"
    if out.error:
        out.seconds = time.monotonic() - t0
        return out
    missing = wheel_less(out.pins)
    if missing is None:
        out.error = "which pins have a wheel could not be told"
    elif missing:
        wheels = run({"mode": "build", "build": [[n, out.pins[n]] for n in missing if n in out.pins]}).get("wheels")
        built: dict[str, Any] = wheels if isinstance(wheels, dict) else {}
        for name in missing:
            found = built.get(name)
            entry: dict[str, Any] = found if isinstance(found, dict) else {}
            files = [str(f) for f in entry.get("files") or []]
            if files and all(is_pure_wheel(f) for f in files):
                out.pure.append(name)
            elif files:
                out.not_pure[name] = f"its wheel is built for this platform ({files[0][:120]})"
            else:
                error = str(entry.get("error") or "no wheel was built").strip()
                out.not_pure[name] = "it did not build on the base image, which has no compiler: " + error[-200:]
    out.seconds = time.monotonic() - t0
    return out
