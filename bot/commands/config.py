"""`setupbot config show|schema|validate`: the settings you can discover.

show [PATH]       the effective settings for the repository at PATH (default .), each with the
                  layer that set it: default, repository file, environment, flag
schema            the JSON Schema of .github/setupbot.yml, generated from the settings
                  dataclasses (committed as schemas/setupbot.schema.json); point an editor at it
                  with a first line `# yaml-language-server: $schema=<url of that file>`
validate FILE     check a settings file; errors name the file and line
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import typing
from pathlib import Path
from typing import Any

import yaml

from bot import config as cfg
from bot.commands._common import add_json_flag, human, write_json

SCHEMA_ID = "https://raw.githubusercontent.com/setupbot/setupbot/main/schemas/setupbot.schema.json"

# Values with a closed set of choices (the dataclasses say only "str").
ENUMS: dict[str, list[str]] = {
    "engine.kind": ["docker", "podman"],
    "images.source": ["auto", "registry", "standins"],
    "publish.min_verdict": ["Full", "Mostly", "Partial", "Shallow"],
    "publish.fail_on": ["never", "regression", "any-failure"],
    "siblings.probe": [],  # free text (tcp | none | http:/path): no enum
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "config",
        help="show the effective settings, print their JSON Schema, validate a file",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cs = p.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    show = cs.add_parser("show", help="the effective settings and the layer that set each")
    show.add_argument("path", type=Path, nargs="?", default=Path("."), help="the repository (default: .)")
    show.add_argument(
        "--config", type=Path, default=None, metavar="FILE", help="a settings file instead of PATH/.github/setupbot.yml"
    )
    show.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="a value as a command-line flag would give it (repeatable)",
    )
    add_json_flag(show, "the settings (schema setupbot.config/1)")
    schema = cs.add_parser("schema", help="print the JSON Schema of .github/setupbot.yml")
    schema.add_argument("-o", "--output", type=Path, default=None, help="write it to this file instead of stdout")
    val = cs.add_parser("validate", help="check a settings file (exit 2 with file and line when it is wrong)")
    val.add_argument("file", type=Path, help="the settings file, e.g. .github/setupbot.yml")
    add_json_flag(val, "the result (schema setupbot.config-validate/1)")
    p.set_defaults(func=run)


# ---------------------------------------------------------------- schema from the dataclasses


def setting_comments() -> dict[str, str]:
    """{section.key: comment} from the packaged defaults.yml, the one place the keys are explained."""
    out: dict[str, str] = {}
    section = ""
    for line in cfg.DEFAULTS_FILE.read_text().splitlines():
        m = re.match(r"^([a-z_]+):(.*)$", line)
        if m:
            section = m.group(1)
            note = m.group(2).partition("#")[2].strip()
            if note:
                out[section] = note
            continue
        m = re.match(r"^  ([a-z_]+):[^#]*#\s*(.+)$", line)
        if m and section:
            out[f"{section}.{m.group(1)}"] = m.group(2).strip()
    return out


def _type_schema(tp: Any) -> dict[str, Any]:
    origin = typing.get_origin(tp)
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    if origin is tuple:
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        item = _type_schema(args[0]) if args and args[0] is not Any else {}
        return {"type": "array", "items": item}
    if origin in (typing.Mapping, dict) or str(tp).startswith(("typing.Mapping", "collections.abc.Mapping")):
        return {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}
    return {}


def _dataclass_schema(cls: type, prefix: str, comments: dict[str, str]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    props: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        s = _type_schema(hints[f.name])
        key = f"{prefix}.{f.name}"
        if ENUMS.get(key):
            s = {"type": "string", "enum": ENUMS[key]}
        if cls in cfg.LIST_ITEMS.values():
            if f.name == "ports":  # 5432, "5432:5432", "5432/tcp"
                s = {"type": "array", "items": {"type": ["integer", "string"]}}
            if f.name == "command":  # a list, or one string split on spaces
                s = {"type": ["array", "string"], "items": {"type": "string"}}
        elif f.default is not dataclasses.MISSING:
            s["default"] = f.default if not isinstance(f.default, tuple) else list(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            s["default"] = dict(f.default_factory())
        if comments.get(key):
            s["description"] = comments[key]
        props[f.name] = s
    return {"type": "object", "properties": props, "additionalProperties": False}


def settings_schema() -> dict[str, Any]:
    """The JSON Schema of a settings file, generated from bot.config's dataclasses."""
    comments = setting_comments()
    defaults = yaml.safe_load(cfg.DEFAULTS_FILE.read_text()) or {}
    props: dict[str, Any] = {}
    for f in cfg._SECTIONS.values():
        if f.name in cfg.LIST_ITEMS:
            item = _dataclass_schema(cfg.LIST_ITEMS[f.name], f.name, comments)
            item["description"] = (cfg.LIST_ITEMS[f.name].__doc__ or "").strip()
            props[f.name] = {"type": ["array", "null"], "items": item, "default": []}
        else:
            section = _dataclass_schema(f.default_factory, f.name, comments)  # type: ignore[arg-type]
            for key, value in (defaults.get(f.name) or {}).items():
                section["properties"][key]["default"] = value  # the packaged defaults, not the code's
            section["type"] = ["object", "null"]
            props[f.name] = section
        if comments.get(f.name):
            props[f.name]["description"] = comments[f.name]
        if f.name not in cfg.REPO_KEYS and f.name not in cfg.REPO_LISTS:
            # an operator's file (SETUPBOT_CONFIG) uses this schema too; a repository's own file
            # may not set these, and setupbot refuses them there (SECURITY.md S11)
            note = "Operator only: refused in a repository's .github/setupbot.yml."
            props[f.name]["description"] = f"{props[f.name].get('description', '')} {note}".strip()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "setupbot settings (.github/setupbot.yml)",
        "description": "Packaged defaults -> this file -> SETUPBOT_<SECTION>_<KEY> variables -> flags.",
        "type": "object",
        "properties": props,
        "additionalProperties": False,
    }


