"""The runner-container session: one hardened container the loop works in, with a LIFO stack
of snapshots for speculative repairs (try a fix; keep it, or roll back to the snapshot).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bot.engine.ca import CA_ENV, CONTAINER_EXTRA, MERGE_SCRIPT
from bot.engine.results import ExecResult
from bot.errors import EngineError
from bot.paths import templates_dir

if TYPE_CHECKING:
    from bot.engine.core import Engine

log = logging.getLogger(__name__)

# PID 1 is tini (``init``); this keeps the container alive between commands. A number, not
# "infinity", so busybox sleep understands it too.
KEEPER = ("sleep", "2147483647")
_MERGE_PATH = "/tmp/setupbot-ca-merge.sh"


class RunnerSession:
    """``with engine.session(image) as s:`` -- the container exists inside the block only
    (unless ``engine.keep_containers``), and so do its snapshot images."""

    def __init__(
        self,
        engine: Engine,
        image: str,
        *,
        env: Mapping[str, str] | None = None,
        workdir: str = "/workspace",
        network: str | None = None,
        name_hint: str = "runner",
    ) -> None:
        self.engine = engine
        self.image = image
        self.workdir = workdir
        self.network = network
        self.name = engine.next_name(name_hint)
        self._inject_ca = engine.ca is not None and not engine.carries_ca(image)
        # The container's environment: what the image sets, what the caller names, and the CA
        # variables. Nothing is taken from the bot's own environment.
        self.env = {**(CA_ENV if self._inject_ca else {}), **dict(env or {})}
        # (image tag, note, committed), oldest first; a frame that is not committed names the
        # image the container was made from, which the session does not own and never removes
        self._stack: list[tuple[str, str, bool]] = []
        self._snapshots_made = 0
        self._started = False
        # the image the container was made from, and whether the container still holds just
        # that: no command run in it since was one that may change it (``exec(changes=...)``)
        self._source = image
        self._pristine = False

    # --------------------------------------------------------------- lifecycle
    def __enter__(self) -> RunnerSession:
        try:
            self._create(self.image)
            if self._inject_ca:
                self._install_ca()
            self._pristine = True
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _create(self, image: str) -> None:
        # on a private network the engine disables IPv6 even on loopback: tests that reach a
        # service at [::1] fail with "Cannot assign requested address" unless ::1 exists
        sysctls = {"net.ipv6.conf.lo.disable_ipv6": "0"} if self.network else None
        self.engine.create_container(
            image,
            name=self.name,
            env=self.env,
            workdir=self.workdir,
            network=self.network,
            entrypoint=KEEPER[0],
            command=KEEPER[1:],
            labels={"setupbot.role": "runner"},
            sysctls=sysctls,
        )
        self.engine.start(self.name)
        self._started = True

    def _install_ca(self) -> None:

        assert self.engine.ca is not None
        script = (templates_dir() / "images" / MERGE_SCRIPT).read_bytes()
        self.engine.put_archive(self.name, {CONTAINER_EXTRA: self.engine.ca.pem, _MERGE_PATH: script})
        r = self.exec(["sh", _MERGE_PATH], timeout=120)
        self.exec(["rm", "-f", _MERGE_PATH], timeout=60)
        if r.exit_code != 0:
            log.warning("CA merge in %s exited %s: %s", self.name, r.exit_code, r.output[-500:])

    def close(self) -> None:
        if self.engine.settings.engine.keep_containers:
            log.warning("keeping container %s and %d snapshot(s) (engine.keep_containers)", self.name, len(self._stack))
            return
        try:
            self.engine.run_cli(["rm", "-f", "-v", self.name], check=False)
        finally:
            self._pop_above(0)
            self._started = False

    # --------------------------------------------------------------- commands
    def exec(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        workdir: str | None = None,
        *,
        changes: bool = True,
    ) -> ExecResult:
        """Run ``argv`` (a list, never a shell string). Over ``timeout`` seconds (default
        engine.command_timeout) every process in the container is killed and the result says
        ``timed_out``. ``changes=False`` says the command leaves nothing that a snapshot must
        keep: it reads, or runs the tests, whose caches and reports a fresh container on the
        same image makes again. Any other command may change the container."""
        if not self._started:
            raise EngineError("the runner session is not open", "Use it inside `with engine.session(...)`.")
        if isinstance(argv, str):
            raise TypeError("exec takes an argv list, not a shell string")
        limit = self.engine.settings.engine.command_timeout if timeout is None else timeout
        if changes:
            self._pristine = False
        # The host's package index settings at exec time only: not in the container's
        # configuration, so never in a snapshot image either.
        index_env = getattr(self.engine, "index_env", None) or {}
        if index_env:
            env = {**index_env, **dict(env or {})}
        return self.engine.exec_in(self.name, list(argv), env=env, timeout=limit, workdir=workdir)

    def kill_processes(self) -> None:
        """Kill everything running in the container (background processes included); the
        filesystem stays."""
        self.engine.kill_container_processes(self.name)

    def copy_in(self, host_path: Path | str, container_path: str) -> None:
        """Copy a file, or a directory's contents, into the container."""
        src = Path(host_path)
        if not src.exists():
            raise EngineError(f"cannot copy {src} into the runner: it does not exist")
        if src.is_dir():
            self.exec(["mkdir", "-p", container_path], timeout=60)
            self.engine.run_cli(["cp", f"{src}/.", f"{self.name}:{container_path}"], timeout=900)
        else:
            parent = container_path.rsplit("/", 1)[0] or "/"
            self.exec(["mkdir", "-p", parent], timeout=60)
            self.engine.run_cli(["cp", str(src), f"{self.name}:{container_path}"], timeout=900)

    # --------------------------------------------------------------- snapshots
    @property
    def depth(self) -> int:
        return len(self._stack)

    @property
    def snapshots(self) -> list[tuple[str, str]]:
        return [(tag, note) for tag, note, _ in self._stack]

    def snapshot(self, note: str = "") -> str:
        """Commit the container's filesystem and push it; returns the image id. A container
        that holds only the image it was made from (no command since that may change it) is
        not committed: the frame names that image, and rolling back to it makes a container
        from it again. A commit takes seconds for every hundred megabytes the container has
        written (a trial's installs), and the loop snapshots before every trial."""
        if self._pristine and self._started:
            self._stack.append((self._source, note, False))
            image_id = self.engine.image_id(self._source)
            assert image_id
            return image_id
        self._snapshots_made += 1
        suffix = self.name[len(f"setupbot-{self.engine.run_id}-") :]
        tag = f"setupbot/snapshot:{self.engine.run_id}-{suffix}-{self._snapshots_made}"
        owner = self.engine.labels.get("setupbot.owner", "")
        changes = [
            f"LABEL setupbot=1 setupbot.run={self.engine.run_id} setupbot.snapshot=1"
            + (f" setupbot.owner={owner}" if owner else "")
        ]
        args = ["commit"]
        for c in changes:
            args += ["--change", c]
        self.engine.run_cli([*args, self.name, tag], timeout=900)
        self._stack.append((tag, note, True))
        image_id = self.engine.image_id(tag)
        assert image_id
        return image_id

    def rollback(self, n: int = 1) -> None:
        """Restore the n-th most recent snapshot: a new container from it with the same name,
        mounts, environment, working directory and network. The frames above it are dropped;
        it stays on top, so the next try can roll back to it again."""
        if n < 1 or n > len(self._stack):
            raise EngineError(
                f"cannot roll back {n} snapshot(s): the stack holds {len(self._stack)}",
                "Take a snapshot before trying a change.",
            )
        target = self._stack[-n][0]
        self._pop_above(len(self._stack) - n + 1)
        self.engine.run_cli(["rm", "-f", "-v", self.name])
        self._started = False
        self._create(target)
        if target == self.image and self._inject_ca:
            self._install_ca()  # a commit holds the CA; the image it was made from does not
        self._source, self._pristine = target, True

    def _pop_above(self, keep: int) -> None:
        """Drop the frames from index ``keep`` up, removing the images the session committed."""
        while len(self._stack) > keep:
            tag, _, committed = self._stack.pop()
            if committed:
                self.engine.run_cli(["rmi", "-f", tag], check=False)

    def drop(self, n: int = 1) -> None:
        """Pop ``n`` frames without restoring (the change made since is kept)."""
        if n < 0 or n > len(self._stack):
            raise EngineError(f"cannot drop {n} snapshot(s): the stack holds {len(self._stack)}")
        self._pop_above(len(self._stack) - n)
