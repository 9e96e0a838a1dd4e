"""`setupbot rollout`: add (or re-pin) the setupbot workflow in many repositories, one PR each."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from bot.config import load_settings
from bot.errors import InputError
from bot.github.provider import DryRunProvider, GitHubProvider
from bot.github.rollout import DEFAULT_CRON, read_repo_list, rollout
from bot.redact import register_secret


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rollout", help="open one PR per repository adding the setupbot workflow")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--repos", type=Path, help="file with one owner/name per line (# comments)")
    which.add_argument("--org", help="every non-archived, non-fork repository of this organisation")
    p.add_argument("--ref", required=True, help="full commit SHA of setupbot the workflow pins")
    p.add_argument("--setupbot-repository", default="setupbot/setupbot",
                   help="owner/name that hosts setupbot's reusable workflow")
    p.add_argument("--cron", default=DEFAULT_CRON, help="schedule of the drift check")
    p.add_argument("--dry-run", action="store_true", help="read, plan and print; write nothing")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = load_settings(None)
    token = settings.github.token or os.environ.get("GITHUB_TOKEN", "")
    if not token and not args.dry_run:
        raise InputError("no GitHub token", "Set GITHUB_TOKEN (with workflow scope) or github.token.")
    register_secret(token)
    real = GitHubProvider(token, settings.github.api_url, branch_prefix=settings.github.branch_prefix)
    provider = DryRunProvider(inner=real, branch_prefix=settings.github.branch_prefix) if args.dry_run else real
    if args.org:
        repos = [r.full_name for r in provider.list_org_repos(args.org) if not r.archived and not r.fork]
    else:
        repos = read_repo_list(args.repos)
    results = rollout(provider, repos, setupbot_repository=args.setupbot_repository, ref=args.ref,
                      cron=args.cron, labels=tuple(settings.github.labels))
    for r in results:
        where = f" #{r.number}" if r.number else ""
        print(f"{r.repo}: {r.action}{where}{(' ' + r.path) if r.path else ''}{(' - ' + r.detail) if r.detail else ''}")
    if args.dry_run:
        for action in provider.actions:
            print(f"  would {action}")
    return 1 if any(r.action == "failed" for r in results) else 0
