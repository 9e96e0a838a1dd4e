"""Bounded capture of a subprocess's output (SECURITY.md S16).

A repository decides how much its tests and its build print. Output is streamed from the pipe
into a head-and-tail buffer: the first ``head`` bytes and the last ``tail`` bytes are kept, and
what lies between is counted and replaced by one marker line. The bot's memory for one command is
therefore bounded by head + 2 * tail, whatever the command prints.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bot.errors import Interrupted

HEAD_BYTES = 1 << 20  # the start of the output: what was run, the first error
TAIL_BYTES = 4 << 20  # the end: the summary and the last error
_READ = 1 << 16


class HeadTail:
    """Keeps the first ``head`` and the last ``tail`` bytes written to it."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self.head_cap, self.tail_cap = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.elided = 0

    def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        # trim only when the tail is twice its cap: amortised O(1) per byte
        if len(self.tail) > 2 * self.tail_cap:
            cut = len(self.tail) - self.tail_cap
            del self.tail[:cut]
            self.elided += cut

    def text(self) -> str:
        if not self.elided:
            return (bytes(self.head) + bytes(self.tail)).decode(errors="replace")
        tail = bytes(self.tail)
        extra = len(tail) - self.tail_cap
        if extra > 0:
            tail = tail[extra:]
        elided = self.elided + max(extra, 0)
        return (
            bytes(self.head).decode(errors="replace")
            + f"\n[setupbot] ... {elided} bytes of output elided ...\n"
            + tail.decode(errors="replace")
        )


# Set by ``cancel_all``: every command run_capped is running is stopped, and no new one starts.
_CANCELLED = threading.Event()
# how often a running command looks for a cancellation, and how long a stopped one gets to end
_POLL_SECONDS = 1.0
_GRACE_SECONDS = 30.0


def cancel_all() -> None:
    """Stop every command run_capped is running, in every thread, and refuse new ones (each
    raises ``Interrupted``): a caller whose work runs in worker threads (``setupbot bench
    --jobs N``), where a signal reaches the main thread only, stops them this way. A stopped
    command gets SIGTERM and, after a grace period, SIGKILL."""
    _CANCELLED.set()


def cancelled() -> bool:
    return _CANCELLED.is_set()


def reset_cancel() -> None:
    """Allow commands again (a new benchmark in the same process, a test)."""
    _CANCELLED.clear()


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Watch:
    """Gives up on a command once ``pattern`` has stood in its output for ``grace`` seconds
    while it still runs (pip's resolver saying it is taking longer than usual): ``check`` is
    asked about the output's last bytes once a poll, and returns the reason, or "" to go on."""

    WINDOW = 1 << 16

    def __init__(self, pattern: re.Pattern[str], grace: float, reason: str) -> None:
        self.pattern, self.grace, self.reason = pattern, grace, reason
        self.seen_at: float | None = None

    def check(self, buf: HeadTail) -> str:
        if self.seen_at is None:
            window = (bytes(buf.head[-self.WINDOW :]) + bytes(buf.tail[-self.WINDOW :])).decode(errors="replace")
            if self.pattern.search(window):
                self.seen_at = time.monotonic()
            return ""
        return self.reason if time.monotonic() - self.seen_at >= self.grace else ""


def _wait(
    proc: subprocess.Popen, timeout: float | None, watch: Watch | None = None, buf: HeadTail | None = None
) -> bool | str:
    """Wait for ``proc``; True when ``timeout`` passed first, the watch's reason when it gave up
    first (the process is left running for the caller to stop). Raises ``Interrupted`` (the
    process stopped) when ``cancel_all`` was called meanwhile."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if _CANCELLED.is_set():
            _stop(proc)
            raise Interrupted("stopped: the command was cancelled")
        if watch is not None and buf is not None:
            reason = watch.check(buf)
            if reason:
                return reason
        left = _POLL_SECONDS if deadline is None else min(_POLL_SECONDS, deadline - time.monotonic())
        if left <= 0:
            return True
        try:
            proc.wait(timeout=left)
            return False
        except subprocess.TimeoutExpired:
            continue


@dataclass
class Captured:
    returncode: int | None
    text: str
    timed_out: bool
    total_bytes: int
    # why a Watch stopped it before its time (then timed_out is True too)
    gave_up: str = ""


def run_capped(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    timeout: float | None = None,
    on_timeout: Callable[[], None] | None = None,
    head: int = HEAD_BYTES,
    tail: int = TAIL_BYTES,
    cwd: str | None = None,
    watch: Watch | None = None,
) -> Captured:
    """Run ``argv`` with stdout and stderr merged into a HeadTail buffer. On timeout
    ``on_timeout`` runs first (for example killing inside a container), then the process is
    killed if it has not ended within 30 s. ``Interrupted`` when ``cancel_all`` was called (the
    process is stopped), and on any exception while waiting the process is stopped too, so no
    command outlives the run that started it."""
    if _CANCELLED.is_set():
        raise Interrupted("stopped: commands were cancelled")
    buf = HeadTail(head, tail)
    proc = subprocess.Popen(
        list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=dict(env), cwd=cwd
    )
    assert proc.stdout is not None
    fd = proc.stdout.fileno()

    def pump() -> None:
        while True:
            try:
                chunk = os.read(fd, _READ)
            except OSError:
                return
            if not chunk:
                return
            buf.write(chunk)

    reader = threading.Thread(target=pump, name="setupbot-capture", daemon=True)
    reader.start()
    try:
        waited = _wait(proc, timeout, watch, buf)
    except BaseException:
        if proc.poll() is None:
            _stop(proc)
        raise
    gave_up = waited if isinstance(waited, str) else ""
    timed_out = bool(waited)
    if timed_out:
        if on_timeout is None:
            proc.kill()
        else:
            on_timeout()
        try:
            proc.wait(timeout=_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    # the pipe closes when every writer is gone; a grandchild holding it open gets 10 s
    deadline = time.monotonic() + 10
    reader.join(timeout=max(0.0, deadline - time.monotonic()))
    if not reader.is_alive():
        proc.stdout.close()
    return Captured(proc.returncode, buf.text(), timed_out, buf.total, gave_up)
