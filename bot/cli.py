"""The one entry point. Each subcommand is a module in bot/commands with ``add_parser(sub)``
and ``run(args) -> int``; the GitHub Action calls the same commands."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

from bot import __version__
from bot.errors import SetupbotError
from bot.redact import Redactor, global_redactor, setup_logging

COMMANDS = ["run", "plan", "verify", "images", "knowledge", "bench", "github", "rollout", "clean"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="setupbot", description=__doc__)
    parser.add_argument("--version", action="version", version=f"setupbot {__version__}")
    parser.add_argument("--debug", action="store_true", default=bool(os.environ.get("SETUPBOT_DEBUG")),
                        help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"bot.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"bot.commands.{name}":
                raise
            continue
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.debug)
    for secret in Redactor.from_environment()._patterns:
        global_redactor().add(secret)
    try:
        return int(args.func(args) or 0)
    except SetupbotError as exc:
        if args.debug:
            # the traceback goes through the redactor too: frames and messages can hold a token
            print(global_redactor()(traceback.format_exc()), file=sys.stderr)
        print(global_redactor()(exc.render()), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("setupbot: interrupted; run `setupbot clean` to remove what this run left", file=sys.stderr)
        return 130
    except Exception:  # noqa: BLE001 - a bug: show it, redacted, with the internal-error exit code
        print(global_redactor()(traceback.format_exc()), file=sys.stderr)
        print("setupbot: internal error (a bug in setupbot): run with --debug and report it", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
