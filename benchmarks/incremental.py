#!/usr/bin/env python3
"""Incremental-run benchmark: `setupbot run` twice on a copy of a repository (default
examples/hello-app). Prints the time of the first run (the container work), of the second (no
input changed: no image pulled or built) and whether the second left every output file
byte-identical. Target: the second run under 30 s.

    python benchmarks/incremental.py                    # examples/hello-app
    python benchmarks/incremental.py --repo PATH --runs 3
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=ROOT / "examples" / "hello-app")
    ap.add_argument("--runs", type=int, default=2, help="runs in a row (the first does the work)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="setupbot-incremental-") as tmp:
        repo = Path(tmp) / args.repo.name
        shutil.copytree(args.repo, repo, ignore=shutil.ignore_patterns(".devcontainer", ".setupbot", ".git"))
        outputs = repo / ".devcontainer"
        previous = None
        for n in range(1, args.runs + 1):
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "bot", "run", str(repo)], capture_output=True, text=True)
            seconds = time.monotonic() - started
            now = digest(outputs) if outputs.is_dir() else "-"
            same = "" if previous is None else (" byte-identical" if now == previous else " CHANGED")
            first = (done.stdout.strip().splitlines() or [""])[0]
            print(f"run {n}: {seconds:7.1f} s  exit {done.returncode}  outputs {now}{same}  | {first}")
            if done.returncode not in (0, 20, 21):
                print(done.stderr[-2000:], file=sys.stderr)
                return 1
            previous = now
    return 0


if __name__ == "__main__":
    sys.exit(main())
