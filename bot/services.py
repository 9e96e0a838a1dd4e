"""Sibling services: start what the repository's tests talk to (PostgreSQL, Redis, MySQL/MariaDB,
RabbitMQ, or any image the engine has) as containers on a private network shared only with the
runner container, wait for them to be healthy within a bounded time, and return the environment
variables that wire the tests to them. Everything started is removed on exit.

Requirements come from the plan (CI ``services:`` blocks, compose files), from the ``services:``
setting in ``.github/setupbot.yml``, from ``start_service`` atoms, and from diagnosis (a
connection refused on a well-known port).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from bot import catalogue
from bot.catalogue import KINDS, PORT_TO_KIND, ImageChoice, kind_of, resolve_image
from bot.errors import ConfigError, SetupbotError
from bot.programs import source

log = logging.getLogger(__name__)

_ALIAS = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
# services started side by side at most (a repository names a handful)
MAX_PARALLEL_STARTS = 4


@dataclass(frozen=True)
class ServiceSpec:
    """One service to start. Mirrors ``bot.graph``'s ServiceRequirement so either can be used."""

    name: str
    kind: str | None
    image: str
    ports: tuple[int, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    evidence: tuple[Any, ...] = ()
    command: tuple[str, ...] = ()

    @classmethod
    def from_any(cls, req: Any) -> ServiceSpec:
        """From a ServiceRequirement, a ServiceSpec, or a mapping (the ``services:`` setting)."""
        if isinstance(req, ServiceSpec):
            return req
        get = (lambda k, d=None: req.get(k, d)) if isinstance(req, Mapping) else (lambda k, d=None: getattr(req, k, d))
        name = str(get("name") or "").strip()
        image = str(get("image") or "").strip()
        ports = tuple(p for p in (_port(x) for x in (get("ports") or ())) if p)
        kind = get("kind") or None
        # a kind the catalogue does not know ("other") still lets the image or port decide
        kind = (kind_of(str(kind)) if kind else None) or kind_of(name, image, ports)
        if not name:
            name = kind or (image.split(":")[0].rsplit("/", 1)[-1] if image else "")
        if not name:
            raise ConfigError(
                f"a service needs a name or an image: {req!r}",
                "Give each entry of `services:` a `name` and an `image`.",
            )
        if not image and kind:
            image = KINDS[kind].image
        if not ports and kind:
            ports = (KINDS[kind].port,)
        env = {str(k): "" if v is None else str(v) for k, v in dict(get("env") or {}).items()}
        command = get("command") or ()
        if isinstance(command, str):
            command = tuple(command.split())
        return cls(
            name=name,
            kind=kind,
            image=image,
            ports=ports,
            env=env,
            evidence=tuple(get("evidence") or ()),
            command=tuple(str(c) for c in command),
        )

    @property
    def alias(self) -> str:
        alias = re.sub(r"[^a-z0-9_.-]", "-", self.name.lower()).strip("-.") or (self.kind or "service")
        return alias[:63]

    @property
    def port(self) -> int | None:
        if self.kind:
            return KINDS[self.kind].port
        return self.ports[0] if self.ports else None


def _port(value: Any) -> int | None:
    """'5432:5432' / '5432/tcp' / 5432 / {'target': 5432} -> the container port."""
    if isinstance(value, Mapping):
        value = value.get("target") or value.get("containerPort") or value.get("published")
    text = str(value).strip().split("/")[0]
    text = text.rsplit(":", 1)[-1]
    return int(text) if text.isdigit() else None


def specs_from_settings(entries: Iterable[Mapping[str, Any]]) -> tuple[list[ServiceSpec], list[str]]:
    """Parse the ``services:`` setting. Bad entries become warnings; the rest still start."""
    specs, warnings = [], []
    for i, entry in enumerate(entries):
        try:
            specs.append(ServiceSpec.from_any(entry))
        except (SetupbotError, TypeError, ValueError) as exc:
            warnings.append(f"services[{i}]: {exc}")
    return specs, warnings


def specs_from_atoms(atoms: Iterable[Any]) -> list[ServiceSpec]:
    """``start_service`` atoms (from the experience base or diagnosis) as service specs."""
    out = []
    for atom in atoms:
        if getattr(atom, "kind", None) != "start_service":
            continue
        args = dict(atom.args)
        out.append(
            ServiceSpec.from_any(
                {
                    "name": args["service"],
                    "kind": args["service"],
                    "image": args.get("image", ""),
                    "env": args.get("env") or {},
                    "evidence": [("atom", 0, atom.describe())],
                }
            )
        )
    return out


_KIND_WORDS = catalogue.refusal_words()
_REFUSAL = re.compile(
    r"connection refused|ECONNREFUSED|Error 111|Errno 111|Connect call failed"
    r"|could not connect to server|Is the server running|"
    + "|".join(p for k in KINDS.values() for p in k.refusal_patterns),
    re.IGNORECASE,
)
_KNOWN_PORT = re.compile(r"(?<!\d)(" + "|".join(str(p) for p in PORT_TO_KIND) + r")(?!\d)")


def specs_from_diagnosis(output: str) -> list[ServiceSpec]:
    """Services that a failing test run was trying to reach: a refused connection on a port that a
    known kind of service listens on (5432, 6379, 3306, 5672), in the same line or the next, or a
    client library's own refusal message."""
    found: dict[str, str] = {}
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if not _REFUSAL.search(line):
            continue
        window = line + "\n" + (lines[i + 1] if i + 1 < len(lines) else "")
        kinds = [PORT_TO_KIND[int(p)] for p in _KNOWN_PORT.findall(window)]
        kinds += [k for k, pattern in _KIND_WORDS if pattern.search(line)]
        for kind in kinds:
            found.setdefault(kind, line.strip()[:200])
    return [
        ServiceSpec.from_any({"name": k, "kind": k, "evidence": [("test output", 0, line)]})
        for k, line in found.items()
    ]


def merge_specs(*groups: Iterable[ServiceSpec]) -> list[ServiceSpec]:
    """One spec per service, in order of the groups (plan, settings, atoms, diagnosis): a later
    spec with an alias already taken, or one that only says "a service of this kind" (from an atom
    or diagnosis) when that kind is already there, adds nothing."""
    out: list[ServiceSpec] = []
    for group in groups:
        for spec in group:
            inferred = any(
                isinstance(e, (list, tuple)) and e and e[0] in ("test output", "atom") for e in spec.evidence
            )
            if any(o.alias == spec.alias for o in out):
                continue
            if inferred and spec.kind and any(o.kind == spec.kind for o in out):
                continue
            out.append(spec)
    return out


# --- environment: what the container gets and what the tests get -------------------------------


def container_env(spec: ServiceSpec) -> dict[str, str]:
    """The service container's own env: the official image's defaults for credentials the
    requirement leaves out, so a CI block with only an image still starts."""
    return catalogue.container_env(spec.kind, spec.env)


def service_env(spec: ServiceSpec) -> dict[str, str]:
    """The variables tests commonly read to find this service, pointing at its network alias."""
    return catalogue.wiring_env(spec.kind, spec.alias, str(spec.port or ""), spec.env)


_LOCAL = re.compile(r"(?<![\w.-])(localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1\])(?::(\d{2,5}))?(?![\w-])")
_PREFIX_KIND = catalogue.prefix_kinds()


def rewrite_localhost(env: Mapping[str, str], specs: Sequence[ServiceSpec]) -> dict[str, str]:
    """CI jobs reach services on localhost (the runner maps the ports); here each service is a
    sibling with its own network alias, so ``localhost:5432`` in a test variable becomes
    ``postgres:5432``. The port picks the service; without a port, the variable's name does
    (``PGHOST``, ``REDIS_HOST``), and with a single service it is that one."""
    by_port: dict[int, ServiceSpec] = {}
    by_kind: dict[str, ServiceSpec] = {}
    for s in specs:
        for p in (s.port, *s.ports):
            if p:
                by_port.setdefault(p, s)
        if s.kind:
            by_kind.setdefault(s.kind, s)

    def target(name: str, port: str | None) -> ServiceSpec | None:
        if port and int(port) in by_port:
            return by_port[int(port)]
        upper = name.upper()
        for prefix, kind in _PREFIX_KIND:
            if upper.startswith(prefix) and kind in by_kind:
                return by_kind[kind]
        if len(specs) == 1 and not port:
            return specs[0]
        if upper.endswith(("DATABASE_URL", "DB_URL", "DSN")):
            url_kind = next((k for k in ("postgres", "mysql") if k in by_kind), None)
            return by_kind.get(url_kind) if url_kind else None
        return None

    out = {}
    for name, value in env.items():

        def sub(m: re.Match[str], name: str = name) -> str:
            spec = target(name, m.group(2))
            if spec is None:
                return m.group(0)
            return spec.alias + (f":{m.group(2)}" if m.group(2) else "")

        out[name] = _LOCAL.sub(sub, value) if isinstance(value, str) else value
    return out


def wiring_env(specs: Sequence[ServiceSpec], ci_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the runner container gets: the repository's own variables (with localhost rewritten
    to the aliases) win over setupbot's defaults, because they are what the tests were written
    against."""
    env: dict[str, str] = {}
    for spec in specs:
        for k, v in service_env(spec).items():
            env.setdefault(k, v)
    if ci_env:
        env.update(rewrite_localhost(ci_env, specs))
    return env


# --- health probes -----------------------------------------------------------------------------


def health_argv(spec: ServiceSpec) -> list[list[str]]:
    """Commands run inside the service container; the first that exits 0 means healthy. Each
    stand-in ships the official tool for this (bot/catalogue.py); the TCP probe is the fallback
    for other images."""
    env = container_env(spec)
    if spec.kind in KINDS:
        return KINDS[spec.kind].health_argv(spec.port, env)
    port = str(spec.port or "")
    return [[part.format(port=port) for part in catalogue.TCP_PROBE]] if port else []


def _exec_ok(result: Any) -> tuple[bool, str]:
    code = getattr(result, "exit_code", None)
    if code is None and isinstance(result, tuple):
        code = result[0]
    out = getattr(result, "output", "")
    if out is None and isinstance(result, tuple):
        out = result[1]
    return code == 0, str(out or "")


def wait_healthy(
    handle: Any,
    probes: Sequence[Sequence[str]],
    timeout: float,
    interval: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    running: Callable[[], bool] | None = None,
) -> tuple[bool, float, str]:
    """Poll ``probes`` inside ``handle`` until one passes or ``timeout`` seconds pass.
    Returns (healthy, seconds waited, last probe output)."""
    start = clock()
    last = ""
    if not probes:
        return True, 0.0, "no health probe for this image; assumed up once started"
    while True:
        for argv in probes:
            try:
                ok, last = _exec_ok(handle.exec(list(argv)))
            except SetupbotError as exc:
                ok, last = False, exc.what
            if ok:
                return True, clock() - start, last
        if running is not None and not running():
            return False, clock() - start, "the container exited"
        if clock() - start >= timeout:
            return False, clock() - start, last
        sleep(interval)


# --- the manager -------------------------------------------------------------------------------


@dataclass
class ServiceOutcome:
    name: str
    kind: str | None
    requested_image: str
    image: str | None
    alias: str
    healthy: bool
    seconds: float = 0.0
    note: str = ""  # substitution or why it is not running
    logs_tail: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ServicesStarted:
    outcomes: list[ServiceOutcome]
    env: dict[str, str]

    @property
    def all_healthy(self) -> bool:
        return all(o.healthy for o in self.outcomes)

    @property
    def healthy_names(self) -> list[str]:
        return [o.name for o in self.outcomes if o.healthy]


class ServiceManager:
    """Start, health-check and tear down sibling services on one private network.

    >>> with engine.network() as net, ServiceManager(engine, net) as services:
    ...     started = services.start(plan.services, ci_env=plan.env)
    ...     with engine.session(image, env=started.env, network=net) as runner: ...
    """

    def __init__(
        self, engine: Any, network: str, *, health_timeout: float | None = None, interval: float = 1.0
    ) -> None:
        self.engine = engine
        self.network = network
        self.health_timeout = health_timeout
        self.interval = interval
        self._handles: list[Any] = []
        self.handles_by_name: dict[str, Any] = {}

    def __enter__(self) -> ServiceManager:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _exists(self, tag: str) -> bool:
        try:
            if self.engine.image_exists(tag):
                return True
            # Not in the store: pulled through the image source when a registry answers, so the
            # requested image wins over a stand-in on a runner that can pull it.
            resolve = getattr(self.engine, "resolve_image", None)
            return bool(resolve and resolve(tag))
        except SetupbotError:
            return False

    def choose_image(self, spec: ServiceSpec) -> ImageChoice:
        return resolve_image(spec.kind, spec.image, self._exists)

    def start(self, requirements: Iterable[Any], ci_env: Mapping[str, str] | None = None) -> ServicesStarted:
        specs = [ServiceSpec.from_any(r) for r in requirements]
        if len(specs) < 2:
            outcomes = [self._start_one(spec) for spec in specs]
        else:
            # each waits for its own health probe (MariaDB 7 s, PostgreSQL 4 s): side by side,
            # the runner waits for the slowest instead of their sum. The engine's calls are
            # separate processes, and its shared state is locked (bot.engine.core)
            workers = min(len(specs), MAX_PARALLEL_STARTS)
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="setupbot-service") as pool:
                outcomes = list(pool.map(self._start_one, specs))
        healthy = [s for s, o in zip(specs, outcomes, strict=False) if o.healthy]
        return ServicesStarted(outcomes, wiring_env(healthy, ci_env))

    def _start_one(self, spec: ServiceSpec) -> ServiceOutcome:
        choice = self.choose_image(spec)
        outcome = ServiceOutcome(
            spec.name, spec.kind, spec.image, choice.image, spec.alias, healthy=False, note=choice.note
        )
        if choice.image is None:
            return outcome
        if not _ALIAS.match(spec.alias):
            outcome.note = f"{spec.name!r} cannot be a network alias"
            return outcome
        started = time.monotonic()
        try:
            handle = self.engine.start_container(
                choice.image,
                name_hint=f"svc-{spec.alias}",
                network=self.network,
                env=container_env(spec),
                aliases=[spec.alias],
                command=list(spec.command) or None,
            )
        except SetupbotError as exc:
            outcome.note = (outcome.note + "; " if outcome.note else "") + f"did not start: {exc.what}"
            return outcome
        self._handles.append(handle)
        timeout = self.health_timeout or (KINDS[spec.kind].health_timeout if spec.kind else 30)
        ok, _, last = wait_healthy(handle, health_argv(spec), timeout, self.interval)
        outcome.healthy = ok
        outcome.seconds = round(time.monotonic() - started, 2)
        if not ok:
            outcome.logs_tail = _logs(handle)[-2000:]
            outcome.note = (
                outcome.note + "; " if outcome.note else ""
            ) + f"not healthy after {timeout:.0f}s (last probe: {last.strip()[-200:] or 'no output'})"
            self._remove(handle)
        else:
            self.handles_by_name[spec.name] = handle
            log.info("service %s (%s) healthy in %.1fs", spec.name, choice.image, outcome.seconds)
        return outcome

    def _remove(self, handle: Any) -> None:
        try:
            handle.remove()
        except SetupbotError as exc:  # pragma: no cover - engine cleanup will catch it
            log.warning("could not remove %s: %s", getattr(handle, "name", handle), exc.what)
        if handle in self._handles:
            self._handles.remove(handle)

    def remove(self, name: str) -> None:
        """Stop one service early (to see which tests needed it)."""
        handle = self.handles_by_name.pop(name, None)
        if handle is not None:
            self._remove(handle)

    def stop(self) -> None:
        for handle in list(reversed(self._handles)):
            self._remove(handle)
        self.handles_by_name.clear()


def _logs(handle: Any) -> str:
    try:
        return str(handle.logs() or "")
    except SetupbotError:
        return ""


# --- localhost forwarding ----------------------------------------------------------------------

# The localhost relay run in the runner container (bot/programs/forwarder.py).
FORWARDER = source("forwarder")
FORWARDER_PATH = "/tmp/setupbot-forwarder.py"


def forward_targets(outcomes: Iterable[ServiceOutcome], specs: Iterable[ServiceSpec] = ()) -> list[str]:
    """LISTEN:ALIAS:PORT for every healthy service: its kind's port and the ports CI mapped."""
    ports_of = {s.name: {p for p in (s.port, *s.ports) if p} for s in specs}
    out = []
    for o in outcomes:
        if not o.healthy:
            continue
        ports = ports_of.get(o.name) or ({KINDS[o.kind].port} if o.kind else set())
        out += [f"{p}:{o.alias}:{p}" for p in sorted(ports)]
    return out


def start_localhost_forwarding(session: Any, targets: Sequence[str], python: str = "python") -> bool:
    """Relay localhost:PORT in the runner container to each sibling. Returns whether it runs;
    without Python in the image the variables alone have to do."""
    if not targets:
        return False
    # the relay is made again in a container restored from a snapshot: nothing a snapshot keeps
    write = session.exec(
        [python, "-c", "import sys; open(sys.argv[1], 'w').write(sys.argv[2])", FORWARDER_PATH, FORWARDER],
        timeout=30,
        changes=False,
    )
    if getattr(write, "exit_code", 1) != 0:
        return False
    # started in the background: it outlives this exec and dies with the container. The log is
    # emptied first: a snapshot carries the last one, and a restored container has no relay
    # (when one still runs, the new one finds its ports taken and says so)
    session.exec(
        [
            "sh",
            "-c",
            ': >/tmp/setupbot-forwarder.log; nohup "$0" "$@" >/tmp/setupbot-forwarder.log 2>&1 &',
            python,
            FORWARDER_PATH,
            *targets,
        ],
        timeout=30,
        changes=False,
    )
    for _ in range(20):
        check = session.exec(["cat", "/tmp/setupbot-forwarder.log"], timeout=10, changes=False)
        if "ready" in str(getattr(check, "output", "")):
            return True
        if "failed" in str(getattr(check, "output", "")):
            return False
        time.sleep(0.25)
    return False
