"""A stopped benchmark stops: with --jobs N the repositories run in worker threads and a signal
reaches the main thread only. The queued repositories are cancelled, the running ones' commands
are stopped (SIGTERM), and nothing of a stopped pair is recorded as a result."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

from bot.bench import runner
from bot.bench.repos import BenchRepo
from bot.bench.runner import BenchOptions, run_bench
from bot.cli import _terminate_like_interrupt
from bot.engine import capture
from bot.errors import Interrupted
from bot.hostenv import host_env


@pytest.fixture(autouse=True)
def _allowed_again():
    capture.reset_cancel()
    yield
    capture.reset_cancel()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purpose
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def test_cancel_stops_a_running_command_in_another_thread_and_refuses_new_ones():
    outcome: dict = {}

    def work():
        try:
            capture.run_capped(["sleep", "60"], env=host_env())
        except Interrupted as exc:
            outcome["raised"] = exc
        outcome["at"] = time.monotonic()

    t = threading.Thread(target=work)
    t.start()
    time.sleep(0.5)
    started = time.monotonic()
    capture.cancel_all()
    t.join(timeout=20)
    assert not t.is_alive() and "raised" in outcome
    assert outcome["at"] - started < 5  # polled each second, SIGTERM ends sleep at once
    with pytest.raises(Interrupted):
        capture.run_capped(["true"], env=host_env())
    capture.reset_cancel()
    assert capture.run_capped(["true"], env=host_env()).returncode == 0


def test_an_exception_while_waiting_stops_the_command(monkeypatch):
    monkeypatch.setattr(capture, "_POLL_SECONDS", 0.1)
    procs: list = []
    real_wait = subprocess.Popen.wait

    def interrupted_wait(self, timeout=None):
        procs.append(self)
        if len(procs) == 3:
            raise KeyboardInterrupt  # a signal arriving while the main thread waits
        return real_wait(self, timeout=timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", interrupted_wait)
    with pytest.raises(KeyboardInterrupt):
        capture.run_capped(["sleep", "60"], env=host_env())
    assert procs and not _alive(procs[0].pid)


def test_a_stopped_benchmark_runs_no_queued_repository_and_records_no_stopped_pair(tmp_path, monkeypatch):
    started: list[str] = []
    appended: list[dict] = []

    def fake_pair(repo, system, pristine, export, opts, progress):
        started.append(repo.name)
        if repo.name in ("o/slow", "o/slow2"):
            try:
                capture.run_capped(["sleep", "60"], env=host_env())
            except Interrupted as exc:
                return {"repo": repo.name, "system": system, "status": "system-error", "reason": exc.what}
        return {"repo": repo.name, "system": system, "status": "ok"}

    monkeypatch.setattr(runner, "prepare_git_dir", lambda repo, root, scratch: scratch)
    monkeypatch.setattr(runner, "export_tree", lambda git_dir, sha, dest: runner.ExportResult(dest, []))
    monkeypatch.setattr(runner, "run_pair", fake_pair)
    monkeypatch.setattr(runner.results_io, "append_record", lambda out, record: appended.append(record))
    repos = [BenchRepo(n, "a" * 40) for n in ("o/slow", "o/slow2", "o/queued1", "o/queued2")]
    # SIGTERM reaches the main thread, where the command line turns it into KeyboardInterrupt
    previous = _terminate_like_interrupt()
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
    opts = BenchOptions(repos=repos, systems=("setupbot",), out=tmp_path / "results", git_root=tmp_path, jobs=2)
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_bench(opts)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert time.monotonic() - t0 < 15  # not the 60 s of the slow repository
    assert sorted(started) == ["o/slow", "o/slow2"]  # the queued ones never started
    assert appended == []  # the stopped pair is not a result: it reruns on the next resume
