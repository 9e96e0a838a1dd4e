"""Settings: packaged defaults -> .github/setupbot.yml -> SETUPBOT_* env -> CLI/action inputs.

Each section is a frozen dataclass. Unknown keys anywhere in the chain raise ConfigError with a
"did you mean" suggestion, so a typo never silently does nothing.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from bot.errors import ConfigError
from bot.paths import PACKAGE_DIR

DEFAULTS_FILE = PACKAGE_DIR / "defaults.yml"
REPO_CONFIG = Path(".github") / "setupbot.yml"


@dataclass(frozen=True)
class EngineSettings:
    kind: str = "docker"
    memory: str = "4g"
    pids_limit: int = 1024
    cpus: float = 2.0
    command_timeout: int = 1200
    build_timeout: int = 1800
    keep_containers: bool = False
    network_mode: str = "bridge"


@dataclass(frozen=True)
class CASettings:
    file: str = "auto"


@dataclass(frozen=True)
class ImagesSettings:
    suites: tuple[str, ...] = ("bookworm", "trixie")
    mirror: str = "http://deb.debian.org/debian"
    cache_dir: str = ""
    # Where base images come from: the local store first, then (auto/registry) a registry, then
    # (auto/standins) the offline stand-ins of `setupbot images bootstrap`.
    source: str = "auto"
    # A mirror or pull-through cache ("mirror.example:5000"); "" = the official registry.
    registry: str = ""


@dataclass(frozen=True)
class LLMSettings:
    base_url: str = ""
    model: str = ""
    api_key: str = ""
    max_calls: int = 30
    max_tokens: int = 400000
    timeout: int = 60
    retries: int = 4

    @property
    def enabled(self) -> bool:
        return bool(self.base_url and self.model)


@dataclass(frozen=True)
class KnowledgeSettings:
    url: str = ""
    path: str = ""
    k: int = 10
    offer: int = 3
    embeddings_model: str = ""


@dataclass(frozen=True)
class BudgetSettings:
    max_steps: int = 40
    wall_clock: int = 2700
    max_repairs_per_signature: int = 3


@dataclass(frozen=True)
class OutputSettings:
    dir: str = ".devcontainer"


@dataclass(frozen=True)
class TargetSettings:
    test_command: tuple[str, ...] = ()
    collect_only: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    as_of: str = ""


@dataclass(frozen=True)
class PublishSettings:
    # The verdict a run needs before its pull request says "proven" (Full > Mostly > Partial >
    # Shallow > Failed). Below it: no pull request, or a draft when draft_below_gate is set.
    min_verdict: str = "Mostly"
    draft_below_gate: bool = False
    # Exit code of `setupbot github` on pull requests: never | regression | any-failure.
    fail_on: str = "regression"


@dataclass(frozen=True)
class GitHubSettings:
    token: str = ""
    api_url: str = "https://api.github.com"
    labels: tuple[str, ...] = ("setupbot", "environment")
    branch_prefix: str = "setupbot/"


@dataclass(frozen=True)
class ServiceItem:
    """One entry of ``services:``: a service the tests need (bot/verify/services.py reads it)."""
    name: str = ""
    image: str = ""
    kind: str = ""
    ports: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    command: tuple[str, ...] = ()


@dataclass(frozen=True)
class SiblingItem:
    """One entry of ``siblings:``: a sibling repository (bot/verify/siblings.py reads it)."""
    name: str = ""
    path: str = ""
    url: str = ""
    ref: str = ""
    dockerfile: str = "Dockerfile"
    plan: bool = False
    port: int = 0
    probe: str = ""
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    wire: Mapping[str, str] = field(default_factory=dict)
    health_timeout: int = 60


# The known keys of the list sections' items: a typo inside an item is an error too.
LIST_ITEMS: dict[str, type] = {"services": ServiceItem, "siblings": SiblingItem}


@dataclass(frozen=True)
class Settings:
    engine: EngineSettings = field(default_factory=EngineSettings)
    ca: CASettings = field(default_factory=CASettings)
    images: ImagesSettings = field(default_factory=ImagesSettings)
    llm: LLMSettings = field(default_factory=LLMSettings)
    knowledge: KnowledgeSettings = field(default_factory=KnowledgeSettings)
    budgets: BudgetSettings = field(default_factory=BudgetSettings)
    output: OutputSettings = field(default_factory=OutputSettings)
    target: TargetSettings = field(default_factory=TargetSettings)
    services: tuple[Mapping[str, Any], ...] = ()
    siblings: tuple[Mapping[str, Any], ...] = ()
    publish: PublishSettings = field(default_factory=PublishSettings)
    github: GitHubSettings = field(default_factory=GitHubSettings)

    # Keys whose values are secrets: never logged, never passed to containers or prompts.
    SECRET_KEYS = ("llm.api_key", "github.token")

    def secrets(self) -> list[str]:
        """The secret values in force, for the redactor."""
        return [v for v in (self.llm.api_key, self.github.token) if v]


_SECTIONS = {f.name: f for f in dataclasses.fields(Settings)}


def _suggest(key: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(key, choices, n=1)
    return f" Did you mean '{close[0]}'?" if close else ""


def _coerce(value: Any, target_type: Any, where: str) -> Any:
    """Coerce ``value`` (from YAML or an env string) to the annotated type."""
    t = str(target_type)
    try:
        if t in ("bool", "<class 'bool'>"):
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on"):
                return True
            if isinstance(value, str) and value.lower() in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(value)
        if t in ("int", "<class 'int'>"):
            return int(value)
        if t in ("float", "<class 'float'>"):
            return float(value)
        if t in ("str", "<class 'str'>"):
            return "" if value is None else str(value)
        if t.startswith("tuple"):
            if isinstance(value, str):
                value = yaml.safe_load(value) if value.strip().startswith("[") else value.split()
            if value is None:
                return ()
            if not isinstance(value, (list, tuple)):
                raise ValueError(value)
            return tuple(value)
        if t.startswith("Mapping"):
            if isinstance(value, str):
                value = yaml.safe_load(value) or {}
            if not isinstance(value, Mapping):
                raise ValueError(value)
            return dict(value)
    except (TypeError, ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{where}: cannot use {value!r} as {t}",
                          "Fix the value in the file or variable named above.") from exc
    return value


def _at(origin: str, marks: Mapping[tuple, int] | None, *path: Any) -> str:
    """``origin`` with the line of ``path`` in it, when the layer is a file with line marks."""
    line = (marks or {}).get(tuple(path))
    return f"{origin}:{line}" if line else origin


def _merge(base: dict[str, Any], layer: Mapping[str, Any], origin: str, *,
           marks: Mapping[tuple, int] | None = None, origins: dict[str, str] | None = None,
           layer_name: str = "") -> None:
    """Merge one layer into ``base`` in place, rejecting unknown keys. ``marks`` ({key path:
    line}) puts the user's line into errors; ``origins`` records which layer set each key."""
    hint = "`setupbot config schema` lists the sections and keys."
    if not isinstance(layer, Mapping):
        raise ConfigError(f"{origin}: the top level must be a mapping of sections", hint)
    for section, value in layer.items():
        if section not in _SECTIONS:
            raise ConfigError(f"{_at(origin, marks, section)}: unknown section '{section}'."
                              f"{_suggest(str(section), list(_SECTIONS))}", hint)
        f = _SECTIONS[section]
        if section in LIST_ITEMS:
            if value is None:
                value = []
            if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
                raise ConfigError(f"{_at(origin, marks, section)}: '{section}' must be a list of mappings")
            item_fields = {sf.name: sf for sf in dataclasses.fields(LIST_ITEMS[section])}
            known = list(item_fields)
            for i, item in enumerate(value):
                for key, v in item.items():
                    if key not in known:
                        raise ConfigError(
                            f"{_at(origin, marks, section, i, key)}: unknown key '{key}' in {section}[{i}]."
                            f"{_suggest(str(key), known)}",
                            f"Known keys of a {section} entry: {', '.join(known)}.")
                    if v is not None:   # checked only: the readers take the values as written
                        _coerce(v, item_fields[key].type, f"{_at(origin, marks, section, i, key)}: {section}[{i}].{key}")
            base[section] = tuple(dict(v) for v in value)
            if origins is not None:
                origins[section] = layer_name or origin
            continue
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise ConfigError(f"{_at(origin, marks, section)}: section '{section}' must be a mapping")
        cls = f.default_factory  # type: ignore[misc]
        fields = {sf.name: sf for sf in dataclasses.fields(cls)}
        current = base.setdefault(section, {})
        for key, v in value.items():
            if key not in fields:
                raise ConfigError(
                    f"{_at(origin, marks, section, key)}: unknown key '{section}.{key}'."
                    f"{_suggest(str(key), list(fields))}",
                    f"Known keys in '{section}': {', '.join(fields)}.")
            current[key] = _coerce(v, fields[key].type, f"{_at(origin, marks, section, key)}: {section}.{key}")
            if origins is not None:
                origins[f"{section}.{key}"] = layer_name or origin


