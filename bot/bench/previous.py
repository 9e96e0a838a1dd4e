"""setupbot at another commit of its own repository, as a benchmark system: ``setupbot@<rev>``.

Issues #16 and #19 ask for figures of this code against the previous code *from the same run*:
the same machine, the same load, the same exported trees. ``--systems setupbot,setupbot@1a51deb``
runs both. The named commit's tree is written out once (``git archive`` of this checkout) and
run as ``python -m bot run <copy> --json`` with that tree first on PYTHONPATH, so the old code
runs exactly as it was, with its own settings defaults, seed units and templates.

It runs with ``--no-verify`` where the code knows the flag: the in-process system runs the setup
loop alone, and the prosecutor and judge grade the environment without changing the Dockerfile
the benchmark scores (on a long suite they tripled the run's time).

What it is given is what the in-process ``setupbot`` system is given: a private copy of the
exported tree, a fresh experience store, the pinned commit's date as the era reference and the
operator's SETUPBOT_* settings. Its clean replay is not reused (the old code's record format may
differ): the runner builds its final Dockerfile with no cache and scores it like any other.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from bot.bench.baselines import Produced
from bot.bench.repos import _git  # the benchmark's one git runner (allow-listed environment)
from bot.engine.capture import run_capped
from bot.errors import InputError
from bot.hostenv import host_env
from bot.markers import has_marker

PREFIX = "setupbot@"
_REV = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._/-]{0,99}$")
# the project's own checkout (bot/bench/previous.py -> the repository root)
ROOT = Path(__file__).resolve().parents[2]


def revision_of(system: str) -> str | None:
    """The revision a ``setupbot@<rev>`` system names; None for any other system."""
    if not system.startswith(PREFIX):
        return None
    rev = system[len(PREFIX) :]
    if not _REV.match(rev) or ".." in rev:
        raise InputError(f"--systems: {system!r} does not name a revision", "Write setupbot@<commit>.")
    return rev


def resolve(rev: str, root: Path = ROOT) -> str:
    """The full commit ``rev`` names in the checkout at ``root``."""
    proc = _git(root / ".git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", timeout=60)
    if proc.returncode != 0:
        raise InputError(f"setupbot@{rev}: no such commit in {root}", "Name a commit of this checkout.")
    return proc.stdout.decode().strip()


def _known_flags(code: Path, *flags: str) -> set[str]:
    """Which of ``flags`` the ``run`` command of the code written out at ``code`` declares (in
    the command itself, the top-level parser or the options every command shares)."""
    texts = [
        path.read_text(errors="replace")
        for rel in ("bot/commands/run.py", "bot/cli.py", "bot/commands/_common.py")
        if (path := code / rel).is_file()
    ]
    return {flag for flag in flags if any(f'"{flag}"' in text for text in texts)}


def code_at(rev: str, cache: Path, root: Path = ROOT) -> Path:
    """The tree of ``rev`` written out under ``cache/<commit>`` (once; later calls reuse it)."""
    commit = resolve(rev, root)
    dest = cache / commit
    done = dest / ".setupbot-tree-complete"
    if done.is_file():
        return dest
    top = set(_git(root / ".git", "ls-tree", "--name-only", commit, timeout=60).stdout.decode().split())
    wanted = [p for p in ("bot", "templates", "schemas", "pyproject.toml") if p in top]
    if "bot" not in wanted:
        raise InputError(f"setupbot@{rev}: commit {commit[:12]} has no bot package", "Name a commit of setupbot.")
    proc = _git(root / ".git", "archive", "--format=tar", commit, "--", *wanted, timeout=60)
    if proc.returncode != 0:
        raise InputError(f"setupbot@{rev}: git archive failed", proc.stderr.decode(errors="replace")[-300:])
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        tar.extractall(dest, filter="data")  # our own commit's tree, nothing from a benchmarked repository
    done.write_text(commit + "\n")
    return dest


def child_env(code: Path, scratch: Path, as_of: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the old code's run: the host allow-list, the operator's SETUPBOT_*
    settings, a fresh store in ``scratch`` and the pinned commit's date."""
    source = dict(os.environ if environ is None else environ)
    env = host_env(environ=source)
    env.update({k: v for k, v in source.items() if k.startswith("SETUPBOT_")})
    env["PYTHONPATH"] = str(code)
    env["SETUPBOT_KNOWLEDGE_URL"] = ""
    env["SETUPBOT_KNOWLEDGE_PATH"] = str(scratch / "knowledge.sqlite")
    if as_of:
        env["SETUPBOT_TARGET_AS_OF"] = as_of
    return env


