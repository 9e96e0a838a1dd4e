"""Sibling repositories: a server that the repository's integration tests call, a plugin host,
another service of the same system. Named in ``.github/setupbot.yml``:

    siblings:
      - name: api                  # network alias, and the prefix of the variables wired in
        path: services/api         # or url: https://... (git) with ref: main; a path outside
                                   # the repository only from the operator's configuration
        dockerfile: Dockerfile     # start from its own Dockerfile (default), or plan: true
        port: 8000
        probe: http:/health        # http:<path> | tcp | none
        env: {API_MODE: test}      # for the sibling container
        wire: {API_URL: "http://api:8000"}   # for the tests (default: <NAME>_URL/_HOST/_PORT)

setupbot builds each sibling, starts it on the private network with its name as alias, waits
for its probe within a bounded time, and wires the host repository's tests to it.
"""

from __future__ import annotations

import logging
import re
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot import safefs
from bot.compile.dockerfile import without_dev_stage
from bot.compile.plan import make_plan
from bot.config import load_settings
from bot.engine.images import available_pythons
from bot.errors import ConfigError, SetupbotError
from bot.hostenv import host_env
from bot.services import wait_healthy

log = logging.getLogger(__name__)

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,40}$")
_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,200}$")

# the keys a `siblings:` entry may have
_SIBLING_KEYS = {
    "name",
    "path",
    "url",
    "ref",
    "dockerfile",
    "plan",
    "port",
    "probe",
    "env",
    "wire",
    "command",
    "health_timeout",
}


def _sibling_name(entry: Mapping[str, Any]) -> str:
    """The sibling's name from a ``siblings:`` entry, after checking that the entry has only
    known keys and that the name can be a host name."""
    unknown = set(entry) - _SIBLING_KEYS
    if unknown:
        raise ConfigError(
            f"siblings: unknown key(s) {', '.join(sorted(unknown))}", f"Known keys: {', '.join(sorted(_SIBLING_KEYS))}."
        )
    name = str(entry.get("name") or "").strip().lower()
    if not _NAME.match(name):
        raise ConfigError(
            f"siblings: {name!r} is not a usable name",
            "Use lower-case letters, digits, '-' and '_' (it becomes a host name).",
        )
    return name


def _check_port(name: str, port: Any) -> None:
    """A sibling's ``port:`` is absent or a number from 1 to 65535."""
    if (
        port is not None
        and not (isinstance(port, int) or str(port).isdigit())
        or port is not None
        and not 0 < int(port) < 65536
    ):
        raise ConfigError(
            f"siblings.{name}: port must be a number from 1 to 65535, not {str(port)[:40]!r}",
            "Set `port:` to the port the sibling listens on.",
        )


