"""`setupbot images bootstrap|list`: offline stand-ins for the images generated Dockerfiles name."""

from __future__ import annotations

import argparse
import sys

from bot.commands._common import add_json_flag, human, reporter_for, write_json
from bot.config import load_settings
from bot.errors import ImageUnavailableError


def add_parser(sub) -> None:
    p = sub.add_parser("images", help="build offline stand-in base/service images; list what this engine offers")
    isub = p.add_subparsers(dest="images_command", required=True, metavar="ACTION")
    b = isub.add_parser(
        "bootstrap",
        help="debootstrap Debian suites and build python/debian/service stand-ins "
        "(works with no registry; images already current are reused)",
    )
    b.add_argument(
        "--python",
        action="append",
        dest="pythons",
        metavar="X.Y",
        help="Python version to build (repeatable; default: all known)",
    )
    b.add_argument(
        "--services",
        default=None,
        metavar="NAMES",
        help="comma-separated services to build (default: all known; '' for none)",
    )
    b.add_argument(
        "--ecosystem",
        action="append",
        default=[],
        metavar="NAME[=X.Y,...]",
        help="also build the stand-ins a registered ecosystem offers, after the others "
        "(repeatable; e.g. rust or rust=1.85)",
    )
    b.add_argument("--force", action="store_true", help="rebuild even when the recipe hash matches")
    b.add_argument(
        "--jobs",
        type=int,
        default=2,
        metavar="N",
        help="images made at once, each as soon as its base is there (default 2)",
    )
    b.add_argument("--engine", choices=["docker", "podman"], help="container engine (engine.kind)")
    add_json_flag(b, "the outcome of each image (schema setupbot.images/1)")
    lst = isub.add_parser("list", help="Python versions and service images this engine offers")
    add_json_flag(lst, "what the engine offers (schema setupbot.images/1)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bot.engine import Engine

    overrides = {"engine": {"kind": getattr(args, "engine", None)}}
    settings = load_settings(None, overrides=overrides)
    engine = Engine.from_settings(settings)
    if args.images_command == "list":
        return _list(args, engine)
    return _bootstrap(args, engine, settings)


def _list(args: argparse.Namespace, engine) -> int:
    from bot.engine import images

    engine.ping()
    pythons = images.local_pythons(engine)
    services = images.available_services(engine)
    out = human(args)
    print("python: " + (" ".join(pythons) if pythons else "(none: run `setupbot images bootstrap`)"), file=out)
    if services:
        for s in services:
            print(f"service: {s.name} {s.version} {s.image}".rstrip(), file=out)
    else:
        print("service: (none)", file=out)
    write_json(
        args,
        "images",
        {
            "action": "list",
            "pythons": list(pythons),
            "services": [{"name": s.name, "version": str(s.version), "image": s.image} for s in services],
            "images": [],
        },
    )
    return 0


def _bootstrap(args: argparse.Namespace, engine, settings) -> int:
    from bot.engine import images

    wanted: list[str] | None = None
    if args.services is not None:
        wanted = [s.strip() for s in args.services.split(",") if s.strip()]
    from bot import progress

    with progress.use(reporter_for(args, "images bootstrap")) as reporter:
        # each line of the bootstrap ("build python:3.13-slim from ...") is where it is now
        outcomes = images.bootstrap(
            engine,
            settings,
            pythons=args.pythons,
            services=wanted,
            force=args.force,
            log_line=lambda line: reporter.stage(line),
            jobs=max(1, getattr(args, "jobs", 1) or 1),
        )
        outcomes += _ecosystem_images(engine, settings, args, reporter)
    failed = [o for o in outcomes if o.action == "failed"]
    for o in failed:
        print(f"\nfailed: {o.tag}\n{o.detail}", file=sys.stderr)
    built = sum(o.action == "built" for o in outcomes)
    reused = sum(o.action == "reused" for o in outcomes)
    print(f"images: {built} built, {reused} reused, {len(failed)} failed", file=human(args))
    write_json(
        args,
        "images",
        {
            "action": "bootstrap",
            "pythons": [],
            "services": [],
            "images": [{"tag": o.tag, "action": o.action} for o in outcomes],
        },
    )
    return ImageUnavailableError.exit_code if failed else 0


def _ecosystem_images(engine, settings, args: argparse.Namespace, reporter) -> list:
    """Stand-ins an ecosystem builds with the same machinery (``bootstrap_images`` on the
    ecosystem: its recipes on top of the Debian stand-ins built above)."""
    from bot.ecosystems import REGISTRY
    from bot.errors import ConfigError

    outcomes: list = []
    for spec in getattr(args, "ecosystem", None) or []:
        name, _, versions = spec.partition("=")
        eco = REGISTRY.get(name.strip())
        if eco is None:
            raise ConfigError(f"unknown ecosystem {name!r}", f"Registered ecosystems: {', '.join(REGISTRY)}.")
        build = getattr(eco, "bootstrap_images", None)
        if build is None:
            raise ConfigError(f"the {name} ecosystem has no stand-in images to build")
        wanted = [v.strip() for v in versions.split(",") if v.strip()] or None
        outcomes += build(engine, settings, wanted, force=args.force, log_line=lambda line: reporter.stage(line))
    return outcomes
