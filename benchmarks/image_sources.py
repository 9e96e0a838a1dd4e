#!/usr/bin/env python3
"""Time of `setupbot run examples/hello-app` by image source, printed as figures.

    warm        the shared engine's store has the base images and the build cache is warm
                (a second run of the same copy)
    standins    images.source: standins, a fresh copy of the example
    registry    a fresh engine (empty store, tests/doubles/engines.py) that pulls the base
                images from a local registry holding the stand-ins under official names

Needs root (the registry case starts a second Docker daemon) and the stand-ins from
`setupbot images bootstrap`. Each case runs the real pipeline, builds and replay included.

    python benchmarks/image_sources.py [--cases warm,standins,registry]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from doubles.engines import fresh_engine, local_registry, push_as  # noqa: E402


def run(repo: Path, env: dict[str, str]) -> tuple[float, int, str]:
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "bot", "run", str(repo)], env={**os.environ, **env}, cwd=ROOT,
                       capture_output=True, text=True)
    seconds = time.monotonic() - started
    verdict = next((line.split("verdict:", 1)[1].split("(")[0].strip()
                    for line in r.stdout.splitlines() if "verdict:" in line), "?")
    return seconds, r.returncode, verdict


def fresh_copy(top: Path, name: str) -> Path:
    repo = top / name
    shutil.copytree(ROOT / "examples" / "hello-app", repo)
    return repo


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="warm,standins,registry")
    cases = parser.parse_args().cases.split(",")
    rows: list[tuple[str, float, int, str]] = []
    with tempfile.TemporaryDirectory(prefix="setupbot-bench-sources-") as tmp:
        top = Path(tmp)
        if "warm" in cases:
            repo = fresh_copy(top, "hello-app-warm")
            run(repo, {})                                  # fills the build cache
            rows.append(("warm store", *run(repo, {})))
        if "standins" in cases:
            rows.append(("stand-ins only", *run(fresh_copy(top, "hello-app-standins"),
                                                {"SETUPBOT_IMAGES_SOURCE": "standins"})))
        if "registry" in cases:
            with local_registry(top / "registry") as registry:
                for tag in ("python:3.11-slim", "python:3.13-slim"):
                    push_as(None, tag, registry, tag)
                with fresh_engine(top / "engine") as engine_env:
                    env = {**engine_env, "SETUPBOT_IMAGES_REGISTRY": registry, "SETUPBOT_IMAGES_SOURCE": "registry"}
                    rows.append(("empty store, local registry", *run(fresh_copy(top, "hello-app-registry"), env)))
    load = os.getloadavg()[0]
    print(f"setupbot run examples/hello-app (load average {load:.1f}, {os.cpu_count()} CPUs)")
    for name, seconds, code, verdict in rows:
        print(f"  {name:30} {seconds:7.1f} s   exit {code}   verdict {verdict}")
    return 0 if all(code == 0 for _, _, code, _ in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
