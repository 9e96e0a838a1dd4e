"""`setupbot clean [--run-id ID]`: remove what runs left behind (containers, networks, volumes,
snapshot and build images), found by label -- also after a run was killed with SIGKILL.
Stand-in images (`setupbot images bootstrap`) carry no run label and are kept."""

from __future__ import annotations

import argparse

from bot.commands._common import add_json_flag, human, write_json
from bot.config import load_settings


def add_parser(sub) -> None:
    p = sub.add_parser("clean", help="remove containers, networks, volumes and images left by runs")
    p.add_argument("--run-id", default=None, help="only this run (default: every run)")
    p.add_argument("--engine", choices=["docker", "podman"], help="container engine (engine.kind)")
    add_json_flag(p, "what was removed (schema setupbot.clean/1)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bot.engine import Engine

    settings = load_settings(None, overrides={"engine": {"kind": args.engine}})
    engine = Engine.from_settings(settings, run_id=args.run_id)
    engine.ping()
    counts = engine.clean(args.run_id)
    scope = f"run {args.run_id}" if args.run_id else "all runs"
    print(f"removed ({scope}): " + ", ".join(f"{n} {kind}" for kind, n in counts.items()), file=human(args))
    write_json(args, "clean", {"run_id": args.run_id, "removed": dict(counts)})
    return 0
