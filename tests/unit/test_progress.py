"""Progress: the loop reports stage, steps and trials; a terminal gets a live line redrawn in
place (recorded through a pseudo-terminal), a log gets plain timestamped lines."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import textwrap
from pathlib import Path

from bot import progress

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "tests"))

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \+\d\d:\d\d"

# A `setupbot run` whose pipeline is a stand-in that reports like the real one (the real loop's
# reporting is tested below against the loop doubles): the CLI, the reporter choice and the
# display are the real ones.
SCRIPT = textwrap.dedent("""
    import sys, time
    import bot.pipeline
    from bot import progress
    from types import SimpleNamespace

    def fake_pipeline(repo, settings, **kw):
        r = progress.current()
        r.stage("plan")
        for n, stage in enumerate(["build", "trial-build", "replay"], 1):
            r.stage(stage)
            r.step(n, settings.budgets.max_steps)
            if stage == "trial-build":
                r.trial("pin numpy<2")
            time.sleep(0.25)
        r.note("a detail line")
        import logging
        logging.getLogger("bot.pipeline").warning("a log record during the display")
        record = SimpleNamespace(status="success", degraded=False, repairs=[], run_id="r", remaining="",
                                 replay={"ok": True, "tests": {"passed": 2, "total": 2}})
        return SimpleNamespace(run_record=record, verification=None, warnings=[], written=None, records=[])

    bot.pipeline.run_pipeline = fake_pipeline
    from bot.cli import main
    sys.exit(main(["run", sys.argv[1], "--no-verify", *sys.argv[2:]]))
""")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETUPBOT_")}
    env.update(PYTHONPATH=str(ROOT), TERM="xterm-256color", COLUMNS="120", LINES="30")
    return env


def test_live_display_on_a_pseudo_terminal(tmp_path):
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=_env(),
        close_fds=True,
    )
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 30)
        if not ready:
            break
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=30) == 0
    screen = b"".join(chunks).decode("utf-8", "replace")
    # redrawn in place: cursor movement / line erase sequences, not one line per change
    assert "\x1b[" in screen and ("\x1b[2K" in screen or "\x1b[1A" in screen or "\r" in screen)
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)
    assert "run " + tmp_path.name in plain
    assert "trial-build" in plain and "step 2/40" in plain and "trial: pin numpy<2" in plain
    assert re.search(r"⏱ 00:0\d", plain)  # elapsed time
    assert "a detail line" not in plain  # notes need --verbose
    assert not re.search(STAMP, plain)  # no log lines on a terminal
    assert "setupbot: success" in plain
    # the log record is printed on a line of its own (the live line is erased first and redrawn
    # below it), not glued to the end of the live line
    assert re.search(r"\x1b\[2K[^\n]*W bot.pipeline: a log record during the display\r?\n", screen), screen
    assert re.search(r"[\r\n]W bot.pipeline: a log record during the display\r?\n⏱", plain), plain


def _run_piped(tmp_path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), *flags], capture_output=True, text=True, env=_env(), timeout=60
    )


def test_timestamped_lines_when_not_a_terminal(tmp_path):
    r = _run_piped(tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert "\x1b[" not in r.stderr
    assert any(re.fullmatch(STAMP + rf" run {tmp_path.name} · build · step 1/40", ln) for ln in lines), lines
    assert any(
        re.fullmatch(STAMP + rf" run {tmp_path.name} · trial-build · step 2/40 · trial: pin numpy<2", ln)
        for ln in lines
    ), lines
    assert "a detail line" not in r.stderr
    assert "setupbot: success" in r.stdout  # results stay on stdout


def test_quiet_and_verbose(tmp_path):
    quiet = _run_piped(tmp_path, "--quiet")
    assert quiet.returncode == 0 and not re.search(STAMP, quiet.stderr)
    verbose = _run_piped(tmp_path, "-v")
    assert re.search(STAMP + " a detail line", verbose.stderr)


def test_line_reporter_repeats_nothing_and_counts_elapsed():
    out = io.StringIO()
    t = [100.0]
    r = progress.LineReporter("bench", out, clock=lambda: t[0], wall=lambda: 0)
    r.stage("build")
    r.stage("build")
    t[0] += 75
    r.step(3, 40)
    assert out.getvalue().splitlines() == [
        "1970-01-01T00:00:00Z +00:00 bench · build",
        "1970-01-01T00:00:00Z +01:15 bench · build · step 3/40",
    ]


class Recorder(progress.Reporter):
    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.details: list[tuple[str, str]] = []

    def stage(self, name, detail=""):
        self.events.append(("stage", name))
        self.details.append((name, detail))

    def step(self, n, budget):
        self.events.append(("step", n, budget))

    def trial(self, desc):
        self.events.append(("trial", desc))


def test_the_setup_loop_reports_stages_steps_and_trials(tmp_path):
    from doubles.loop_world import FakeEngine, Need, World, fake_compile, fake_plan_maker

    from bot.config import load_settings
    from bot.loop.orchestrator import run_setup

    world = World([Need("pip:PyYAML", "E   ModuleNotFoundError: No module named 'yaml'")])
    settings = load_settings(tmp_path, environ={}, overrides={"budgets": {"max_steps": 30}})
    rec = Recorder()
    with progress.use(rec):
        record = run_setup(
            tmp_path,
            settings,
            FakeEngine(world),
            None,
            None,
            make_plan=fake_plan_maker("3.11"),
            compile_dockerfile=fake_compile,
            available_pythons=["3.11"],
        )
    assert record.status == "success"
    stages = [e[1] for e in rec.events if e[0] == "stage"]
    assert stages[0] == "plan" and "build" in stages and stages[-1] == "replay"
    steps = [e for e in rec.events if e[0] == "step"]
    assert steps and steps == [("step", n, 30) for n in range(1, len(steps) + 1)]
    assert ("trial", "pip_install PyYAML") in rec.events
    # once an image is built its tests run, and the line says so (a long suite is not the build)
    assert rec.details.index(("build", "the tests")) == rec.details.index(("build", "")) + 1
    assert ("replay", "the tests") in rec.details
    assert progress.current().__class__ is progress.Reporter  # uninstalled afterwards


def test_sigterm_exits_130_like_an_interrupt(tmp_path):
    import signal
    import time

    script = SCRIPT.replace("time.sleep(0.25)", "time.sleep(0.25 if stage != 'replay' else 60)")
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    deadline = time.monotonic() + 30
    seen = ""
    while "replay" not in seen and time.monotonic() < deadline:
        seen += proc.stderr.readline()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, seen + err
    assert "interrupted" in err