@dataclass(frozen=True)
class SiblingSpec:
    name: str
    path: str = ""
    url: str = ""
    ref: str = ""
    dockerfile: str = "Dockerfile"
    plan: bool = False
    port: int | None = None
    probe: str = "tcp"
    env: Mapping[str, str] = field(default_factory=dict)
    wire: Mapping[str, str] = field(default_factory=dict)
    command: tuple[str, ...] = ()
    health_timeout: int = 60

    @classmethod
    def from_setting(cls, entry: Mapping[str, Any]) -> SiblingSpec:
        name = _sibling_name(entry)
        path, url = str(entry.get("path") or ""), str(entry.get("url") or "")
        if not isinstance(entry.get("path") or "", str) or not isinstance(entry.get("url") or "", str):
            raise ConfigError(f"siblings.{name}: `path` and `url` are text")
        if bool(path) == bool(url):
            raise ConfigError(f"siblings.{name}: give exactly one of `path` or `url`")
        ref = str(entry.get("ref") or "")
        if ref and not _REF.match(ref):
            raise ConfigError(f"siblings.{name}: {ref!r} is not a git ref")
        port = entry.get("port")
        _check_port(name, port)
        health = entry.get("health_timeout")
        if health is not None and not str(health).isdigit():
            raise ConfigError(f"siblings.{name}: health_timeout must be a number of seconds, not {str(health)[:40]!r}")
        for key in ("env", "wire"):
            if entry.get(key) is not None and not isinstance(entry.get(key), Mapping):
                raise ConfigError(f"siblings.{name}: `{key}` must be a mapping of names to values")
        probe = str(entry.get("probe") or ("tcp" if port else "none"))
        if not (probe in ("tcp", "none") or probe.startswith("http:")):
            raise ConfigError(f"siblings.{name}: probe must be tcp, none or http:<path>, not {probe!r}")
        command = entry.get("command") or ()
        return cls(
            name=name,
            path=path,
            url=url,
            ref=ref,
            dockerfile=str(entry.get("dockerfile") or "Dockerfile"),
            plan=bool(entry.get("plan")),
            port=int(port) if port else None,
            probe=probe,
            env={str(k): str(v) for k, v in dict(entry.get("env") or {}).items()},
            wire={str(k): str(v) for k, v in dict(entry.get("wire") or {}).items()},
            command=tuple(command.split() if isinstance(command, str) else map(str, command)),
            health_timeout=int(entry.get("health_timeout") or 60),
        )

    def wiring(self) -> dict[str, str]:
        if self.wire:
            return dict(self.wire)
        prefix = re.sub(r"[^A-Z0-9]", "_", self.name.upper())
        env = {f"{prefix}_HOST": self.name}
        if self.port:
            env[f"{prefix}_PORT"] = str(self.port)
            env[f"{prefix}_URL"] = f"http://{self.name}:{self.port}"
        return env


def specs_from_settings(entries: Iterable[Mapping[str, Any]]) -> tuple[list[SiblingSpec], list[str]]:
    specs, warnings = [], []
    for i, entry in enumerate(entries):
        try:
            specs.append(SiblingSpec.from_setting(entry))
        except SetupbotError as exc:
            warnings.append(f"siblings[{i}]: {exc.what}")
    return specs, warnings


def probe_argv(spec: SiblingSpec) -> list[list[str]]:
    """Run inside the sibling's own container: Python when it has it, else bash's /dev/tcp."""
    if spec.probe == "none" or not spec.port:
        return []
    port = str(spec.port)
    if spec.probe.startswith("http:"):
        path = spec.probe[len("http:") :] or "/"
        code = (
            "import sys, urllib.request, urllib.error\n"
            "try:\n"
            "    urllib.request.urlopen('http://127.0.0.1:%s%s' % (sys.argv[1], sys.argv[2]), timeout=3)\n"
            "except urllib.error.HTTPError as e:\n"
            "    sys.exit(0 if e.code < 500 else 1)\n"
        )
        return [["python3", "-c", code, port, path], ["python", "-c", code, port, path]]
    return [
        ["bash", "-c", 'exec 3<>"/dev/tcp/127.0.0.1/$1"', "probe", port],
        ["python3", "-c", "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 3)", port],
    ]


@dataclass
class SiblingOutcome:
    name: str
    source: str
    image: str | None = None
    built: bool = False
    healthy: bool = False
    seconds: float = 0.0
    note: str = ""
    log_tail: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


