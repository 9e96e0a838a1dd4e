"""``setupbot plan PATH``: read the repository, build the DepGraph, compile the Dockerfile.
Starts no container."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bot.errors import InputError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="print the DepGraph and the Dockerfile for a repository (no containers)")
    p.add_argument("path", type=Path, help="the repository checkout")
    p.add_argument("--json", dest="json_out", type=Path, default=None, help="write the plan as JSON to this file")
    p.add_argument("--no-resolve", action="store_true", help="skip the uv resolution check")
    p.add_argument("--python", action="append", default=None, metavar="X.Y",
                   help="a Python version the images offer (repeatable); default: ask the engine, else 3.9-3.13")
    p.add_argument("--quiet", action="store_true", help="print only warnings and the summary")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bot.config import load_settings
    from bot.graph import make_plan

    repo: Path = args.path
    if not repo.is_dir():
        raise InputError(f"{repo} is not a directory", "Pass the path of a repository checkout.")
    settings = load_settings(repo)
    plan = make_plan(repo, settings, available_pythons=args.python, resolve=not args.no_resolve)
    out = sys.stdout
    if not args.quiet:
        out.write(plan.graph.render_text() + "\n\n")
        out.write("---- Dockerfile ----\n")
        out.write(plan.dockerfile.text)
        out.write("---- end ----\n\n")
    for w in plan.warnings:
        out.write(f"warning: {w}\n")
    for key, why in settings.refused:
        out.write(f"warning: refused in .github/setupbot.yml: {key}: {why}\n")
    offered = ", ".join(plan.graph.meta.get("available_pythons", []))
    out.write(f"python {plan.python} ({plan.base_image}, offered: {offered}); tests: {' '.join(plan.test_command)}; "
              f"services: {', '.join(s.name for s in plan.services) or 'none'}; "
              f"planned in {plan.timings['total']:.2f}s\n")
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(plan.to_json(), indent=2, sort_keys=True) + "\n")
        out.write(f"plan written to {args.json_out}\n")
    return 0
