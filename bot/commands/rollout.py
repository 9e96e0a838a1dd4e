"""`setupbot rollout`: add (or re-pin) the setupbot workflow in many repositories, one PR each.

  setupbot rollout --org ORG --ref SHA [--only python,rust] [--topic T] [--exclude PATTERN]
                   [--limit N] [--dry-run | --yes]
  setupbot rollout status --org ORG      one table: caller present, last verdict, open PR, last run

When more repositories match than --confirm-over (default 5), the rollout is a dry run unless
--yes confirms it. Each repository gets its own weekly schedule: the cron minute and hour come
from a stable hash of its name, so the drift checks of an organisation do not all start at once
(--cron sets one schedule for all). A repository whose root shows only the manifests of
ecosystems setupbot does not support (package.json, go.mod, ...) is skipped with that reason."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bot.commands._common import add_json_flag, human, reporter_for, write_json
from bot.config import load_settings
from bot.ecosystems import REGISTRY, parse_only, select_files, unsupported_reason
from bot.errors import InputError
from bot.github.provider import DryRunProvider, GitHubProvider, RepoInfo
from bot.github.rollout import SHA_RE, read_repo_list, repo_status, rollout, root_files, select_repos
from bot.redact import register_secret

CONFIRM_OVER = 5


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "rollout",
        help="open one PR per repository adding the setupbot workflow; `rollout status`",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", nargs="?", choices=["status"], help="status: one table of the repositories")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--repos", type=Path, help="file with one owner/name per line (# comments)")
    which.add_argument("--org", help="the non-archived, non-fork repositories of this organisation")
    p.add_argument("--ref", help="full commit SHA of setupbot the workflow pins (required to roll out)")
    p.add_argument(
        "--setupbot-repository",
        default="setupbot/setupbot",
        help="owner/name that hosts setupbot's reusable workflow (default: %(default)s)",
    )
    p.add_argument(
        "--cron", default=None, help="one schedule for every repository (default: staggered by repository name)"
    )
    p.add_argument(
        "--only",
        default=None,
        metavar="NAMES",
        help="only repositories in which setupbot detects one of these ecosystems, comma-separated "
        f"(registered: {', '.join(REGISTRY)}); judged from the files at each repository's root",
    )
    p.add_argument(
        "--only-ecosystem",
        action="append",
        default=[],
        metavar="NAME",
        help="only repositories whose main language (GitHub's) is of this ecosystem (python; repeatable)",
    )
    p.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC",
        help="only repositories with this topic (repeatable: all must be present)",
    )
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="leave out owner/name or name, shell patterns allowed (repeatable)",
    )
    p.add_argument("--limit", type=int, default=None, metavar="N", help="at most N repositories (in name order)")
    p.add_argument("--dry-run", action="store_true", help="read, plan and print; write nothing")
    p.add_argument("--yes", action="store_true", help="confirm a rollout to more than --confirm-over repositories")
    p.add_argument(
        "--confirm-over",
        type=int,
        default=CONFIRM_OVER,
        metavar="N",
        help="above N matching repositories a rollout needs --yes (default: %(default)s)",
    )
    add_json_flag(p, "what was (or would be) done (schema setupbot.rollout/1; status: setupbot.rollout-status/1)")
    p.set_defaults(func=run)


def _targets(args: argparse.Namespace, provider) -> list[str]:
    if args.org:
        infos = provider.list_org_repos(args.org)
        if not infos:
            raise InputError(f"no repositories found in {args.org}", "Check the organisation name and the token.")
    else:
        # a list file carries names only: the filters that need metadata read each repository
        names = read_repo_list(args.repos)
        needs_meta = bool(args.only_ecosystem or args.topic)
        infos = [provider.repo_info(n) if needs_meta else RepoInfo(n, "") for n in names]
    only = parse_only(args.only)
    chosen = select_repos(
        infos,
        ecosystems=args.only_ecosystem,
        topics=args.topic,
        exclude=args.exclude,
        limit=None if only else args.limit,
    )
    if only:
        # the detected ecosystems, not GitHub's language guess: a Python package with a large
        # JavaScript frontend is still a Python repository
        chosen = [
            i
            for i in chosen
            if set(select_files(i.full_name, root_files(provider, i.full_name, i.default_branch or None)).names)
            & set(only)
        ]
        chosen = chosen[: args.limit] if args.limit is not None else chosen
    return [i.full_name for i in chosen]


def _check_args(args: argparse.Namespace, token: str, status: bool) -> None:
    """The argument errors that need no GitHub call."""
    if not status and not args.ref:
        raise InputError("--ref is required to roll out", "Pass the full commit SHA of setupbot to pin.")
    if not token and not (args.dry_run or status):
        raise InputError("no GitHub token", "Set GITHUB_TOKEN (with workflow scope) or github.token.")
    if args.limit is not None and args.limit < 1:
        raise InputError("--limit must be at least 1", "Leave --limit out to take every matching repository.")
    parse_only(args.only)  # an unknown ecosystem name is a configuration error before any call


def _is_dry_run(args: argparse.Namespace, matched: int) -> bool:
    """--dry-run, or a rollout to more than --confirm-over repositories without --yes."""
    if args.dry_run:
        return True
    if matched > args.confirm_over and not args.yes:
        print(
            f"setupbot rollout: {matched} repositories match (more than {args.confirm_over}): dry run. "
            "Check the plan below, then rerun with --yes to open the pull requests.",
            file=sys.stderr,
        )
        return True
    return False


def _report(args: argparse.Namespace, results: list, provider, dry_run: bool, matched: int, out) -> None:
    for r in results:
        where = f" #{r.number}" if r.number else ""
        print(
            f"{r.repo}: {r.action}{where}{(' ' + r.path) if r.path else ''} [cron {r.cron}]"
            f"{(' - ' + r.detail) if r.detail else ''}",
            file=out,
        )
    would = [str(a) for a in provider.actions] if isinstance(provider, DryRunProvider) else []
    for action in would:
        print(f"  would {action}", file=out)
    write_json(
        args,
        "rollout",
        {
            "dry_run": dry_run,
            "matched": matched,
            "would": would,
            "repos": [
                {
                    "repo": r.repo,
                    "action": r.action,
                    "path": r.path,
                    "number": r.number,
                    "detail": r.detail,
                    "cron": r.cron,
                }
                for r in results
            ],
        },
    )


def run(args: argparse.Namespace) -> int:
    settings = load_settings(None)
    token = settings.github.token or os.environ.get("GITHUB_TOKEN", "")
    status = args.action == "status"
    _check_args(args, token, status)
    register_secret(token)
    real = GitHubProvider(token, settings.github.api_url, branch_prefix=settings.github.branch_prefix)
    out = human(args)
    repos = _targets(args, real)
    if status:
        rows = [
            repo_status(real, r, setupbot_repository=args.setupbot_repository, output_dir=settings.output.dir)
            for r in repos
        ]
        _table(rows, out)
        write_json(args, "rollout-status", {"repos": rows})
        return 0
    if not SHA_RE.match(args.ref):
        raise InputError(
            f"--ref must be a full 40-character commit SHA, not {args.ref!r}",
            "Pinning to a SHA is what keeps a moved tag from changing every repository's workflow.",
        )
    dry_run = _is_dry_run(args, len(repos))
    provider = DryRunProvider(inner=real, branch_prefix=settings.github.branch_prefix) if dry_run else real
    from bot import progress

    with progress.use(reporter_for(args, "rollout")) as reporter:
        reporter.stage("dry run" if dry_run else "open pull requests", f"{len(repos)} repositories")
        results = rollout(
            provider,
            repos,
            setupbot_repository=args.setupbot_repository,
            ref=args.ref,
            cron=args.cron,
            labels=tuple(settings.github.labels),
            unsupported=unsupported_reason,
        )
    _report(args, results, provider, dry_run, len(repos), out)
    from bot.errors import GitHubError

    return GitHubError.exit_code if any(r.action == "failed" for r in results) else 0


def _table(rows: list[dict], out) -> None:
    head = ("repository", "caller", "last verdict", "open PR", "last run")
    cells = [
        (
            r["repo"],
            r["caller"] or "-",
            r["last_verdict"] or "-",
            f"#{r['open_pr']}" if r["open_pr"] else "-",
            r["last_run"] or "-",
        )
        for r in rows
    ]
    widths = [max(len(str(c[i])) for c in [head, *cells]) for i in range(len(head))]
    for row in [head, *cells]:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=False)).rstrip(), file=out)
