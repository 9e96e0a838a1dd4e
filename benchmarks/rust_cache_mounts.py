#!/usr/bin/env python3
"""Rust cache-mount benchmark: what the loop's repair trial costs with and without BuildKit cache
mounts. For a Rust repository whose plan installs Debian packages (a -sys crate's -dev package),
each mode builds three times, as the loop does: the plan without its apt step (the first
attempt, which fails in the -sys crate's build script), the plan with it (the repair's trial:
everything from the apt step on runs again), then the clean replay (--no-cache); then, as a
developer does, it edits one source file and builds again. Prints each build's seconds per mode:

- classic: the classic builder (no buildx);
- buildkit: BuildKit, the Dockerfile without cache mounts;
- buildkit+mounts: BuildKit, the Dockerfile setupbot writes under BuildKit.

    python benchmarks/rust_cache_mounts.py                          # tests/fixtures/repos/rust-sys
    python benchmarks/rust_cache_mounts.py --repo PATH --buildx-config ~/.cache/setupbot-ci/buildx

--buildx-config is a Docker config folder with the buildx plugin (what .ci/buildx.sh prepares),
needed when the engine's CLI has none. Each mode starts from empty caches (a fresh ENV line
after FROM), so the modes do not reuse each other's layers.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.config import load_settings  # noqa: E402
from bot.ecosystems.rust.compile import compile_dockerfile  # noqa: E402
from bot.ecosystems.rust.graph import RUNTIME  # noqa: E402
from bot.ecosystems.rust.prove import make_plan  # noqa: E402
from bot.ecosystems.rust.setup import offered_versions  # noqa: E402
from bot.engine import Engine  # noqa: E402

APT_STEP = re.compile(r"# system packages.*?rm -rf /var/lib/apt/lists/\*\n", re.S)


def texts(repo: Path, offered: list[str], mounts: bool, nonce: str) -> tuple[str, str]:
    plan = make_plan(repo, offered)
    if mounts:
        plan.graph.nodes[RUNTIME].attrs["cache_mounts"] = True
    full = compile_dockerfile(plan.graph).text
    full = re.sub(r"^(FROM .*)$", rf"\1\nENV SETUPBOT_BENCH_NONCE={nonce}", full, count=1, flags=re.M)
    stripped = APT_STEP.sub("", full)
    if stripped == full:
        raise SystemExit(f"{repo}: the plan installs no Debian package, so there is no repair to time")
    return stripped, full


def edit_a_source_file(repo: Path) -> None:
    rs = sorted(p for p in repo.rglob("*.rs") if "target" not in p.parts and p.name in ("lib.rs", "main.rs"))
    if not rs:
        raise SystemExit(f"{repo}: no lib.rs or main.rs to edit")
    rs[0].write_text(rs[0].read_text() + "\n// edited by benchmarks/rust_cache_mounts.py\n")


def mode(name: str, source: Path, offered: list[str], buildx: str | None, mounts: bool) -> list[float]:
    if buildx:
        os.environ["DOCKER_CONFIG"] = buildx
    else:
        os.environ.pop("DOCKER_CONFIG", None)
    engine = Engine.from_settings(load_settings(None))
    if engine.buildkit_available() != bool(buildx):
        raise SystemExit(f"{name}: the engine's builder is not the one asked for")
    first, trial = texts(source, offered, mounts, uuid.uuid4().hex[:12])
    tag = f"setupbot-bench/cache-mounts:{engine.run_id}"
    seconds = []
    with tempfile.TemporaryDirectory(prefix="setupbot-bench-mounts-") as tmp:
        repo = Path(tmp) / source.name
        shutil.copytree(source, repo, ignore=shutil.ignore_patterns("target", ".git"))
        try:
            for text, no_cache, must, edit in (
                (first, False, False, False),
                (trial, False, True, False),
                (trial, True, True, False),
                (trial, False, True, True),
            ):
                if edit:
                    edit_a_source_file(repo)
                result = engine.build(repo, text, tag, no_cache=no_cache, timeout=3600)
                if result.ok != must:
                    raise SystemExit(f"{name}: build {'passed' if result.ok else 'failed'}:\n{result.log[-3000:]}")
                seconds.append(result.seconds)
        finally:
            engine.clean(engine.run_id)
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=ROOT / "tests" / "fixtures" / "repos" / "rust-sys")
    ap.add_argument("--buildx-config", default=os.environ.get("SETUPBOT_TEST_BUILDX_CONFIG", ""))
    args = ap.parse_args()
    os.environ.setdefault("SETUPBOT_IMAGES_SOURCE", "standins")
    probe = Engine.from_settings(load_settings(None))
    offered = offered_versions(probe, load_settings(None))
    buildx = None if probe.buildkit_available() else (args.buildx_config or None)
    if buildx is None and not probe.buildkit_available():
        raise SystemExit("no buildx: pass --buildx-config (source .ci/buildx.sh to make one)")
    rows = []
    if not probe.buildkit_available():
        rows.append(("classic", mode("classic", args.repo, offered, None, False)))
    rows.append(("buildkit", mode("buildkit", args.repo, offered, buildx, False)))
    rows.append(("buildkit+mounts", mode("buildkit+mounts", args.repo, offered, buildx, True)))
    print(f"repository: {args.repo}")
    print(f"{'mode':<17}{'first (fails)':>15}{'repair trial':>14}{'clean replay':>14}{'source edit':>13}")
    for name, (a, b, c, d) in rows:
        print(f"{name:<17}{a:>14.1f}s{b:>13.1f}s{c:>13.1f}s{d:>12.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
