"""setupbot works out how to set up a Python repository, proves it in containers (build, run the
tests, repair, clean replay, verify) and writes a Dockerfile, devcontainer.json, compose.yaml and a
setup report.

Exit codes (one table for every command; `setupbot COMMAND --help` for each command):
  0 success at or above the gate   2 bad configuration   3 bad input   4 engine unavailable
  5 image build failed   6 image unavailable   7 budget exhausted   8 LLM failed
  9 experience store failed   10 GitHub error   20 unresolved   21 below the verdict gate
  22 regression   130 interrupted   1 internal error (a bug: rerun with --debug)
"""

# Each subcommand is a module in bot/commands with ``add_parser(sub)`` and ``run(args) -> int``;
# the GitHub Action calls the same commands.

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import traceback

from bot import __version__, progress
from bot.errors import Interrupted, SetupbotError
from bot.redact import Redactor, global_redactor, setup_logging

COMMANDS = ["run", "plan", "verify", "config", "init", "images", "knowledge", "bench", "github", "rollout", "clean"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="setupbot", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"setupbot {__version__}")
    _add_global_flags(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"bot.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"bot.commands.{name}":
                raise
            continue
        module.add_parser(sub)
        child = sub.choices.get(name)
        if child is not None and not child.description:
            # `setupbot COMMAND --help` opens with what the command does: its module's docstring
            child.description = module.__doc__
            child.formatter_class = argparse.RawDescriptionHelpFormatter
    for subparser in _all_subparsers(parser):
        _add_global_flags(subparser, top=False)
    return parser


def _add_global_flags(p: argparse.ArgumentParser, *, top: bool) -> None:
    """--quiet, --verbose and --debug mean the same in every command, before or after its name.
    Below the top level the default is SUPPRESS, so a subcommand does not reset what was given
    before its name."""
    d = {} if top else {"default": argparse.SUPPRESS}
    volume = p.add_mutually_exclusive_group()
    volume.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress display, warnings and results only",
        **({"default": False} if top else d),
    )
    volume.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="progress with every detail line",
        **({"default": False} if top else d),
    )
    p.add_argument(
        "--debug",
        action="store_true",
        help="show tracebacks and debug logs",
        **({"default": bool(os.environ.get("SETUPBOT_DEBUG"))} if top else d),
    )


def _all_subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found.append(child)
                found.extend(_all_subparsers(child))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.debug)
    if args.quiet and not args.debug:
        logging.getLogger("bot").setLevel(logging.WARNING)
    for secret in Redactor.from_environment()._patterns:
        global_redactor().add(secret)
    previous = _terminate_like_interrupt()
    try:
        if args.command == "github":
            # the action's log gets the same progress lines as `run` (the command is the pipeline)
            with progress.use(progress.make_reporter("github", quiet=args.quiet, verbose=args.verbose)):
                return int(args.func(args) or 0)
        return int(args.func(args) or 0)
    except SetupbotError as exc:
        if args.debug:
            # the traceback goes through the redactor too: frames and messages can hold a token
            print(global_redactor()(traceback.format_exc()), file=sys.stderr)
        print(global_redactor()(exc.render()), file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # `setupbot config show | head`: the reader left; nothing is wrong with the run
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("setupbot: interrupted; run `setupbot clean --run-id ID` to remove what this run left", file=sys.stderr)
        return Interrupted.exit_code
    except Exception:  # noqa: BLE001 - a bug: show it, redacted, with the internal-error exit code
        print(global_redactor()(traceback.format_exc()), file=sys.stderr)
        print("setupbot: internal error (a bug in setupbot): run with --debug and report it", file=sys.stderr)
        return 1
    finally:
        if previous is not None:
            import signal

            signal.signal(signal.SIGTERM, previous)


def _terminate_like_interrupt():
    """SIGTERM (a cancelled CI job, `docker stop`, `kill`) unwinds like Ctrl-C: the pipeline's
    cleanup runs and the exit code is 130, the table's "interrupted"."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def raise_interrupt(signum, frame):
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, raise_interrupt)  # the previous handler, restored after


if __name__ == "__main__":
    raise SystemExit(main())
