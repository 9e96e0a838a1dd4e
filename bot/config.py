"""Settings: packaged defaults -> .github/setupbot.yml -> SETUPBOT_* env -> CLI/action inputs.

Each section is a frozen dataclass. Unknown keys anywhere in the chain raise ConfigError with a
"did you mean" suggestion, so a typo never silently does nothing.
"""

from __future__ import annotations

import dataclasses
import difflib
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
    refresh_lock: bool = False


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


def _merge(base: dict[str, Any], layer: Mapping[str, Any], origin: str) -> None:
    """Merge one layer into ``base`` in place, rejecting unknown keys."""
    if not isinstance(layer, Mapping):
        raise ConfigError(f"{origin}: the top level must be a mapping of sections",
                          "See bot/defaults.yml for the sections and keys.")
    for section, value in layer.items():
        if section not in _SECTIONS:
            raise ConfigError(f"{origin}: unknown section '{section}'.{_suggest(section, list(_SECTIONS))}",
                              "See bot/defaults.yml for the sections and keys.")
        f = _SECTIONS[section]
        if section in ("services", "siblings"):
            if value is None:
                value = []
            if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
                raise ConfigError(f"{origin}: '{section}' must be a list of mappings")
            base[section] = tuple(dict(v) for v in value)
            continue
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise ConfigError(f"{origin}: section '{section}' must be a mapping")
        cls = f.default_factory  # type: ignore[misc]
        fields = {sf.name: sf for sf in dataclasses.fields(cls)}
        current = base.setdefault(section, {})
        for key, v in value.items():
            if key not in fields:
                raise ConfigError(
                    f"{origin}: unknown key '{section}.{key}'.{_suggest(key, list(fields))}",
                    f"Known keys in '{section}': {', '.join(fields)}.")
            current[key] = _coerce(v, fields[key].type, f"{origin}: {section}.{key}")


def _env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    """SETUPBOT_<SECTION>_<KEY>=value. Unknown SETUPBOT_ names are rejected like unknown keys,
    except a few reserved for the tooling itself."""
    reserved = {"SETUPBOT_CONFIG", "SETUPBOT_DEBUG", "SETUPBOT_TEST_PG_URL", "SETUPBOT_RUN_ID"}
    layer: dict[str, Any] = {}
    for name, value in environ.items():
        if not name.startswith("SETUPBOT_") or name in reserved:
            continue
        rest = name[len("SETUPBOT_"):].lower()
        for section in sorted(_SECTIONS, key=len, reverse=True):
            if rest.startswith(section + "_"):
                layer.setdefault(section, {})[rest[len(section) + 1:]] = value
                break
        else:
            known = [f"SETUPBOT_{s.upper()}_..." for s in _SECTIONS]
            raise ConfigError(f"environment: unknown variable {name}.{_suggest(rest, list(_SECTIONS))}",
                              f"Variables take the form {', '.join(known[:3])}, ...")
    return layer


def load_settings(repo: Path | None = None, *, overrides: Mapping[str, Any] | None = None,
                  environ: Mapping[str, str] | None = None,
                  config_file: Path | None = None) -> Settings:
    """Resolve the settings chain. ``overrides`` is a {section: {key: value}} mapping from the
    CLI or action inputs (values of None are ignored)."""
    merged: dict[str, Any] = {}
    _merge(merged, yaml.safe_load(DEFAULTS_FILE.read_text()) or {}, str(DEFAULTS_FILE))
    environ = os.environ if environ is None else environ
    path = config_file or (Path(environ["SETUPBOT_CONFIG"]) if environ.get("SETUPBOT_CONFIG") else None)
    if path is None and repo is not None and (repo / REPO_CONFIG).is_file():
        path = repo / REPO_CONFIG
    if path is not None:
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}", "Fix the YAML or remove the file.") from exc
        _merge(merged, data, str(path))
    _merge(merged, _env_layer(environ), "environment")
    if overrides:
        cleaned = {s: {k: v for k, v in (vals or {}).items() if v is not None}
                   for s, vals in overrides.items()}
        _merge(merged, {s: v for s, v in cleaned.items() if v or s in ("services", "siblings")},
               "command line")
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
