"""``setupbot plan PATH``: read the repository, build the DepGraph, compile the Dockerfile.
Starts no container."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from bot.commands._common import add_json_flag, human, write_json
from bot.errors import InputError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="print the DepGraph and the Dockerfile for a repository (no containers)")
    p.add_argument("path", type=Path, help="the repository checkout")
    add_json_flag(p, "the plan (schema setupbot.plan/1)")
    p.add_argument("--no-resolve", action="store_true", help="skip the uv resolution check")
    p.add_argument(
        "--python",
        action="append",
        default=None,
        metavar="X.Y",
        help="a Python version the images offer (repeatable); default: ask the engine, else 3.9-3.13",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bot.config import load_settings
    from bot.ecosystems import make_plan
    from bot.engine.images import default_pythons

    repo: Path = args.path
    if not repo.is_dir():
        raise InputError(f"{repo} is not a directory", "Pass the path of a repository checkout.")
    settings = load_settings(repo)
    # for_setup_loop=False: show the plan of an ecosystem the setup loop does not drive yet
    # (Rust) instead of refusing it; `run` and `github` still refuse such a repository.
    plan = make_plan(
        repo,
        settings,
        available_pythons=args.python or default_pythons(settings),
        resolve=not args.no_resolve,
        for_setup_loop=False,
    )
    out = human(args)
    if not hasattr(plan, "python"):
        return _show_other_plan(args, plan, out)
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
    out.write(
        f"python {plan.python} ({plan.base_image}, offered: {offered}); tests: {shlex.join(plan.test_command)}; "
        f"services: {', '.join(s.name for s in plan.services) or 'none'}; "
        f"planned in {plan.timings['total']:.2f}s\n"
    )
    if write_json(args, "plan", plan.to_json()) is not None and args.json != "-":
        out.write(f"plan written to {args.json}\n")
    return 0


def _show_other_plan(args: argparse.Namespace, plan: Any, out: Any) -> int:
    """A plan led by an ecosystem other than Python (today Rust): its graph, its Dockerfile and
    its toolchain choice, as text; `setupbot run` proves it through the ecosystem's own loop."""
    ecosystems = ", ".join(plan.graph.meta.get("ecosystems", [])) or "unknown"
    if getattr(args, "json", None) is not None:
        raise InputError(
            f"--json: plan documents (setupbot.plan/1) describe Python plans; this plan is led by {ecosystems}",
            "Run `setupbot plan` without --json to see the plan as text.",
        )
    choice = plan.choice
    if not args.quiet:
        out.write(plan.graph.render_text() + "\n\n")
        out.write("---- Dockerfile ----\n")
        out.write(plan.dockerfile or "(none: no image satisfies the toolchain floor)\n")
        out.write("---- end ----\n\n")
    for w in choice.warnings:
        out.write(f"warning: {w}\n")
    out.write(
        f"{ecosystems}: {choice.image or 'no image'} ({choice.reason}); tests: {shlex.join(plan.test_command)}\n"
        "note: `setupbot run` builds and proves this plan through the ecosystem's own setup loop; "
        "`setupbot github` does not publish it yet\n"
    )
    return 0 if choice.satisfied else 1
