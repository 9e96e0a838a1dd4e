"""`setupbot images bootstrap|list`: offline stand-ins for the images generated Dockerfiles name."""

from __future__ import annotations

import argparse
import sys

from bot.config import load_settings


def add_parser(sub) -> None:
    p = sub.add_parser("images", help="build offline stand-in base/service images; list what this engine offers")
    isub = p.add_subparsers(dest="images_command", required=True, metavar="ACTION")
    b = isub.add_parser("bootstrap", help="debootstrap Debian suites and build python/debian/service stand-ins "
                                          "(works with no registry; images already current are reused)")
    b.add_argument("--python", action="append", dest="pythons", metavar="X.Y",
                   help="Python version to build (repeatable; default: all known)")
    b.add_argument("--services", default=None, metavar="NAMES",
                   help="comma-separated services to build (default: all known; '' for none)")
    b.add_argument("--force", action="store_true", help="rebuild even when the recipe hash matches")
    b.add_argument("--engine", choices=["docker", "podman"], help="container engine (engine.kind)")
    isub.add_parser("list", help="Python versions and service images this engine offers")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bot.engine import Engine
    from bot.engine import images

    overrides = {"engine": {"kind": getattr(args, "engine", None)}}
    settings = load_settings(None, overrides=overrides)
    engine = Engine.from_settings(settings)
    if args.images_command == "list":
        engine.ping()
        pythons = images.local_pythons(engine)
        services = images.available_services(engine)
        print("python: " + (" ".join(pythons) if pythons else "(none: run `setupbot images bootstrap`)"))
        if services:
            for s in services:
                print(f"service: {s.name} {s.version} {s.image}".rstrip())
        else:
            print("service: (none)")
        return 0

    services = None
    if args.services is not None:
        services = [s.strip() for s in args.services.split(",") if s.strip()]
    outcomes = images.bootstrap(engine, settings, pythons=args.pythons, services=services, force=args.force,
                                log_line=lambda line: print(line, flush=True))
    failed = [o for o in outcomes if o.action == "failed"]
    for o in failed:
        print(f"\nfailed: {o.tag}\n{o.detail}", file=sys.stderr)
    built = sum(o.action == "built" for o in outcomes)
    reused = sum(o.action == "reused" for o in outcomes)
    print(f"images: {built} built, {reused} reused, {len(failed)} failed")
    return 6 if failed else 0
