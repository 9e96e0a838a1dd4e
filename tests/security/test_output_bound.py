"""S16: 200 MB of output from a container keep the bot's memory bounded.

The bot runs in a child process (so its peak RSS is its own, not pytest's), pushes 200 MB of test
output through ``docker exec`` into the capped capture, and prints its peak RSS.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MB = 1024 * 1024

CHILD = r"""
import json, resource, sys
from bot.config import load_settings
from bot.engine import Engine
settings = load_settings(sys.argv[1])
engine = Engine.from_settings(settings)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
code = "import sys\nline = b'y' * 1023 + b'\\n'\nfor _ in range(200 * 1024): sys.stdout.buffer.write(line)\nprint('LAST LINE')"
try:
    res = engine.run_once("python:3.11-slim", ["python", "-c", code], timeout=600)
finally:
    engine.clean(engine.run_id)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"rss_before_kib": before, "rss_peak_kib": after, "kept": len(res.output),
                  "exit": res.exit_code, "last": res.output.rstrip().splitlines()[-1],
                  "elided": "bytes of output elided" in res.output}))
"""


@pytest.mark.docker
@pytest.mark.serial  # measures the bot's peak RSS
@pytest.mark.timeout(1000)  # the run's own bound is 900 s
def test_two_hundred_megabytes_of_output_keep_the_bot_rss_bounded(docker_available, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    fig = json.loads(proc.stdout.strip().splitlines()[-1])
    print(
        f"\n200 MB through docker exec: bot peak RSS {fig['rss_peak_kib'] / 1024:.0f} MiB "
        f"(before the command {fig['rss_before_kib'] / 1024:.0f} MiB), output kept {fig['kept'] / MB:.1f} MiB"
    )
    assert fig["exit"] == 0 and fig["last"] == "LAST LINE" and fig["elided"]
    assert fig["kept"] < 5 * MB + 200
    # the capture adds at most head + 2 * tail (9 MiB) and the decoded text to the process
    assert fig["rss_peak_kib"] - fig["rss_before_kib"] < 64 * 1024, fig
