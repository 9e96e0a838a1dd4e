"""`setupbot init [PATH]`: add setupbot to a repository by hand -- the caller workflow
(.github/workflows/setupbot.yml) and a commented settings file (.github/setupbot.yml) whose
first line points an editor at the settings' JSON Schema. A file that already exists is left
exactly as it is."""

from __future__ import annotations

import argparse
import io
import re
from pathlib import Path

from bot import safefs
from bot.commands._common import add_json_flag, human, write_json
from bot.errors import InputError

SCHEMA_URL = "https://raw.githubusercontent.com/setupbot/setupbot/main/schemas/setupbot.schema.json"
# The sections that describe the repository. The rest (engine, budgets, publish, llm, ...) govern
# the sandbox and come from the operator: environment, flags, action inputs.
SECTIONS = ("target", "services", "siblings", "output")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help="write the setupbot workflow and a commented .github/setupbot.yml")
    p.add_argument("path", type=Path, nargs="?", default=Path("."), help="the repository (default: .)")
    p.add_argument(
        "--ref",
        default="main",
        help="the setupbot commit the workflow pins; a full SHA is safest (default: %(default)s)",
    )
    p.add_argument(
        "--setupbot-repository",
        default="setupbot/setupbot",
        help="owner/name that hosts setupbot's reusable workflow (default: %(default)s)",
    )
    p.add_argument("--branch", default=None, help="the default branch (default: the checkout's current branch)")
    add_json_flag(p, "the files written (schema setupbot.init/1)")
    p.set_defaults(func=run)


def _current_branch(repo: Path) -> str:
    """From .git/HEAD (read, never a git command in the user's repository)."""
    text = safefs.try_read_text(repo, ".git/HEAD", max_bytes=4096)
    if text is None:
        return "main"
    m = re.match(r"ref: refs/heads/(\S+)", text)
    return m.group(1) if m else "main"


def settings_text() -> str:
    """The commented settings file: every repository-level key at its packaged default, with the
    defaults' own explanation as a comment (ruamel.yaml writes the comments)."""
    import yaml as pyyaml
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    from bot import config as cfg
    from bot.commands.config import setting_comments

    defaults = pyyaml.safe_load(cfg.DEFAULTS_FILE.read_text()) or {}
    notes = setting_comments()
    doc = CommentedMap()
    for section in SECTIONS:
        value = defaults.get(section)
        if isinstance(value, dict):
            node = CommentedMap()
            for key, v in value.items():
                node[key] = CommentedSeq(v) if isinstance(v, list) else (CommentedMap(v) if isinstance(v, dict) else v)
                if notes.get(f"{section}.{key}"):
                    node.yaml_add_eol_comment(notes[f"{section}.{key}"], key, column=28)
            doc[section] = node
        else:
            doc[section] = CommentedSeq(value or [])
            if notes.get(section):
                doc.yaml_add_eol_comment(notes[section], section, column=28)
    doc.yaml_set_start_comment(
        f"yaml-language-server: $schema={SCHEMA_URL}\n"
        "setupbot settings for this repository. Every value below is the packaged default:\n"
        "change what you need, delete the rest. `setupbot config show` prints the effective\n"
        "settings and where each comes from; `setupbot config validate .github/setupbot.yml` checks\n"
        "this file."
    )
    y = YAML()
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 4096
    out = io.StringIO()
    y.dump(doc, out)
    return out.getvalue()


def run(args: argparse.Namespace) -> int:
    from bot.github.rollout import CALLER_PATH, render_caller, stagger_cron

    repo = args.path.resolve()
    if not repo.is_dir():
        raise InputError(f"{args.path} is not a directory", "Pass the path of a repository checkout.")
    files = {
        CALLER_PATH: lambda: render_caller(
            default_branch=args.branch or _current_branch(repo),
            setupbot_repository=args.setupbot_repository,
            ref=args.ref,
            cron=stagger_cron(repo.name),
        ),
        ".github/setupbot.yml": settings_text,
    }
    out = human(args)
    report = []
    for rel, make in files.items():
        target = repo / rel
        if target.exists() or target.is_symlink():
            print(f"exists, left as it is: {rel}", file=out)
            report.append({"path": rel, "action": "exists"})
            continue
        try:
            # the one safe writer: a symlinked .github/ or .github/workflows/ is refused, not
            # written through (SECURITY.md S13)
            safefs.write_text(repo, rel, make(), allowed=[rel])
        except safefs.UnsafePath as exc:
            print(f"not written: {exc.what}", file=out)
            report.append({"path": rel, "action": "refused"})
            continue
        print(f"created {rel}", file=out)
        report.append({"path": rel, "action": "created"})
    if not re.fullmatch(r"[0-9a-f]{40}", args.ref):
        print(
            f"note: the workflow follows {args.ref!r}; pin a full commit SHA (--ref) so a moved branch or "
            "tag cannot change what runs",
            file=out,
        )
    write_json(args, "init", {"path": str(repo), "files": report})
    return 0
