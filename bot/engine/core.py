"""The container engine: builds, runner sessions, sibling containers, networks, cleanup.

Docker first, podman through ``engine.kind``. Listing, inspection, container creation and
networks go through python-on-whales; the calls that need a hard timeout or a kept log (build,
exec, commit, import) run the engine's CLI as argv lists, which is also how python-on-whales
talks to the engine.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.config import Settings
from bot.engine import dockerfile as dockerfile_facts
from bot.engine import egress as egress_guard
from bot.engine.ca import CA_ENV, CA_LABEL, CABundle, resolve_ca_bundle
from bot.engine.capture import Captured, Watch, run_capped
from bot.engine.egress import EgressFacts
from bot.engine.hardening import Limits, hardened_create_kwargs
from bot.engine.results import BuildResult, ExecResult
from bot.engine.session import RunnerSession
from bot.engine.sources import ImageSource
from bot.errors import EngineError, ImageUnavailableError
from bot.hostenv import host_env
from bot.indexes import host_index_config
from bot.logtext import PIP_BACKTRACKING
from bot.templating import render_template

log = logging.getLogger(__name__)

LABEL = "setupbot"
RUN_LABEL = "setupbot.run"
# host/boot id/pid/start time of the process that owns the run: `setupbot clean` leaves the
# runs of live owners alone
OWNER_LABEL = "setupbot.owner"
# images several runs share (the CA derivative of a base image): no run label, so a run's
# cleanup never deletes them; `setupbot clean --all` does
SHARED_LABEL = "setupbot.shared"


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "?"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def owner_token(pid: int | None = None) -> str:
    import socket

    pid = pid or os.getpid()
    return f"{socket.gethostname()}/{_boot_id()}/{pid}/{_start_time(pid) or '?'}"


def owner_alive(token: str) -> bool | None:
    """True when the owning process still runs, False when it is gone, None when this host
    cannot tell (another host, or a label of an older version)."""
    import socket

    parts = token.split("/")
    if len(parts) != 4:
        return None
    host, boot, pid, start = parts
    if host != socket.gethostname() or boot != _boot_id():
        return None if host != socket.gethostname() else False  # same host, rebooted: gone
    try:
        return _start_time(int(pid)) == start
    except ValueError:
        return None


def new_run_id() -> str:
    """Sortable and unique: UTC time plus randomness; valid in container and image names."""
    return time.strftime("%Y%m%d%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


@dataclass
class ContainerHandle:
    """A sibling container (a service) started by ``Engine.start_container``."""

    engine: Engine
    name: str

    def exec(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        timeout: float | None = 60,
        workdir: str | None = None,
    ) -> ExecResult:
        return self.engine.exec_in(self.name, argv, env=env, timeout=timeout, workdir=workdir)

    def logs(self) -> str:
        # a sibling may be the repository's own image: its log is capped like any output
        return run_capped([self.engine.binary, "logs", self.name], env=host_env(), timeout=120).text

    def running(self) -> bool:
        r = self.engine.run_cli(["inspect", "-f", "{{.State.Running}}", self.name], check=False)
        return r.stdout.strip() == "true"

    def remove(self) -> None:
        self.engine.run_cli(["rm", "-f", "-v", self.name], check=False)


def _hardening_flags(kwargs: dict) -> list[str]:
    """``hardened_create_kwargs`` as the engine CLI's flags."""
    if kwargs.get("privileged"):
        raise EngineError("refusing a privileged container", "This is a bug in setupbot.")
    out: list[str] = []
    for cap in kwargs.get("cap_drop", []):
        out += ["--cap-drop", cap]
    for cap in kwargs.get("cap_add", []):
        out += ["--cap-add", cap]
    for opt in kwargs.get("security_options", []):
        out += ["--security-opt", opt]
    out += [
        "--pids-limit",
        str(kwargs["pids_limit"]),
        "--memory",
        str(kwargs["memory"]),
        "--memory-swap",
        str(kwargs["memory_swap"]),
        "--cpus",
        str(kwargs["cpus"]),
    ]
    if kwargs.get("init"):
        out.append("--init")
    return out


