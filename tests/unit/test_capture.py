"""S16: output capture is bounded (a head, a tail and a count of what was left out)."""

from __future__ import annotations

import sys

from bot.engine.capture import HeadTail, run_capped
from bot.hostenv import host_env


def test_head_and_tail_are_kept_and_the_middle_is_counted():
    buf = HeadTail(head=10, tail=20)
    data = bytes(range(48, 58)) * 1000  # 10,000 bytes
    for i in range(0, len(data), 7):
        buf.write(data[i : i + 7])
    text = buf.text()
    assert text.startswith(data[:10].decode())
    assert text.endswith(data[-20:].decode())
    assert f"... {10_000 - 30} bytes of output elided ..." in text
    assert len(buf.tail) <= 40 and buf.total == 10_000


def test_short_output_is_kept_whole():
    buf = HeadTail(head=10, tail=20)
    buf.write(b"hello world, all of it")
    assert buf.text() == "hello world, all of it"


def test_fifty_megabytes_through_a_pipe_keep_five_mebibytes_at_most():
    code = "import sys\nline = b'x' * 1023 + b'\\n'\nfor _ in range(50 * 1024): sys.stdout.buffer.write(line)\nprint('THE END')"
    cap = run_capped([sys.executable, "-c", code], env=host_env(), timeout=120)
    assert cap.returncode == 0 and cap.total_bytes > 50 * 1024 * 1024
    assert len(cap.text) < (1 << 20) + (4 << 20) + 200
    assert cap.text.rstrip().endswith("THE END") and "bytes of output elided" in cap.text


def test_a_command_over_its_timeout_is_killed():
    cap = run_capped(
        [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"], env=host_env(), timeout=1
    )
    assert cap.timed_out and "started" in cap.text and cap.returncode != 0


def test_a_watch_stops_a_command_its_pattern_has_stood_in_for_the_grace_and_not_before():
    import re
    import time

    from bot.engine.capture import Watch

    pattern = re.compile(r"taking longer than usual")
    speech = (
        "print('Collecting x', flush=True); time.sleep(2); print('INFO: This is taking longer than usual', flush=True)"
    )
    started = time.monotonic()
    cap = run_capped(
        [sys.executable, "-c", f"import time; {speech}; time.sleep(60)"],
        env=host_env(),
        timeout=50,
        watch=Watch(pattern, 1.0, "still backtracking"),
    )
    took = time.monotonic() - started
    assert cap.timed_out and cap.gave_up == "still backtracking" and cap.returncode != 0
    assert 3 <= took < 40 and "taking longer than usual" in cap.text  # after the line and the grace, not at 60 s
    quiet = run_capped(
        [sys.executable, "-c", "import time; time.sleep(2); print('done')"],
        env=host_env(),
        timeout=30,
        watch=Watch(pattern, 0.5, "never"),
    )
    assert not quiet.timed_out and quiet.gave_up == "" and quiet.returncode == 0
