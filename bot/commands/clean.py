"""`setupbot clean [--run-id ID | --all]`: remove what runs left behind (containers, networks,
volumes, snapshot and build images), found by label -- also after a run was killed with SIGKILL.
Without an option only finished runs are cleaned: a run whose owning process (recorded in the
labels: host, boot id, pid and start time) still runs is left alone. Stand-in images
(`setupbot images bootstrap`) carry no run label and are kept; the CA derivatives all runs share
go only with `--all`."""

from __future__ import annotations

import argparse

from bot.commands._common import add_json_flag, human, write_json
from bot.config import load_settings


def add_parser(sub) -> None:
    p = sub.add_parser("clean", help="remove containers, networks, volumes and images left by finished runs")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--run-id", default=None, help="only this run (even when it is still going)")
    scope.add_argument(
        "--all", action="store_true", help="every run, live ones included, and the shared CA images no container uses"
    )
    p.add_argument("--engine", choices=["docker", "podman"], help="container engine (engine.kind)")
    add_json_flag(p, "what was removed (schema setupbot.clean/1)")
    p.set_defaults(func=run)


def _line(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in counts.items())


def run(args: argparse.Namespace) -> int:
    from bot.engine import Engine

    settings = load_settings(None, overrides={"engine": {"kind": args.engine}})
    engine = Engine.from_settings(settings, run_id=args.run_id)
    engine.ping()
    out = human(args)
    if args.run_id:
        counts = engine.clean(args.run_id)
        print(f"removed (run {args.run_id}): " + _line(counts), file=out)
        write_json(args, "clean", {"run_id": args.run_id, "removed": dict(counts)})
        return 0
    if args.all:
        counts = engine.clean(None)
        counts["shared images"] = engine.clean_shared()
        print("removed (all runs): " + _line(counts), file=out)
        write_json(args, "clean", {"run_id": None, "removed": dict(counts)})
        return 0
    counts, kept = engine.clean_finished()
    print("removed (finished runs): " + _line(counts), file=out)
    if kept:
        print(
            f"left alone: {len(kept)} run(s) whose owner is still running, on another host or unknown "
            f"({', '.join(kept[:5])}{' ...' if len(kept) > 5 else ''}); --all removes them too",
            file=out,
        )
    write_json(args, "clean", {"run_id": None, "removed": dict(counts), "left_alone": list(kept)})
    return 0
