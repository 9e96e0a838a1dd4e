"""Where a long command is: stage, step count and budget, current trial, elapsed time.

The pipeline and the setup loop report through the small interface of ``Reporter``
(``stage()``, ``step(n, budget)``, ``trial(desc)``, ``note(text)``) on ``current()``; they never
know how it is shown. The command line installs one with ``use(...)``:

- on a terminal, a live one-line display (rich) that redraws in place, elapsed time ticking;
- otherwise (CI logs, pipes), one plain timestamped line per change, e.g.
  ``2026-12-01T02:10:07Z +00:41 run · build · step 3/40 · trial: pin numpy<2``;
- ``--quiet``: nothing; ``--verbose``: also every ``note`` (detail lines).

Progress goes to stderr, so that ``--json -`` keeps stdout for the document alone.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Iterator
from typing import IO


class Reporter:
    """The interface, and the reporter that shows nothing (library use, tests, --quiet)."""

    def stage(self, name: str, detail: str = "") -> None:
        """A new stage began (plan, build, trial-build, replay, verify, write, ...)."""

    def step(self, n: int, budget: int) -> None:
        """``n`` steps of the ``budget`` are spent."""

    def trial(self, desc: str) -> None:
        """The candidate repair (or item) being tried now."""

    def note(self, text: str) -> None:
        """A detail line, shown with --verbose only (live display) or as a plain line."""

    def close(self) -> None:
        """Stop redrawing; leave the last state on screen."""


class _State:
    def __init__(self, title: str, clock=time.monotonic) -> None:
        self.title = title
        self.clock = clock
        self.started = clock()
        self.stage = ""
        self.detail = ""
        self.steps: tuple[int, int] | None = None
        self.trial = ""

    def elapsed(self) -> str:
        s = int(self.clock() - self.started)
        return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"

    def line(self) -> str:
        parts = [self.title]
        if self.stage:
            parts.append(self.stage + (f" ({self.detail})" if self.detail else ""))
        if self.steps:
            parts.append(f"step {self.steps[0]}/{self.steps[1]}")
        if self.trial:
            parts.append(f"trial: {self.trial}")
        return " · ".join(parts)


class LineReporter(Reporter):
    """One timestamped line per change, for logs. Repeated identical states are not repeated."""

    def __init__(
        self, title: str, stream: IO[str], *, verbose: bool = False, clock=time.monotonic, wall=time.time
    ) -> None:
        self.state = _State(title, clock)
        self.stream = stream
        self.verbose = verbose
        self.wall = wall
        self._last = ""
        self._lock = threading.Lock()

    def _emit(self, text: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.wall()))
        with self._lock:
            print(f"{stamp} +{self.state.elapsed()} {text}", file=self.stream, flush=True)

    def _changed(self) -> None:
        line = self.state.line()
        if line != self._last:
            self._last = line
            self._emit(line)

    def stage(self, name: str, detail: str = "") -> None:
        self.state.stage, self.state.detail, self.state.trial = name, detail, ""
        self._changed()

    def step(self, n: int, budget: int) -> None:
        self.state.steps = (n, budget)
        self._changed()

    def trial(self, desc: str) -> None:
        self.state.trial = desc[:120]
        self._changed()

    def note(self, text: str) -> None:
        if self.verbose:
            self._emit(text)


class LiveReporter(Reporter):
    """A status line redrawn in place on a terminal (rich.live), with the elapsed time ticking.
    Notes scroll above it with --verbose."""

    def __init__(self, title: str, stream: IO[str], *, verbose: bool = False) -> None:
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        self.state = _State(title)
        self.verbose = verbose
        self._text = Text
        self.console = Console(file=stream, force_terminal=True)
        self.live = Live(
            get_renderable=self._render,
            console=self.console,
            refresh_per_second=4,
            transient=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.live.start()
        # Log records on the same terminal would tear the live line: they print above it instead.
        self._rerouted = []
        for handler in logging.getLogger("bot").handlers:
            if isinstance(handler, logging.StreamHandler) and getattr(handler, "stream", None) is stream:
                self._rerouted.append((handler, handler.setStream(_Above(self.console))))

    def _render(self):
        t = self._text()
        t.append(f"⏱ {self.state.elapsed()} ", style="bold cyan")
        t.append(self.state.title, style="bold")
        if self.state.stage:
            t.append(" · ")
            t.append(self.state.stage + (f" ({self.state.detail})" if self.state.detail else ""), style="yellow")
        if self.state.steps:
            t.append(f" · step {self.state.steps[0]}/{self.state.steps[1]}", style="magenta")
        if self.state.trial:
            t.append(f" · trial: {self.state.trial}", style="green")
        return t

    def stage(self, name: str, detail: str = "") -> None:
        self.state.stage, self.state.detail, self.state.trial = name, detail, ""
        self.live.refresh()

    def step(self, n: int, budget: int) -> None:
        self.state.steps = (n, budget)
        self.live.refresh()

    def trial(self, desc: str) -> None:
        self.state.trial = desc[:120]
        self.live.refresh()

    def note(self, text: str) -> None:
        if self.verbose:
            self.console.print(text, markup=False, highlight=False)

    def close(self) -> None:
        self.live.stop()
        for handler, previous in self._rerouted:
            handler.setStream(previous)


class _Above:
    """A stream whose lines the live display prints above itself."""

    def __init__(self, console) -> None:
        self.console = console

    def write(self, text: str) -> int:
        if text.strip():
            self.console.print(text.rstrip("\n"), markup=False, highlight=False, soft_wrap=True)
        return len(text)

    def flush(self) -> None:
        pass


_current: Reporter = Reporter()


def current() -> Reporter:
    """The reporter in force (a silent one unless a command installed another)."""
    return _current


def make_reporter(title: str, *, quiet: bool = False, verbose: bool = False, stream: IO[str] | None = None) -> Reporter:
    stream = stream or sys.stderr
    if quiet:
        return Reporter()
    isatty = getattr(stream, "isatty", lambda: False)
    if isatty():
        return LiveReporter(title, stream, verbose=verbose)
    return LineReporter(title, stream, verbose=verbose)


@contextlib.contextmanager
def use(reporter: Reporter) -> Iterator[Reporter]:
    """Install ``reporter`` for the duration of a command."""
    global _current
    previous, _current = _current, reporter
    try:
        yield reporter
    finally:
        _current = previous
        reporter.close()


class LineStream:
    """A file-like object whose lines become notes (for code that prints its own progress lines,
    such as the benchmark runner and the image bootstrap)."""

    def __init__(self, reporter: Reporter, *, as_stage: bool = False) -> None:
        self.reporter = reporter
        self.as_stage = as_stage
        self._buf = ""

    def write(self, text: str) -> int:
        self._buf += text
        while "\n" in self._buf:
            line, self._buf = self._buf.split("\n", 1)
            if line.strip():
                (self.reporter.stage if self.as_stage else self.reporter.note)(line.strip())
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False