def line_marks(text: str) -> dict[tuple, int]:
    """{key path: 1-based line} of a YAML document, e.g. ("services", 0, "nme") -> 7."""
    marks: dict[tuple, int] = {}
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return marks

    def walk(node: Any, path: tuple) -> None:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = key_node.value
                marks[path + (key,)] = key_node.start_mark.line + 1
                walk(value_node, path + (key,))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                marks[path + (i,)] = item.start_mark.line + 1
                walk(item, path + (i,))

    if root is not None:
        walk(root, ())
    return marks


def read_config_file(path: Path) -> tuple[Any, dict[tuple, int]]:
    """The data of a settings file and its line marks; YAML errors name the file and line."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", "Fix the path or remove the file.") from exc
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: not valid YAML: {problem}", "Fix the YAML or remove the file.") from exc
    return data, line_marks(text)


def _env_layer(environ: Mapping[str, str], names: dict[str, str] | None = None) -> dict[str, Any]:
    """SETUPBOT_<SECTION>_<KEY>=value. Only variables whose <SECTION> is a settings section are
    read (an unknown key in a known section is an error); any other SETUPBOT_ name (say
    SETUPBOT_VERSION) belongs to something else and is ignored. ``names`` gets {section.key:
    variable} for the origin of each value."""
    reserved = {"SETUPBOT_CONFIG", "SETUPBOT_DEBUG", "SETUPBOT_TEST_PG_URL", "SETUPBOT_RUN_ID"}
    layer: dict[str, Any] = {}
    for name, value in environ.items():
        if not name.startswith("SETUPBOT_") or name in reserved:
            continue
        rest = name[len("SETUPBOT_"):].lower()
        for section in sorted(_SECTIONS, key=len, reverse=True):
            if rest.startswith(section + "_") and section not in LIST_ITEMS:
                key = rest[len(section) + 1:]
                layer.setdefault(section, {})[key] = value
                if names is not None:
                    names[f"{section}.{key}"] = name
                break
        else:
            close = difflib.get_close_matches(rest.split("_")[0], list(_SECTIONS), n=1)
            if close:
                # not read, but a likely typo of a section deserves a word
                logging.getLogger(__name__).warning(
                    "environment: %s is not read (no section '%s'; did you mean SETUPBOT_%s_...?)",
                    name, rest.split("_")[0], close[0].upper())
    return layer


def load_settings(repo: Path | None = None, *, overrides: Mapping[str, Any] | None = None,
                  environ: Mapping[str, str] | None = None,
                  config_file: Path | None = None, origins: dict[str, str] | None = None) -> Settings:
    """Resolve the settings chain. ``overrides`` is a {section: {key: value}} mapping from the
    CLI or action inputs (values of None are ignored). ``origins``, when given, gets the layer
    that set each value: default, repository file (path), environment (variable), flag."""
    merged: dict[str, Any] = {}
    _merge(merged, yaml.safe_load(DEFAULTS_FILE.read_text()) or {}, str(DEFAULTS_FILE),
           origins=origins, layer_name="default")
    environ = os.environ if environ is None else environ
    path = config_file or (Path(environ["SETUPBOT_CONFIG"]) if environ.get("SETUPBOT_CONFIG") else None)
    if path is None and repo is not None and (repo / REPO_CONFIG).is_file():
        path = repo / REPO_CONFIG
    if path is not None:
        data, marks = read_config_file(Path(path))
        _merge(merged, data, str(path), marks=marks, origins=origins, layer_name=f"repository file ({path})")
    names: dict[str, str] = {}
    for section, values in _env_layer(environ, names).items():
        for key, value in values.items():   # one variable at a time: errors name the variable
            variable = names[f"{section}.{key}"]
            _merge(merged, {section: {key: value}}, f"environment variable {variable}", origins=origins,
                   layer_name=f"environment ({variable})")
    if overrides:
        cleaned = {s: {k: v for k, v in (vals or {}).items() if v is not None}
                   for s, vals in overrides.items()}
        _merge(merged, {s: v for s, v in cleaned.items() if v or s in ("services", "siblings")},
               "command line", origins=origins, layer_name="flag")
    kwargs: dict[str, Any] = {}
    for name, f in _SECTIONS.items():
        if name in ("services", "siblings"):
            kwargs[name] = tuple(merged.get(name, ()))
        else:
            kwargs[name] = f.default_factory(**merged.get(name, {}))  # type: ignore[misc]
    settings = Settings(**kwargs)
    if settings.engine.kind not in ("docker", "podman"):
        raise ConfigError(f"engine.kind must be docker or podman, not {settings.engine.kind!r}")
    return settings