def produce(
    system: str,
    repo_dir: Path,
    scratch: Path,
    settings: Any,
    cache: Path,
    *,
    timeout: float | None = None,
    root: Path = ROOT,
) -> tuple[Produced, dict[str, Any]]:
    """Run the code of ``system``'s revision (a commit of the checkout at ``root``) on
    ``repo_dir``; its Dockerfile, the files it wrote beside it (the lock the Dockerfile copies)
    and what its run record says."""
    rev = revision_of(system) or ""
    code = code_at(rev, cache, root)
    out_json = scratch / "run-output.json"
    as_of = str(getattr(getattr(settings, "target", None), "as_of", "") or "")
    wall = float(getattr(getattr(settings, "budgets", None), "wall_clock", 0) or 0)
    started = time.monotonic()
    # run_capped: a stopped benchmark (capture.cancel_all) stops the child with SIGTERM, which
    # cleans up after itself like any interrupted `setupbot run`
    # like the in-process system, which runs the setup loop alone: no prosecutor or judge after
    # the replay (they grade, the Dockerfile is the same), unless the code is older than the flag
    known = _known_flags(code, "--no-verify", "--json", "-q", "--output-dir")
    no_verify = ["--no-verify"] if "--no-verify" in known else []
    # code older than the --json summary and -q (the commit before issue 16 has neither) runs
    # without them: its run record and the default output folder say what it wrote
    summary_args = ["--json", str(out_json)] if "--json" in known else []
    quiet = ["-q"] if "-q" in known else []
    # a repository that keeps a Dockerfile of its own where setupbot writes (no setupbot marker)
    # has it left alone: that code writes into a folder of its own, so that what it produced is
    # what is scored, never the repository's file
    out_dir = ".devcontainer"
    own = repo_dir / out_dir / "Dockerfile"
    if own.is_file() and not has_marker(own.read_text(errors="replace")) and "--output-dir" in known:
        out_dir = BENCH_OUTPUT_DIR
    cap = run_capped(
        [
            sys.executable,
            "-m",
            "bot",
            "run",
            str(repo_dir),
            *summary_args,
            *quiet,
            *no_verify,
            *(["--output-dir", out_dir] if out_dir != ".devcontainer" else []),
        ],
        env=child_env(code, scratch, as_of),
        timeout=timeout or (wall + 600 if wall else None),
        head=0,
        tail=1 << 16,
        cwd=str(scratch),
    )
    tail = cap.text[-600:]
    exit_code: int | None = cap.returncode
    if cap.timed_out:
        tail, exit_code = "the run outlived its budget by 600 s and was stopped", None
    seconds = time.monotonic() - started
    summary = _read_json(out_json)
    record = _read_json(repo_dir / ".setupbot" / "run.json")
    # the files the run says it wrote; an older code's summary may not list them
    files = _written(repo_dir, summary.get("written") or [f"{out_dir}/Dockerfile"])
    dockerfile = next((text for path, text in files.items() if path.endswith("Dockerfile")), "")
    files = {p: t for p, t in files.items() if not p.endswith("Dockerfile")}
    if not has_marker(dockerfile):
        dockerfile = ""  # the repository's own, read back where the code wrote nothing
    details = {
        "commit": code.name[:12],
        "exit_code": exit_code,
        "loop_status": record.get("status") or summary.get("status"),
        "verdict": summary.get("verdict"),
        "remaining": str(summary.get("remaining") or "")[:1000],
    }
    produced = Produced(
        system,
        dockerfile,
        seconds,
        ok=bool(dockerfile),
        reason="" if dockerfile else f"{system} wrote no Dockerfile (exit {exit_code}): {tail.strip()[-300:]}",
        details=details,
        files=files,
    )
    meta = {"steps": record.get("steps"), "repairs": len(record.get("repairs") or [])}
    return produced, meta


# where the code writes when the repository has a Dockerfile of its own at the usual place
BENCH_OUTPUT_DIR = ".setupbot-bench-output"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _written(repo_dir: Path, paths: list[Any]) -> dict[str, str]:
    """The text of each written file, by repository-relative path (only files inside the copy)."""
    out: dict[str, str] = {}
    root = repo_dir.resolve()
    for raw in paths:
        path = (repo_dir / str(raw)).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            continue
        try:
            out[path.relative_to(root).as_posix()] = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
    return out