class SiblingManager:
    """Build, start and health-check sibling repositories on ``network``; remove them on exit."""

    def __init__(self, engine: Any, network: str, host_repo: Path, settings: Any = None) -> None:
        self.engine = engine
        self.network = network
        self.host_repo = Path(host_repo)
        self.settings = settings
        self._handles: list[Any] = []
        self._tmp: list[tempfile.TemporaryDirectory[str]] = []
        self.images: dict[str, str] = {}
        self.handles_by_name: dict[str, Any] = {}

    def __enter__(self) -> SiblingManager:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def source_dir(self, spec: SiblingSpec) -> Path:
        if spec.path:
            path = Path(spec.path)
            path = path if path.is_absolute() else (self.host_repo / path)
            if not path.is_dir():
                raise ConfigError(f"siblings.{spec.name}: {path} is not a directory")
            return path.resolve()
        tmp = tempfile.TemporaryDirectory(prefix=f"setupbot-sibling-{spec.name}-")
        self._tmp.append(tmp)
        argv = ["git", "clone", "--quiet", "--depth", "1"]
        if spec.ref:
            argv += ["--branch", spec.ref]
        argv += ["--", spec.url, tmp.name]
        r = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=300,
            env=host_env({"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}),
        )
        if r.returncode != 0:
            raise ConfigError(
                f"siblings.{spec.name}: cannot clone {spec.url}: {r.stderr.strip()[-300:]}",
                "Check the url and ref, or use `path:` for a local checkout.",
            )
        return Path(tmp.name)

    def dockerfile_text(self, spec: SiblingSpec, source: Path) -> str:
        if spec.plan:
            plan = make_plan(source, load_settings(source), available_pythons(self.engine))
            # a sibling runs as a service: its development stage (git, the user) is not needed
            return without_dev_stage(plan.dockerfile.text)
        try:
            return safefs.read_text(source, spec.dockerfile, max_bytes=1024 * 1024)
        except (OSError, safefs.UnsafePath):
            raise ConfigError(
                f"siblings.{spec.name}: no Dockerfile at {spec.dockerfile}",
                "Set `dockerfile:` to a path inside the sibling, or `plan: true`.",
            ) from None

    def build(self, spec: SiblingSpec) -> tuple[str | None, SiblingOutcome]:
        outcome = SiblingOutcome(spec.name, spec.path or f"{spec.url}@{spec.ref or 'HEAD'}")
        try:
            source = self.source_dir(spec)
            text = self.dockerfile_text(spec, source)
        except SetupbotError as exc:
            outcome.note = exc.what
            return None, outcome
        tag = f"setupbot/sibling-{spec.name}:{self.engine.run_id}"
        result = self.engine.build(source, text, tag)
        if not result.ok:
            outcome.note = "the sibling's image did not build"
            outcome.log_tail = result.log[-2000:]
            return None, outcome
        outcome.built, outcome.image = True, tag
        self.images[spec.name] = tag
        return tag, outcome

    def start(self, specs: Iterable[SiblingSpec]) -> tuple[list[SiblingOutcome], dict[str, str]]:
        outcomes, env = [], {}
        for spec in specs:
            started = time.monotonic()
            tag, outcome = self.build(spec)
            if tag is not None:
                try:
                    handle = self.engine.start_container(
                        tag,
                        name_hint=f"sib-{spec.name}",
                        network=self.network,
                        env=dict(spec.env),
                        aliases=[spec.name],
                        command=list(spec.command) or None,
                    )
                except SetupbotError as exc:
                    outcome.note = f"did not start: {exc.what}"
                else:
                    self._handles.append(handle)
                    running = getattr(handle, "running", None)
                    ok, _, last = wait_healthy(
                        handle, probe_argv(spec), spec.health_timeout, running=running if callable(running) else None
                    )
                    outcome.healthy = ok
                    if ok:
                        env.update(spec.wiring())
                        self.handles_by_name[spec.name] = handle
                    else:
                        outcome.note = f"not healthy after {spec.health_timeout}s ({last.strip()[-200:]})"
                        try:
                            outcome.log_tail = str(handle.logs())[-2000:]
                        except SetupbotError:
                            pass
                        handle.remove()
                        self._handles.remove(handle)
            outcome.seconds = round(time.monotonic() - started, 2)
            outcomes.append(outcome)
        return outcomes, env

    def remove(self, name: str) -> None:
        """Stop one sibling early (to see which tests needed it)."""
        handle = self.handles_by_name.pop(name, None)
        if handle is not None:
            handle.remove()
            self._handles.remove(handle)

    def stop(self) -> None:
        self.handles_by_name.clear()
        for handle in reversed(self._handles):
            try:
                handle.remove()
            except SetupbotError as exc:  # pragma: no cover
                log.warning("could not remove %s: %s", getattr(handle, "name", handle), exc.what)
        self._handles.clear()
        for tmp in self._tmp:
            tmp.cleanup()
        self._tmp.clear()
