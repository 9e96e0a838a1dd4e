"""`setupbot verify PATH --image TAG`: verify a built environment image skeptically.

Runs the repository's tests in the image without and with its sibling services and
repositories, prosecutes and judges in fresh containers, and writes the verification record
(JSON). Exit code 0 at or above publish.min_verdict (default Mostly), 21 below it -- the same
table as every command (README, "Exit codes")."""

from __future__ import annotations

import argparse
import logging
import shlex
from pathlib import Path
from typing import IO, Any

from bot import services as svc
from bot.commands._common import add_json_flag, human, meets_gate, write_json
from bot.config import load_settings
from bot.errors import BelowGate, InputError, NotSupported
from bot.verify import siblings as sib

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "verify",
        help="verify a built environment image (prosecutor and judge)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", type=Path, help="the repository")
    p.add_argument("--image", required=True, help="the built environment image (tag)")
    p.add_argument(
        "--record",
        type=Path,
        default=None,
        help="where to write the verification record (default: PATH/.setupbot/verification.json)",
    )
    p.add_argument(
        "--service",
        action="append",
        default=[],
        metavar="NAME[=IMAGE]",
        help="a sibling service to start, in addition to the plan and settings (repeatable)",
    )
    p.add_argument("--no-plan", action="store_true", help="do not plan: services only from settings and --service")
    p.add_argument("--test-command", default=None, help="the test command (default: the plan's, or python -m pytest)")
    p.add_argument("--mutation", action="store_true", help="also run the mutation check")
    p.add_argument(
        "--copy-repo",
        action="store_true",
        help="copy the repository into each container (for images that do not contain it)",
    )
    p.add_argument("--workdir", default="/workspace", help="the repository's directory in the image")
    p.add_argument(
        "--interpreter",
        default="python",
        metavar="COMMAND",
        help="the configured interpreter in the image (default: python)",
    )
    add_json_flag(p, "the verdict and its record (schema setupbot.verify/1)")
    p.add_argument("--test-timeout", type=int, default=None, help="seconds for one test run")
    p.set_defaults(func=run)


def _plan_inputs(
    repo: Path, settings: Any, engine: Any
) -> tuple[list[Any], dict[str, str], list[str] | None, list[str]]:
    """Services, CI env and test command from the plan, when bot.graph can make one."""
    try:
        from bot.ecosystems import make_plan
        from bot.engine.images import available_pythons
    except ImportError as exc:
        return [], {}, None, [f"no plan ({exc}); services only from settings and --service"]
    try:
        plan = make_plan(repo, settings, available_pythons(engine), resolve=False)
    except NotSupported as exc:
        return [], {}, None, [f"no plan ({exc.what}); services only from settings and --service"]
    except TypeError:
        plan = make_plan(repo, settings, available_pythons(engine))
    warnings = [str(w) for w in getattr(plan, "warnings", [])]
    command = list(getattr(plan, "test_command", []) or []) or None
    return list(getattr(plan, "services", []) or []), dict(getattr(plan, "env", {}) or {}), command, warnings


def _verify_inputs(
    args: argparse.Namespace, repo: Path, settings: Any, engine: Any
) -> tuple[list[Any], list[Any], dict[str, str], list[str] | None, list[str]]:
    """Services, siblings, CI env, test command and warnings: the plan's, then the settings',
    then the command line's."""
    warnings: list[str] = []
    plan_services: list[Any] = []
    ci_env: dict[str, str] = {}
    command: list[str] | None = None
    if not args.no_plan:
        plan_services, ci_env, command, warnings = _plan_inputs(repo, settings, engine)
    setting_services, w = svc.specs_from_settings(settings.services)
    warnings += w
    cli_services = []
    for item in args.service:
        name, _, image = item.partition("=")
        cli_services.append(svc.ServiceSpec.from_any({"name": name, "image": image}))
    services = svc.merge_specs([svc.ServiceSpec.from_any(s) for s in plan_services], setting_services, cli_services)
    siblings, w = sib.specs_from_settings(settings.siblings)
    warnings += w
    ci_env.update(dict(settings.target.env))
    if args.test_command:
        command = shlex.split(args.test_command)
    elif settings.target.test_command:
        command = list(settings.target.test_command)
    return services, siblings, ci_env, command, warnings


def _print_record(record: Any, path: Path, out: IO[str]) -> None:
    verdict = record.verdict
    print(f"verdict: {verdict.get('tier')}", file=out)
    for reason in verdict.get("reasons", []):
        print(f"  - {reason}", file=out)
    for o in record.services:
        state = "healthy" if o["healthy"] else "NOT healthy"
        print(
            f"service {o['name']}: {o.get('image') or o['requested_image']} {state}"
            + (f" ({o['note']})" if o.get("note") else ""),
            file=out,
        )
    if record.attribution:
        for name, tests in record.attribution.get("needed", {}).items():
            print(f"{len(tests)} tests needed {name}", file=out)
    print(f"record: {path}", file=out)


def run(args: argparse.Namespace) -> int:
    from bot.engine import Engine
    from bot.verify.run import verify_environment

    repo = args.path.resolve()
    if not repo.is_dir():
        raise InputError(f"{args.path} is not a directory", "Pass the path of a repository checkout.")
    settings = load_settings(repo)
    engine = Engine.from_settings(settings)
    services, siblings, ci_env, command, warnings = _verify_inputs(args, repo, settings, engine)

    record = verify_environment(
        engine,
        repo,
        args.image,
        services=services,
        ci_env=ci_env,
        siblings=siblings,
        test_command=command,
        python=args.interpreter,
        mutation=args.mutation,
        copy_repo=args.copy_repo,
        workdir=args.workdir,
        test_timeout=args.test_timeout or settings.engine.command_timeout,
        warnings=warnings,
    )
    if args.record:
        path = record.write(args.record)
    else:
        path = record.write(repo / ".setupbot" / "verification.json", repo=repo)
    verdict = record.verdict
    _print_record(record, path, human(args))
    tier = verdict.get("tier")
    met = meets_gate(tier, settings.publish.min_verdict)
    write_json(
        args,
        "verify",
        {
            "repo": str(repo),
            "image": args.image,
            "verdict": tier,
            "reasons": list(verdict.get("reasons", [])),
            "gate": {"min_verdict": settings.publish.min_verdict, "met": met},
            "exit_code": 0 if met else BelowGate.exit_code,
            "record": str(path),
        },
    )
    if not met:
        raise BelowGate(
            f"verification verdict {tier} is below publish.min_verdict {settings.publish.min_verdict}",
            f"See {path} for the charges and rulings.",
        )
    return 0