class Engine:
    def __init__(self, settings: Settings, run_id: str | None = None, environ: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self.kind = settings.engine.kind
        binary = shutil.which(self.kind)
        if not binary:
            raise EngineError(
                f"the container engine '{self.kind}' is not installed (not on PATH)",
                f"Install {self.kind}, or choose the other engine with engine.kind.",
            )
        self.binary: str = binary
        self.run_id = run_id or os.environ.get("SETUPBOT_RUN_ID") or new_run_id()
        self.labels = {LABEL: "1", RUN_LABEL: self.run_id, OWNER_LABEL: owner_token()}
        self.limits = Limits.from_settings(settings.engine)
        self.ca: CABundle | None = resolve_ca_bundle(settings.ca.file, environ)
        self._counter = itertools.count(1)
        # the per-run egress network is made once, also when builds run in threads (images
        # bootstrap --jobs): two at once would ask for the same bridge name
        self._egress_lock = threading.Lock()
        self._client = None
        self._buildkit: bool | None = None
        self._internal_networks: set[str] = set()
        self.egress: EgressFacts | None = None
        self._egress_net: str | None = None
        self._source: ImageSource | None = None  # made on first use
        # The host's private index or mirror (PIP_INDEX_URL, pip.conf, ...) for runner commands
        # and builds; never written into a generated file.
        self.index_env: dict[str, str] = host_index_config(environ).env()

    @classmethod
    def from_settings(cls, settings: Settings, run_id: str | None = None) -> Engine:
        return cls(settings, run_id)

    # ------------------------------------------------------------------ plumbing
    @property
    def client(self):
        """python-on-whales client for this engine (created on first use)."""
        if self._client is None:
            from python_on_whales import DockerClient

            self._client = DockerClient(client_call=[self.binary], client_type=self.kind)
        return self._client

    def run_cli(
        self,
        args: Sequence[str],
        *,
        check: bool = True,
        timeout: float | None = 300,
        input_bytes: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        argv = [self.binary, *args]
        try:
            r = subprocess.run(argv, input=input_bytes, capture_output=True, timeout=timeout, env=host_env(env))
        except subprocess.TimeoutExpired as exc:
            raise EngineError(
                f"the engine did not answer within {timeout}s",
                "Check that the engine is healthy (`docker info`).",
                argv=argv,
            ) from exc
        except OSError as exc:
            raise EngineError(
                f"cannot run {self.kind}: {exc}", f"Check the {self.kind} installation.", argv=argv
            ) from exc
        out = subprocess.CompletedProcess(
            argv, r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
        )
        if check and r.returncode != 0:
            raise EngineError(
                f"`{self.kind} {args[0]}` failed",
                "Read the engine's message below; `setupbot clean` removes leftovers.",
                argv=argv,
                exit_code=r.returncode,
                stdout=out.stdout,
                stderr=out.stderr,
            )
        return out

    def next_name(self, hint: str = "runner") -> str:
        safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in hint)[:30] or "c"
        return f"setupbot-{self.run_id}-{next(self._counter)}-{safe}"

    def ping(self) -> None:
        r = self.run_cli(["info", "--format", "{{.ServerVersion}}"], check=False, timeout=30)
        if r.returncode != 0:
            raise EngineError(
                f"the {self.kind} engine does not answer",
                "Start the engine (is the daemon running?) and retry.",
                argv=r.args,
                exit_code=r.returncode,
                stderr=r.stderr,
            )

    # ------------------------------------------------------------------ images
    def image_exists(self, tag: str) -> bool:
        return self.run_cli(["image", "inspect", "--format", "{{.Id}}", tag], check=False).returncode == 0

    def image_id(self, tag: str) -> str | None:
        r = self.run_cli(["image", "inspect", "--format", "{{.Id}}", tag], check=False)
        return r.stdout.strip() if r.returncode == 0 else None

    def image_labels(self, tag: str) -> dict[str, str]:
        r = self.run_cli(["image", "inspect", "--format", "{{json .Config.Labels}}", tag], check=False)
        if r.returncode != 0:
            return {}
        import json

        return json.loads(r.stdout or "null") or {}

    def image_size(self, tag: str) -> int:
        r = self.run_cli(["image", "inspect", "--format", "{{.Size}}", tag], check=False)
        if r.returncode != 0:
            raise ImageUnavailableError(f"image {tag} is not present", "Build it first.")
        return int(r.stdout.strip())

    def image_tags(self, repository: str) -> list[str]:
        r = self.run_cli(["images", repository, "--format", "{{.Repository}}:{{.Tag}}"], check=False)
        return [line for line in r.stdout.split() if not line.endswith(":<none>")]

    def tag(self, source: str, target: str) -> None:
        self.run_cli(["tag", source, target])

    def untag(self, tag: str) -> None:
        self.run_cli(["rmi", "--no-prune", tag], check=False)

    def resolve_image(self, image: str):
        """``image`` present under its official name (pulled through the image source when
        missing): a bot.engine.sources.ResolvedImage with its registry digest, or none for a
        stand-in."""

        if self._source is None:
            self._source = ImageSource(self)
        return self._source.ensure(image)

    def _local_bases(self, dockerfile_text: str) -> dict[str, str]:
        """FROM images made present before a build, and a digest-pinned FROM mapped to the local
        image that carries that digest (a mirror's pull is stored under the mirror's name, so
        the builder could not find ``python:3.13-slim@sha256:...`` by itself)."""
        mapping: dict[str, str] = {}
        for base in dockerfile_facts.base_images(dockerfile_text):
            if "$" in base:
                continue
            if "@" not in base and self.image_exists(base):
                continue
            try:
                resolved = self.resolve_image(base)
            except ImageUnavailableError as exc:
                # The builder then fails on it with its own message, in the build log.
                log.warning("%s", exc.what)
                continue
            if "@" in base:
                mapping[base] = resolved.name
        return mapping

    def carries_ca(self, image: str) -> bool:
        return self.ca is None or self.image_labels(image).get(CA_LABEL) == self.ca.fingerprint

    def free_disk_bytes(self) -> int | None:
        """Free bytes on the filesystem that holds the engine's images and build cache (its
        root directory, or the nearest folder above it this user may look at); None when the
        engine does not say where that is."""
        r = self.run_cli(["info", "--format", "{{.DockerRootDir}}"], check=False, timeout=30)
        root = Path(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip().startswith("/") else None
        for folder in [root, *root.parents] if root is not None else []:
            try:
                return shutil.disk_usage(folder).free
            except OSError:
                continue
        return None

    def prune_build_cache(self) -> bool:
        """Remove the build cache no build is using (the layers and cache mounts of builds
        that are over); True when the engine did it."""
        args = ["buildx", "prune", "-af"] if self.buildkit_available() else ["builder", "prune", "-af"]
        return self.run_cli(args, check=False, timeout=600).returncode == 0

    def buildkit_available(self) -> bool:
        """BuildKit needs the buildx plugin in current CLIs; without it the legacy builder."""
        if self._buildkit is None:
            self._buildkit = (
                self.kind == "docker" and self.run_cli(["buildx", "version"], check=False, timeout=30).returncode == 0
            )
        return self._buildkit

    def build(
        self,
        context_dir: Path | str,
        dockerfile_text: str,
        tag: str,
        no_cache: bool = False,
        log_path: Path | str | None = None,
        labels: Mapping[str, str] | None = None,
        ca: bool = True,
        timeout: float | None = None,
    ) -> BuildResult:
        """Build ``dockerfile_text`` with ``context_dir``. The Dockerfile is written to a temporary
        file outside the context; with a CA configured, FROM lines whose image does not carry it
        are pointed at a transient derivative that does -- in that temporary copy only."""
        context = Path(context_dir)
        if not context.is_dir():
            raise EngineError(f"build context {context} is not a directory", "Pass a directory.")
        ca_bases: dict[str, str] = {}
        text = dockerfile_facts.replace_bases(dockerfile_text, self._local_bases(dockerfile_text))
        if ca and self.ca is not None:
            for base in dockerfile_facts.base_images(text):
                if "$" in base or not self.image_exists(base) or self.carries_ca(base):
                    continue
                ca_bases[base] = self.ca_derivative(base)
            text = dockerfile_facts.replace_bases(text, ca_bases)
        buildkit = self.kind == "docker" and self.buildkit_available()
        if buildkit:
            # the run's own cache mounts; a --no-cache build (the clean replay) gets empty ones,
            # since BuildKit's --no-cache leaves cache mounts as they are
            scope = f"{dockerfile_facts.CACHE_SCOPE}{self.run_id}"
            text = dockerfile_facts.scope_cache_mounts(
                text, f"{scope}-clean{next(self._counter)}" if no_cache else scope
            )
        all_labels = {**self.labels, **(labels or {})}
        build_args: dict[str, str] = {}
        if self.index_env:
            # Declared in the transient copy only, after each FROM, so pip in RUN steps sees them.
            text = dockerfile_facts.declare_args(text, sorted(self.index_env))
            build_args = dict(self.index_env)
        result = self.build_raw(
            context,
            text,
            tag,
            all_labels,
            no_cache=no_cache,
            timeout=timeout or self.settings.engine.build_timeout,
            build_args=build_args,
        )
        result = BuildResult(
            result.ok,
            result.tag,
            # the scope marker is the transient copy's, not the Dockerfile's: the log (which the
            # report quotes) shows the command as written
            re.sub(rf": {re.escape(dockerfile_facts.CACHE_SCOPE)}[\w-]+; ", "", result.log),
            result.seconds,
            ca_bases,
            BUILDKIT_LIMITS_NOTE if buildkit else "",
            cached_steps=result.cached_steps,
        )
        if log_path:
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
            Path(log_path).write_text(result.log)
        return result

    def build_raw(
        self,
        context: Path,
        text: str,
        tag: str | Sequence[str],
        labels: Mapping[str, str],
        *,
        no_cache: bool = False,
        timeout: float = 1800,
        build_args: Mapping[str, str] | None = None,
    ) -> BuildResult:
        tags = [tag] if isinstance(tag, str) else list(tag)
        with tempfile.TemporaryDirectory(prefix="setupbot-build-") as tmp:
            dockerfile = Path(tmp) / "Dockerfile"
            dockerfile.write_text(text)
            buildkit = self.kind == "docker" and self.buildkit_available()
            inline = "" if buildkit else label_instruction(text, labels)
            if inline:
                # the classic builder makes each --label its own step, and a step commits a
                # container of the whole image (seconds each on a large one): one LABEL does it
                dockerfile.write_text(text.rstrip("\n") + "\n" + inline)

            def argv_for(no_cache: bool) -> list[str]:
                return self._build_argv(
                    dockerfile,
                    context,
                    tags,
                    {} if inline else labels,
                    build_args=build_args,
                    no_cache=no_cache,
                    buildkit=buildkit,
                )

            env = host_env()
            if self.kind == "docker":
                env["DOCKER_BUILDKIT"] = "1" if buildkit else "0"
            started = time.monotonic()
            cap, argv = self._run_build(argv_for, no_cache, env, timeout)
            if cap.timed_out:
                said = f"build stopped: {cap.gave_up}" if cap.gave_up else f"build timed out after {timeout}s"
                return BuildResult(False, tags[0], cap.text + f"\n[setupbot] {said}\n", time.monotonic() - started)
            seconds = time.monotonic() - started
            out = cap.text
            cached = count_cached_steps(out, buildkit)
            if buildkit:
                out = plain_buildkit_log(out)
            if cap.returncode != 0 and _engine_failure(out):
                raise EngineError(
                    "the engine failed during an image build",
                    "Check that the engine is healthy.",
                    argv=argv,
                    exit_code=cap.returncode,
                    stderr=out,
                )
            return BuildResult(cap.returncode == 0, tags[0], out, seconds, cached_steps=cached)

    def _build_argv(
        self,
        dockerfile: Path,
        context: Path,
        tags: Sequence[str],
        labels: Mapping[str, str],
        *,
        build_args: Mapping[str, str] | None,
        no_cache: bool,
        buildkit: bool,
    ) -> list[str]:
        """The ``build`` command line for ``dockerfile`` over ``context``."""
        args = ["build", "-f", str(dockerfile)]
        # BuildKit knows only default/none/host; "bridge" is what both builders do by default.
        if self.settings.engine.network_mode not in ("bridge", "default"):
            args += ["--network", self.settings.engine.network_mode]
        if not buildkit:
            args += self._classic_builder_args()
        for t in tags:
            args += ["-t", t]
        for k, v in labels.items():
            args += ["--label", f"{k}={v}"]
        for k, v in (build_args or {}).items():
            args += ["--build-arg", f"{k}={v}"]
        if no_cache:
            args.append("--no-cache")
        if self.kind == "docker" and buildkit:
            args.append("--progress=plain")
        args.append(str(context))
        return [self.binary, *args]

    def _classic_builder_args(self) -> list[str]:
        """What the classic (non-BuildKit) builder is told: the egress network, the limits and
        to leave no container behind."""
        args: list[str] = []
        mode = self.settings.engine.network_mode
        if mode in ("bridge", "default") and self.egress_network() not in ("bridge", "default"):
            # the classic builder runs RUN steps on a user-defined network: the same rules
            args += ["--network", self.egress_network()]
        # RUN steps execute repository code (setup.py during pip install): the classic
        # builder's containers get the runner's memory and CPU limits (SECURITY.md S7).
        # BuildKit takes no per-build limits on the command line.
        args += [
            "--memory",
            self.limits.memory,
            "--memory-swap",
            self.limits.memory,
            "--cpu-period",
            "100000",
            "--cpu-quota",
            str(int(self.limits.cpus * 100000)),
        ]
        # The classic builder keeps the container of a failed RUN step unless told
        # otherwise: a failed build must leave nothing behind.
        args.append("--force-rm")
        return args

    def _resolver_watch(self) -> Watch | None:
        """pip's resolver says it is taking longer than usual when it backtracks through release
        after release (each one downloaded); left alone it can spend the whole build timeout.
        After ``engine.resolver_grace`` seconds more the build is stopped, and the setup loop
        reads why (bot.loop.diagnose: resolver_backtracking). 0 turns the watch off."""
        grace = float(getattr(self.settings.engine, "resolver_grace", 0) or 0)
        if grace <= 0:
            return None
        return Watch(
            PIP_BACKTRACKING,
            grace,
            f"pip's resolver was still backtracking {grace:.0f}s after it said it was taking longer than usual",
        )

    def _run_build(
        self, argv_for: Callable[[bool], list[str]], no_cache: bool, env: dict[str, str], timeout: float
    ) -> tuple[Captured, list[str]]:
        """Run the build command ``argv_for(no_cache)``, once more when it lost its cached parent
        layer: then with --no-cache, so that the second build stands on no cached layer that
        another clean could remove in its turn (seen in CI: a plain second build lost its parent
        again). The capture and the command line that gave it."""
        argv = argv_for(no_cache)
        for attempt in (1, 2):
            try:
                # the build log is the repository's output too: capped the same way
                cap = run_capped(argv, env=env, timeout=timeout, watch=self._resolver_watch())
            except OSError as exc:
                raise EngineError(f"cannot run {self.kind} build: {exc}", "Check the engine.", argv=argv) from exc
            if attempt == 1 and cap.returncode != 0 and not cap.timed_out and lost_cache_parent(cap.text):
                # Another run's clean removed a cached layer while this build stood on it
                argv = argv_for(True)
                continue
            break
        return cap, argv

    def ca_derivative(self, base: str) -> str:
        """A transient image: ``base`` plus the CA bundle, labelled with this run (cleaned up
        with it). Reused within the run."""
        assert self.ca is not None
        base_id = self.image_id(base) or base
        digest = hashlib.sha256(f"{base_id}\0{self.ca.fingerprint}".encode()).hexdigest()[:16]
        tag = f"setupbot/ca-base:{digest}"
        if self.image_exists(tag):
            return tag
        text = render_template("images/finish.Dockerfile.j2", base=base, ca=True, ca_env=CA_ENV, env={})
        with tempfile.TemporaryDirectory(prefix="setupbot-ca-") as tmp:
            self.ca.write_context(Path(tmp))
            # shared by every run on this engine: not labelled with this run, so this run's
            # cleanup does not pull it from under the others
            r = self.build_raw(Path(tmp), text, tag, {LABEL: "1", SHARED_LABEL: "1", CA_LABEL: self.ca.fingerprint})
        if not r.ok:
            raise EngineError(
                f"cannot add the CA bundle to {base}",
                'Check the base image, or set ca.file to "" to build without it.',
                stderr=r.log,
            )
        return tag

    # ------------------------------------------------------------------ containers
    def create_container(
        self,
        image: str,
        *,
        name: str,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        network: str | None = None,
        aliases: Sequence[str] = (),
        command: Sequence[str] | None = None,
        entrypoint: str | None = None,
        labels: Mapping[str, str] | None = None,
        cap_add: Sequence[str] = (),
        sysctls: Mapping[str, str] | None = None,
    ) -> str:
        if not self.image_exists(image):
            # Pulls go through the image source (registry or mirror when one answers, else a
            # clear error naming the bootstrap); the engine itself never pulls (pull="never").
            self.resolve_image(image)
        kwargs = hardened_create_kwargs(self.limits, tuple(cap_add))
        runner = (labels or {}).get("setupbot.role") == "runner"
        net = network or (self.egress_network() if runner else self.settings.engine.network_mode)
        # The engine's CLI directly (not a client library that hands it the bot's whole
        # environment): every host subprocess gets the allow-listed environment (SECURITY.md S12).
        args = ["create", "--name", name, "--pull", "never", "--network", net]
        for alias in aliases if network else ():
            args += ["--network-alias", alias]
        for k, v in (env or {}).items():
            args += ["--env", f"{k}={v}"]
        for k, v in {**self.labels, **(labels or {})}.items():
            args += ["--label", f"{k}={v}"]
        if workdir:
            args += ["--workdir", workdir]
        if entrypoint is not None:
            args += ["--entrypoint", entrypoint]
        args += _hardening_flags(kwargs)
        for key, value in (sysctls or {}).items():  # e.g. IPv6 on loopback for the localhost relay
            args += ["--sysctl", f"{key}={value}"]
        args += [image, *(command or [])]
        r = self.run_cli(args, check=False)
        if r.returncode != 0:
            raise EngineError(
                f"cannot create container {name} from {image}: {r.stderr.strip()[-500:]}",
                "Check the image and the engine; `setupbot clean` removes leftovers.",
                argv=r.args,
                exit_code=r.returncode,
                stderr=r.stderr,
            )
        if network in self._internal_networks and runner:
            # the service network has no route out; the runner installs packages, so it also
            # joins the egress network (whose rules apply to it)
            egress = self.egress_network()
            if egress in ("bridge", "default"):
                egress = "podman" if self.kind == "podman" else "bridge"
            if egress not in ("none", "host"):
                self.run_cli(["network", "connect", egress, name])
        return name

    def egress_network(self) -> str:
        """The network runners reach the registries through: a per-run bridge whose link-local
        and host-bound traffic is dropped where the guard can be set up (bot.engine.egress),
        else the configured network; ``self.egress`` says which, for the report."""
        with self._egress_lock:
            return self._egress_network()

    def _egress_network(self) -> str:
        if self.egress is not None:
            return self._egress_net or self.settings.engine.network_mode
        mode = self.settings.engine.network_mode
        if mode not in ("bridge", "default"):
            self.egress = EgressFacts(False, mode, why=f"engine.network_mode is {mode}")
            return mode
        why = egress_guard.why_not(self.kind)
        if why:
            self.egress = EgressFacts(False, mode, why=why)
            return mode
        name = self.next_name("egress")
        iface = egress_guard.interface_name(self.run_id)
        self.run_cli(
            [
                "network",
                "create",
                "--driver",
                "bridge",
                "-o",
                f"com.docker.network.bridge.name={iface}",
                *[a for k, v in self.labels.items() for a in ("--label", f"{k}={v}")],
                name,
            ]
        )
        try:
            egress_guard.add_rules(self.run_id, iface)
        except OSError as exc:
            self.run_cli(["network", "rm", name], check=False)
            self.egress = EgressFacts(False, mode, why=str(exc))
            return mode
        r = self.run_cli(["network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", name], check=False)
        self._egress_net = name
        # commands that never clean their run (images bootstrap, verify) still drop the rules
        # and the network when the process ends; after SIGKILL `setupbot clean` does
        import atexit

        atexit.register(self._release_egress)
        self.egress = EgressFacts(
            True,
            name,
            blocked=[
                f"{egress_guard.LINK_LOCAL} (link-local, cloud metadata)",
                f"the host (gateway {r.stdout.strip() or '?'} and its other addresses)",
            ],
            open=["the LAN and the internet (the package registries)"],
        )
        return name

    def _release_egress(self) -> None:
        if self._egress_net is None or self.settings.engine.keep_containers:
            return
        if (
            self.run_cli(["network", "rm", self._egress_net], check=False).returncode == 0
            or not self.run_cli(["network", "inspect", self._egress_net], check=False).returncode == 0
        ):
            egress_guard.remove_rules(self.run_id)  # no container of the run can use them now

    def sandbox_notes(self) -> list[str]:
        """What the report must say about protections that do not hold for this run."""
        notes = []
        if self.egress is not None and not self.egress.guarded:
            notes.append(self.egress.report_line())
        if self._buildkit:
            notes.append(BUILDKIT_LIMITS_NOTE)  # the same words as the build's: the record says it once
        return notes

    def start(self, name: str) -> None:
        self.run_cli(["start", name])

    def put_archive(self, name: str, files: Mapping[str, bytes], mode: int = 0o644) -> None:
        """Copy files (absolute container paths -> content) in as a tar stream; parent
        directories are created. Works on created and running containers."""
        import io
        import tarfile

        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for path, content in files.items():
                info = tarfile.TarInfo(path.lstrip("/"))
                info.size = len(content)
                info.mode = mode
                info.mtime = int(time.time())
                tar.addfile(info, io.BytesIO(content))
        self.run_cli(["cp", "-", f"{name}:/"], input_bytes=buf.getvalue())

    def exec_in(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        workdir: str | None = None,
        on_timeout=None,
    ) -> ExecResult:
        """Run ``argv`` in a running container. Only the variables in ``env`` are added to what
        the container already has; the bot's own environment never reaches it."""
        args = [self.binary, "exec"]
        if workdir:
            args += ["-w", workdir]
        for k, v in (env or {}).items():
            args += ["-e", f"{k}={v}"]
        args += [name, *argv]
        started = time.monotonic()
        # Streamed into a capped head-and-tail buffer: a test printing gigabytes costs the bot
        # a few MiB (SECURITY.md S16). On timeout, kill inside the container (the CLI client
        # dying would leave the process running).
        cap = run_capped(
            args,
            env=host_env(),
            timeout=timeout,
            on_timeout=lambda: (on_timeout or self.kill_container_processes)(name),
        )
        text, timed_out = cap.text, cap.timed_out
        if timed_out:
            text += f"\n[setupbot] killed after the {timeout}s timeout\n"
        # a run that timed out, or that ended with no exit status, was killed
        code = cap.returncode if cap.returncode is not None and not (timed_out and cap.returncode == 0) else 137
        return ExecResult(list(argv), code, text, time.monotonic() - started, timed_out)

    def kill_container_processes(self, name: str) -> None:
        """Kill every process the command left, by restarting the container: the engine kills
        the whole cgroup (a fork bomb included) and the filesystem stays as it was."""
        self.run_cli(["restart", "-t", "0", name], check=False, timeout=120)

    def run_once(
        self,
        image: str,
        argv: Sequence[str],
        *,
        timeout: float = 300,
        env: Mapping[str, str] | None = None,
        network: str = "none",
    ) -> ExecResult:
        """A throwaway hardened container running one command (used for image probes)."""
        name = self.next_name("probe")
        self.create_container(image, name=name, env=env, network=network, entrypoint="sleep", command=["2147483647"])
        try:
            self.start(name)
            return self.exec_in(name, argv, timeout=timeout)
        finally:
            self.run_cli(["rm", "-f", "-v", name], check=False)

    def session(
        self,
        image: str,
        env: Mapping[str, str] | None = None,
        workdir: str = "/workspace",
        network: str | None = None,
        name_hint: str = "runner",
    ) -> RunnerSession:

        return RunnerSession(self, image, env=env, workdir=workdir, network=network, name_hint=name_hint)

    def start_container(
        self,
        image: str,
        name_hint: str,
        network: str | None = None,
        env: Mapping[str, str] | None = None,
        aliases: Sequence[str] = (),
        command: Sequence[str] | None = None,
        cap_add: Sequence[str] = (),
    ) -> ContainerHandle:
        """A sibling container (a service), hardened like the runner, labelled with the run."""
        name = self.next_name(name_hint)
        self.create_container(
            image, name=name, env=env, network=network, aliases=aliases, command=command, cap_add=cap_add
        )
        handle = ContainerHandle(self, name)
        try:
            self.start(name)
        except EngineError:
            handle.remove()
            raise
        return handle

    # ------------------------------------------------------------------ networks
    @contextlib.contextmanager
    def network(self, name_hint: str = "net") -> Iterator[str]:
        """A private labelled bridge network, removed on exit (with any container still on it
        that this run created). It is ``--internal``: nothing on it has a route out (SECURITY.md
        S15); a runner on it also joins the engine's default network for package installs."""
        name = self.next_name(name_hint)
        self.run_cli(
            [
                "network",
                "create",
                "--driver",
                "bridge",
                "--internal",
                *[a for k, v in self.labels.items() for a in ("--label", f"{k}={v}")],
                name,
            ]
        )
        self._internal_networks.add(name)
        try:
            yield name
        finally:
            if not self.settings.engine.keep_containers:
                self._remove_network(name)

    def _remove_network(self, name: str) -> None:
        r = self.run_cli(
            ["network", "inspect", "-f", "{{range $id, $c := .Containers}}{{$c.Name}} {{end}}", name], check=False
        )
        for container in r.stdout.split():
            if container.startswith(f"setupbot-{self.run_id}-"):
                self.run_cli(["rm", "-f", "-v", container], check=False)
        self.run_cli(["network", "rm", name], check=False)

    # ------------------------------------------------------------------ cleanup
    def runs(self) -> dict[str, set[str]]:
        """Every run with something left on the engine: run id -> owner labels seen."""
        found: dict[str, set[str]] = {}
        fmt = f'{{{{.Label "{RUN_LABEL}"}}}} {{{{.Label "{OWNER_LABEL}"}}}}'
        for what in (["ps", "-a"], ["network", "ls"], ["volume", "ls"]):
            r = self.run_cli([*what, "--filter", f"label={RUN_LABEL}", "--format", fmt], check=False)
            for line in r.stdout.splitlines():
                run, _, owner = line.strip().partition(" ")
                if run:
                    found.setdefault(run, set()).add(owner.strip())
        ids = self.run_cli(["images", "-aq", "--filter", f"label={RUN_LABEL}"], check=False).stdout.split()
        if ids:
            r = self.run_cli(
                [
                    "image",
                    "inspect",
                    "--format",
                    f'{{{{index .Config.Labels "{RUN_LABEL}"}}}} {{{{index .Config.Labels "{OWNER_LABEL}"}}}}',
                    *sorted(set(ids)),
                ],
                check=False,
            )
            for line in r.stdout.splitlines():
                run, _, owner = line.strip().partition(" ")
                if run:
                    found.setdefault(run, set()).add(owner.strip())
        return found

    def clean_finished(self, among: set[str] | None = None) -> tuple[dict[str, int], list[str]]:
        """Clean every run (of ``among``, default all) whose owner is gone; the runs left alone
        are returned: owner alive, on another host, or unknown (no owner label: an older
        version, which `--run-id` or `--all` removes)."""
        counts = {"containers": 0, "networks": 0, "volumes": 0, "images": 0, "build caches": 0}
        kept = []
        for run, owners in sorted(self.runs().items()):
            if among is not None and run not in among:
                continue
            states = {owner_alive(o) for o in owners if o and o != "<no value>"}
            if not states or True in states or None in states:
                kept.append(run)
                continue
            for k, v in self.clean(run).items():
                counts[k] += v
        return counts, kept

    def prune_cache_mounts(self, run_id: str | None) -> int:
        """Remove the BuildKit cache mounts of one run (of every run: None), found by the scope
        ``scope_cache_mounts`` wrote into their records' descriptions; a mount in use stays."""
        if self.kind != "docker" or not self.buildkit_available():
            return 0
        marker = f"{dockerfile_facts.CACHE_SCOPE}{run_id or ''}"
        r = self.run_cli(["buildx", "du", "--verbose", "--filter", "type=exec.cachemount"], check=False, timeout=120)
        removed = 0
        for record_id in cache_records(r.stdout, marker):
            pruned = self.run_cli(["buildx", "prune", "-f", "--filter", f"id={record_id}"], check=False, timeout=120)
            removed += pruned.returncode == 0
        return removed

    def clean_shared(self) -> int:
        """Remove the shared images (CA derivatives) no container uses (`clean --all`)."""
        removed = 0
        for image in self.run_cli(["images", "-q", "--filter", f"label={SHARED_LABEL}"], check=False).stdout.split():
            if self.run_cli(["rmi", image], check=False).returncode == 0:
                removed += 1
        return removed

    def clean(self, run_id: str | None = None) -> dict[str, int]:
        """Remove containers, networks, volumes and images of one run (or of every run):
        everything labelled ``setupbot.run``. Stand-in images carry no run label and stay."""
        selector = f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL
        counts = {"containers": 0, "networks": 0, "volumes": 0, "images": 0}
        egress_guard.remove_rules(run_id)
        ids = self.run_cli(["ps", "-aq", "--filter", f"label={selector}"]).stdout.split()
        if ids:
            self.run_cli(["rm", "-f", "-v", *ids], check=False)
            counts["containers"] = len(ids)
        nets = self.run_cli(["network", "ls", "-q", "--filter", f"label={selector}"]).stdout.split()
        for n in nets:
            if self.run_cli(["network", "rm", n], check=False).returncode == 0:
                counts["networks"] += 1
        vols = self.run_cli(["volume", "ls", "-q", "--filter", f"label={selector}"]).stdout.split()
        for v in vols:
            if self.run_cli(["volume", "rm", "-f", v], check=False).returncode == 0:
                counts["volumes"] += 1
        # Images: newest first so children go before their parents (snapshots stack up).
        r = self.run_cli(
            ["images", "-a", "--filter", f"label={selector}", "--format", "{{.ID}} {{.Repository}}:{{.Tag}}"]
        )
        seen: list[str] = []
        for line in r.stdout.splitlines():
            image_id, ref = line.split(" ", 1)
            target = ref if not ref.endswith(":<none>") and not ref.startswith("<none>") else image_id
            if self.run_cli(["rmi", "-f", target], check=False).returncode == 0 and image_id not in seen:
                seen.append(image_id)
        counts["images"] = len(seen)
        counts["build caches"] = self.prune_cache_mounts(run_id)
        if run_id is None or run_id == self.run_id:
            # this engine's own networks are gone: a later use of it makes them anew instead of
            # naming a removed one ("network ...-egress not found")
            self.egress = None
            self._egress_net = None
            self._internal_networks.clear()
        return counts


BUILDKIT_LIMITS_NOTE = (
    "image builds ran under BuildKit, which takes no memory, CPU or pids limit on the command line: "
    "engine.memory and engine.cpus held for the runner containers, and the builds' RUN steps "
    "(repository code such as setup.py) were bounded only by the build timeout"
)


def cache_records(du_verbose: str, marker: str) -> list[str]:
    """The ids of the records in ``buildx du --verbose`` output whose description holds
    ``marker``: blocks of "Key: value" lines, one block per record."""
    found: list[str] = []
    for block in re.split(r"\n\s*\n", du_verbose):
        fields = dict(
            (k.strip(), v.strip()) for k, sep, v in (line.partition(":") for line in block.splitlines()) if sep
        )
        if fields.get("ID") and marker in fields.get("Description", ""):
            found.append(fields["ID"].rstrip("*"))
    return found


_BUILDKIT_LINE = re.compile(r"^#\d+ (?:\d+\.\d+ )?")
# Steps whose output is the build's own work; a cached ENV, ARG or WORKDIR step changes no file.
_WORK_STEP = re.compile(r"^(?:RUN|COPY|ADD)\b", re.IGNORECASE)
# classic docker: "Step 3/9 : RUN ..."; podman/buildah: "STEP 3/9: RUN ..."
_CLASSIC_STEP = re.compile(r"^(?:Step|STEP) \d+/\d+ ?: ?(.*)$")
_CLASSIC_CACHED = re.compile(r"^\s*-+> Using cache\b")
# BuildKit's plain progress: "#7 [env 3/6] RUN ..." and, for a step taken from the cache, "#7 CACHED"
_BUILDKIT_STEP = re.compile(r"^#(\d+) \[[^\]]*\d+/\d+\] (.*)$")
_BUILDKIT_CACHED = re.compile(r"^#(\d+) CACHED\s*$")
_ELIDED = re.compile(r"^\[setupbot\] \.\.\. \d+ bytes of output elided \.\.\.$", re.MULTILINE)


def label_instruction(text: str, labels: Mapping[str, str]) -> str:
    """One LABEL instruction that sets ``labels`` on the last stage (the image a build without
    --target gives, as --label does), to append to ``text``; "" when there are none, when the
    text ends in a line continuation, which an appended line would join, or when a label holds
    what the Dockerfile would read otherwise than --label does (a variable, a quote, a backslash,
    a backtick, a line break)."""
    last = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "")
    if not labels or last.rstrip().endswith(("\\", "`")):  # a continuation (a backtick under `# escape=`)
        return ""
    if any(c in item for k, v in labels.items() for item in (k, v) for c in '$\\"\n\r`'):
        return ""
    pairs = " ".join(f'"{k}"="{v}"' for k, v in labels.items())
    return f"LABEL {pairs}\n"


def count_cached_steps(raw_log: str, buildkit: bool) -> int | None:
    """How many RUN, COPY and ADD steps of a build came from the layer cache, from the builder's
    own output (before ``plain_buildkit_log``). A FROM that is already present and a cached
    metadata step (ENV, WORKDIR) do not count: they change no file. None when the log shows no
    step at all (an unknown builder's format)."""
    if _ELIDED.search(raw_log):
        return None  # the middle of the log is gone: a cached step may have been in it
    steps = 0
    cached = 0
    if buildkit:
        work: set[str] = set()
        for line in raw_log.splitlines():
            m = _BUILDKIT_STEP.match(line)
            if m:
                steps += 1
                if _WORK_STEP.match(m.group(2)):
                    work.add(m.group(1))
                continue
            c = _BUILDKIT_CACHED.match(line)
            if c and c.group(1) in work:
                cached += 1
                work.discard(c.group(1))
        return cached if steps else None
    current = ""
    for line in raw_log.splitlines():
        m = _CLASSIC_STEP.match(line)
        if m:
            steps += 1
            current = m.group(1)
        elif _CLASSIC_CACHED.match(line) and _WORK_STEP.match(current):
            cached += 1
            current = ""
    return cached if steps else None


def plain_buildkit_log(text: str) -> str:
    """BuildKit's plain progress prefixes every line with its step and time ("#8 1.234 ");
    without them the log reads like the classic builder's, which diagnosis was written for.
    The summary BuildKit prints after a failed step (between "------" lines, the step's last
    lines again) goes: the log's tail, which the report quotes, then ends with the error."""
    lines = [_BUILDKIT_LINE.sub("", line) for line in text.splitlines()]
    out: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i] == "------" and i + 1 < len(lines) and lines[i + 1].startswith(" > ["):
            end = next((j for j in range(i + 2, len(lines)) if lines[j] == "------"), None)
            if end is not None:
                i = end + 1
                continue
        out.append(lines[i])
        i += 1
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


# the commit of a step on a removed layer, or the next step's container on it (seen in CI, a
# WORKDIR step: 'unable to find image "sha256:<id>"'; the builder names a layer by its id alone)
_LOST_PARENT = re.compile(
    r"failed to set parent sha256:[0-9a-f]+: unknown parent image ID|unable to find image \"sha256:[0-9a-f]{64}\""
)


def lost_cache_parent(output: str) -> bool:
    """The classic builder's commit failed because the cached image it built on was removed
    mid-build (a concurrent `rmi` of another run's images prunes their untagged parents)."""
    return _LOST_PARENT.search(output) is not None


def _engine_failure(output: str) -> bool:
    """A build that failed because the engine broke, not because of the Dockerfile."""
    markers = (
        "Cannot connect to the Docker daemon",
        "error during connect",
        "Is the docker daemon running",
        "no space left on device",
    )
    return any(m in output for m in markers)
