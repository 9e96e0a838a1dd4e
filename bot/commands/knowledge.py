"""`setupbot knowledge list|show|add|import|export|stats|query|approve` — inspect and curate the
experience base (SQLite by default, PostgreSQL with knowledge.url)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bot.commands._common import add_json_flag, human, write_json
from bot.config import load_settings
from bot.errors import InputError, KnowledgeError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("knowledge", help="inspect and curate the experience base", description=__doc__)
    p.add_argument(
        "--store",
        metavar="PATH_OR_URL",
        help="SQLite file or postgresql:// URL (default: knowledge.url / knowledge.path)",
    )
    ks = p.add_subparsers(dest="knowledge_command", required=True, metavar="ACTION")
    ls = ks.add_parser("list", help="list units")
    ls.add_argument("--category", help="only this category")
    add_json_flag(ls, "the units (schema setupbot.knowledge-list/1)")
    show = ks.add_parser("show", help="show one unit with its telemetry")
    show.add_argument("unit_id")
    add = ks.add_parser("add", help="add units from a YAML/JSON file (refuses existing ids)")
    add.add_argument("file", type=Path)
    add.add_argument("--replace", action="store_true", help="replace units with the same id")
    imp = ks.add_parser("import", help="import an export file (units and telemetry)")
    imp.add_argument("file", type=Path)
    imp.add_argument("--replace", action="store_true", help="replace units with the same id")
    exp = ks.add_parser("export", help="write every unit with its telemetry as JSON")
    exp.add_argument("-o", "--output", type=Path, help="file to write (default: stdout)")
    ks.add_parser("stats", help="counts by category and tier")
    approve = ks.add_parser("approve", help="release a quarantined unit (learned from an LLM) to retrieval")
    approve.add_argument("unit_id")
    q = ks.add_parser("query", help="retrieve candidates for a failure log")
    q.add_argument("log", type=Path, help="file with the failing output ('-' for stdin)")
    q.add_argument("--python", default="", help="runtime version for applicability, e.g. 3.11")
    q.add_argument("--suite", default="", help="Debian suite of the base image (bookworm, trixie)")
    q.add_argument("--tool", default="", help="installer/test tool in use (pip, poetry, pytest, ...)")
    p.set_defaults(func=run)


def _open(args: argparse.Namespace):
    from bot.knowledge import open_store

    settings = load_settings().knowledge
    if args.store:
        import dataclasses

        if args.store.startswith(("postgresql://", "postgres://")):
            settings = dataclasses.replace(settings, url=args.store)
        else:
            settings = dataclasses.replace(settings, url="", path=args.store)
    return settings, open_store(settings)


def _add_units(store, path: Path, replace: bool) -> int:
    """Add every valid unit in ``path``; report each invalid one and go on."""
    from bot.knowledge.units import iter_valid

    if not path.is_file():
        raise InputError(f"{path} does not exist", "Pass a YAML or JSON file of units.")
    import yaml

    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read {path}: {exc}", "The file must be YAML or JSON.") from exc
    if isinstance(data, dict):
        data = data.get("units", [data] if "id" in data else [])
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a list of units", "Write a list, or a mapping with a 'units' list.")
    good, bad = iter_valid([d if isinstance(d, dict) else {"id": repr(d)} for d in data])
    added = skipped = 0
    for unit in good:
        if store.add(unit, replace=replace):
            added += 1
        else:
            skipped += 1
            print(f"skipped {unit.id}: already in the store (use --replace)", file=sys.stderr)
    for reason in bad:
        print(f"refused {reason}", file=sys.stderr)
    print(f"added {added}, skipped {skipped}, refused {len(bad)} ({store.describe()})")
    return 0 if not bad else InputError.exit_code


def _list(args: argparse.Namespace, store) -> int:
    units = []
    out = human(args)
    for u in store.all():
        if args.category and u.category != args.category:
            continue
        t = u.telemetry
        units.append({"id": u.id, "category": u.category, "title": u.title, "tier": t.tier_name, **t.to_json()})
        print(
            f"{u.id:45} {u.category:8} {t.tier_name:6} hits={t.hits} ok={t.successes} fail={t.failures}  {u.title}",
            file=out,
        )
    write_json(args, "knowledge-list", {"store": store.describe(), "units": units})
    return 0


def _show(args: argparse.Namespace, store) -> int:
    unit = store.get(args.unit_id)
    if unit is None:
        raise KnowledgeError(f"no unit {args.unit_id!r}", "See `setupbot knowledge list`.")
    data = unit.to_json()
    data["telemetry"]["tier"] = unit.telemetry.tier_name
    data["telemetry"]["success_rate"] = round(unit.telemetry.success_rate, 3)
    print(json.dumps(data, indent=2))
    return 0


def _export(args: argparse.Namespace, store) -> int:
    text = json.dumps({"units": [u.to_json() for u in store.all()]}, indent=1) + "\n"
    if args.output:
        args.output.write_text(text)
        print(f"exported {store.count()} units to {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def _approve(args: argparse.Namespace, store) -> int:
    unit = store.get(args.unit_id)
    if unit is None:
        raise KnowledgeError(f"no unit {args.unit_id!r}", "See `setupbot knowledge list --category quarantined`.")
    if not store.approve(args.unit_id):
        raise KnowledgeError(
            f"unit {args.unit_id!r} is not quarantined (category {unit.category})",
            "Only units learned from an LLM in a shared store wait for approval.",
        )
    print(f"approved {args.unit_id}: retrieval offers it from now on")
    return 0


def _query(args: argparse.Namespace, store, settings) -> int:
    from bot.knowledge import Retriever

    if str(args.log) != "-" and not args.log.is_file():
        raise InputError(f"{args.log} does not exist", "Pass the file holding the failing output.")
    text = sys.stdin.read() if str(args.log) == "-" else args.log.read_text(errors="replace")
    context = {
        k: v for k, v in (("python", args.python), ("suite", args.suite), ("tool", args.tool), ("os", "debian")) if v
    }
    cands = Retriever(store, settings).retrieve(text, context)
    if not cands:
        print("no matching experience")
        return 0
    for c in cands:
        print(c.describe())
        print(f"    {c.unit.advice}")
    return 0


def run(args: argparse.Namespace) -> int:
    settings, store = _open(args)
    with store:
        cmd = args.knowledge_command
        if cmd == "list":
            return _list(args, store)
        if cmd == "show":
            return _show(args, store)
        if cmd in ("add", "import"):
            return _add_units(store, args.file, args.replace)
        if cmd == "export":
            return _export(args, store)
        if cmd == "approve":
            return _approve(args, store)
        if cmd == "stats":
            print(json.dumps(store.stats(), indent=2))
            return 0
        if cmd == "query":
            return _query(args, store, settings)
    return 2