def schema_text() -> str:
    return json.dumps(settings_schema(), indent=2, sort_keys=True) + "\n"


# ---------------------------------------------------------------- show / validate


def _flatten(settings: cfg.Settings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in cfg._SECTIONS.values():
        value = getattr(settings, f.name)
        if f.name in cfg.LIST_ITEMS:
            out[f.name] = [dict(v) for v in value]
            continue
        for sf in dataclasses.fields(value):
            v = getattr(value, sf.name)
            out[f"{f.name}.{sf.name}"] = list(v) if isinstance(v, tuple) else (dict(v) if isinstance(v, dict) else v)
    return out


def _secret(key: str, value: Any) -> Any:
    return "***" if key in cfg.Settings.SECRET_KEYS and value else value


def run(args: argparse.Namespace) -> int:
    if args.config_command == "schema":
        text = schema_text()
        if args.output:
            args.output.parent.mkdir(parents=True, exist_ok=True)
            args.output.write_text(text)
            print(f"schema written to {args.output}", file=sys.stderr)
        else:
            sys.stdout.write(text)
        return 0
    if args.config_command == "validate":
        if not args.file.is_file():
            from bot.errors import InputError

            raise InputError(f"{args.file} does not exist", "Pass the path of a settings file.")
        data, marks = cfg.read_config_file(args.file)
        cfg.merge_layer({}, data, str(args.file), marks=marks)
        print(f"{args.file}: valid", file=human(args))
        write_json(args, "config-validate", {"file": str(args.file), "valid": True})
        return 0
    origins: dict[str, str] = {}
    repo = args.path.resolve()
    overrides: dict[str, dict[str, Any]] = {}
    for item in args.set:
        key, eq, value = item.partition("=")
        section, dot, name = key.partition(".")
        if not (eq and dot and name):
            from bot.errors import InputError

            raise InputError(f"--set {item!r}: expected SECTION.KEY=VALUE", "For example --set budgets.max_steps=20.")
        overrides.setdefault(section, {})[name] = value
    settings = cfg.load_settings(repo, config_file=args.config, origins=origins, overrides=overrides or None)
    values = _flatten(settings)
    rows = [{"key": k, "value": _secret(k, v), "origin": origins.get(k, "default")} for k, v in values.items()]
    out = human(args)
    width = max(len(r["key"]) for r in rows)
    for r in rows:
        print(f"{r['key']:<{width}}  {json.dumps(r['value'])}  [{r['origin']}]", file=out)
    refused = [{"key": key, "why": why} for key, why in settings.refused]
    for r in refused:
        print(f"refused from the repository's file: {r['key']} ({r['why']})", file=out)
    write_json(args, "config", {"repo": str(repo), "settings": rows, "refused": refused})
    return 0
