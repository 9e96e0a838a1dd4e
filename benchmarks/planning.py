#!/usr/bin/env python3
"""Planning time, cold and warm (issue 16: ``examples/hello-app`` should plan in < 3 s warm).

Cold: an empty resolution cache (a fresh XDG_CACHE_HOME for setupbot's own cache; uv keeps its
own download cache, as it would on a CI runner with a cached uv). Warm: the same inputs again,
so the resolutions come from setupbot's cache keyed by the inputs hash.

    python benchmarks/planning.py                       # examples/hello-app, 3 warm runs
    python benchmarks/planning.py path/to/repo --warm 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def plan_once(repo: Path, pythons: list[str]) -> tuple[float, dict]:
    from bot.config import load_settings
    from bot.graph import make_plan

    started = time.monotonic()
    plan = make_plan(repo, load_settings(repo), available_pythons=pythons)
    return time.monotonic() - started, plan.timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", nargs="?", type=Path, default=ROOT / "examples" / "hello-app")
    parser.add_argument("--warm", type=int, default=3, help="warm runs after the cold one")
    parser.add_argument("--python", action="append", default=None, help="Python versions offered")
    args = parser.parse_args()
    pythons = args.python or ["3.11", "3.13"]
    with tempfile.TemporaryDirectory(prefix="setupbot-bench-cache-") as cache:
        # the resolution cache lives under XDG_CACHE_HOME; uv's own cache stays where it is
        os.environ.setdefault("UV_CACHE_DIR", str(Path.home() / ".cache" / "uv"))
        os.environ["XDG_CACHE_HOME"] = cache
        cold, cold_t = plan_once(args.repo, pythons)
        warm = [plan_once(args.repo, pythons) for _ in range(args.warm)]
    print(f"repository: {args.repo}")
    print(f"cold plan: {cold:.2f} s  (resolve {cold_t.get('resolve', 0):.2f} s)")
    secs = [w[0] for w in warm]
    if secs:
        print(f"warm plan: median {statistics.median(secs):.2f} s, max {max(secs):.2f} s over {len(secs)} runs "
              f"(resolve {statistics.median(w[1].get('resolve', 0) for w in warm):.2f} s)")
        print(f"target < 3 s warm: {'met' if statistics.median(secs) < 3 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
