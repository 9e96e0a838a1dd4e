"""Settings: packaged defaults -> .github/setupbot.yml -> SETUPBOT_* env -> CLI/action inputs.

Each section is a frozen dataclass. Unknown keys anywhere in the chain raise ConfigError with a
"did you mean" suggestion, so a typo never silently does nothing.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from bot.errors import ConfigError, SetupbotError
from bot.paths import PACKAGE_DIR

DEFAULTS_FILE = PACKAGE_DIR / "defaults.yml"
REPO_CONFIG = Path(".github") / "setupbot.yml"
log = logging.getLogger(__name__)


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
    # Keys of the repository's own .github/setupbot.yml that were dropped, as (key, reason): the
    # repository describes itself, the operator governs the sandbox (SECURITY.md S11).
    refused: tuple[tuple[str, str], ...] = ()

    # Keys whose values are secrets: never logged, never passed to containers or prompts.
    SECRET_KEYS = ("llm.api_key", "github.token")

    def secrets(self) -> list[str]:
        """The secret values in force, for the redactor."""
        from urllib.parse import urlsplit

        try:   # the password inside the shared store's URL (postgresql://user:password@host/db)
            store_password = urlsplit(self.knowledge.url).password or ""
        except ValueError:
            store_password = ""
        return [v for v in (self.llm.api_key, self.github.token, store_password) if v]


_SECTIONS = {f.name: f for f in dataclasses.fields(Settings) if f.name != "refused"}


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


# What the repository's own file may set: what describes the repository (SECURITY.md S11).
# Everything else governs the sandbox or where data goes and comes from the operator only
# (packaged defaults, SETUPBOT_* environment, SETUPBOT_CONFIG, CLI flags, action inputs).
REPO_KEYS: dict[str, tuple[str, ...]] = {
    "target": ("test_command", "env", "collect_only", "as_of"),
    "output": ("dir",),
}
REPO_LISTS = ("services", "siblings")
_OPERATOR_WHY = {
    "engine": "the container sandbox (network, limits) is set by the operator",
    "ca": "which host files are trusted as CA certificates is set by the operator",
    "images": "where base images come from is set by the operator",
    "llm": "the LLM endpoint, model and key are set by the operator",
    "knowledge": "the experience store is set by the operator",
    "github": "GitHub access is set by the operator",
    "publish": "when a pull request is opened is set by the operator",
    "budgets": "run budgets are set by the operator",
}
MAX_CONFIG_BYTES = 256 * 1024


def _read_config(path: Path, *, repo: Path | None = None) -> Any:
    """Parse one configuration file, bounded: size cap, strict UTF-8, no alias bombs, no deep
    nesting (SECURITY.md S16). A repository's file is read through the safe reader, so a
    symlinked setupbot.yml pointing out of the repository is refused."""
    from bot import safefs, yamlsafe

    try:
        if repo is not None:
            raw = safefs.read_bytes(repo, REPO_CONFIG.as_posix(), max_bytes=MAX_CONFIG_BYTES)
        else:
            raw = Path(path).read_bytes()
            if len(raw) > MAX_CONFIG_BYTES:
                raise ConfigError(f"{path} is larger than {MAX_CONFIG_BYTES // 1024} KiB",
                                  "A setupbot configuration is a few lines; check the file.")
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}: line {line} is not valid UTF-8",
                          "Save the file as UTF-8.") from None
    except safefs.UnsafePath as exc:
        raise ConfigError(f"cannot read {path}: {exc.what}", "Make it a plain file inside the repository.") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", "Fix the file or remove it.") from exc
    try:
        return yamlsafe.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"cannot read {path}{where}: {problem}", "Fix the YAML or remove the file.") from None


def _sibling_refusal(entry: Mapping[str, Any], repo: Path) -> str | None:
    """Why a sibling named by the repository's file is refused, or None: a path must stay
    inside the repository (no absolute path, no '..', no link out), a url must be https."""
    from bot import safefs

    path, url = entry.get("path"), entry.get("url")
    if path:
        text = str(path).replace("\\", "/")
        if text.startswith("/") or ".." in text.split("/"):
            return f"path {text!r} leaves the repository"
        if not safefs.inside(repo, repo.resolve() / text):
            return f"path {text!r} is a link out of the repository"
    if url and not str(url).startswith("https://"):
        return f"url {str(url)[:100]!r} is not an https URL"
    if url and "@" in str(url).split("/")[2]:
        return "url carries credentials"
    return None


def _service_refusal(entry: Mapping[str, Any]) -> str | None:
    """Why a service named by the repository's file is refused: only catalogue services (their
    own images or the known variants of them) start from a repository's word."""
    from bot.verify.catalog import KINDS, kind_of, split_image

    image = str(entry.get("image") or "").strip()
    try:
        ports = [int(p) for p in (entry.get("ports") or []) if str(p).isdigit()]
    except TypeError:
        ports = []
    kind = kind_of(str(entry.get("kind") or "")) or kind_of(str(entry.get("name") or ""), image, ports)
    if kind is None:
        return "not a service of the catalogue"
    if image and split_image(image)[0] not in KINDS[kind].repositories:
        return f"image {image[:100]!r} is not one of the catalogue's images for {kind}"
    return None


def repo_layer(data: Any, repo: Path, origin: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Keep what the repository's file may set; return it and the refused keys with reasons.
    Refusals are not errors: the run goes on with the operator's values and reports them."""
    if not isinstance(data, Mapping):
        return data, []   # _merge reports the shape error
    kept: dict[str, Any] = {}
    refused: list[tuple[str, str]] = []
    for section, value in data.items():
        if section in REPO_LISTS:
            if not isinstance(value, list):
                kept[section] = value          # _merge explains the shape
                continue
            good = []
            for i, entry in enumerate(value):
                why = None
                if isinstance(entry, Mapping):
                    why = (_sibling_refusal(entry, repo) if section == "siblings" else _service_refusal(entry))
                if why:
                    refused.append((f"{section}[{i}]", why))
                else:
                    good.append(entry)
            kept[section] = good
        elif section in REPO_KEYS:
            if not isinstance(value, Mapping):
                kept[section] = value
                continue
            part = {}
            for key, v in value.items():
                if key in REPO_KEYS[section] or key not in {f.name for f in dataclasses.fields(
                        _SECTIONS[section].default_factory)}:  # type: ignore[misc]
                    part[key] = v                 # unknown keys stay: _merge suggests the right one
                else:
                    refused.append((f"{section}.{key}", "set by the operator only"))
            if section == "target" and isinstance(part.get("env"), Mapping):
                env = {}
                for name, v in part["env"].items():
                    text = "" if v is None else str(v)
                    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", str(name)):
                        refused.append((f"target.env.{str(name)[:40]}", "not a variable name"))
                    elif isinstance(v, (list, dict)) or any(ord(c) < 32 and c != "\t" for c in text) or len(text) > 4096:
                        refused.append((f"target.env.{name}", "the value must be one line of text"))
                    else:
                        env[name] = v
                part["env"] = env
            if section == "output" and "dir" in part:
                from bot.outputs import check_output_dir
                try:
                    check_output_dir(str(part["dir"] or ""))
                except SetupbotError as exc:
                    del part["dir"]
                    refused.append(("output.dir", exc.what))
            kept[section] = part
        elif section in _SECTIONS:
            keys = list(value) if isinstance(value, Mapping) else []
            why = _OPERATOR_WHY.get(section, "set by the operator only")
            refused += [(f"{section}.{k}", why) for k in keys] or [(section, why)]
        else:
            kept[section] = value                 # unknown: _merge raises with a suggestion
    for key, why in refused:
        log.warning("%s: refused %s: %s", origin, key, why)
    return kept, refused


def load_settings(repo: Path | None = None, *, overrides: Mapping[str, Any] | None = None,
                  environ: Mapping[str, str] | None = None,
                  config_file: Path | None = None) -> Settings:
    """Resolve the settings chain. ``overrides`` is a {section: {key: value}} mapping from the
    CLI or action inputs (values of None are ignored). ``config_file`` and SETUPBOT_CONFIG name
    an operator's file (every key allowed); the repository's own .github/setupbot.yml may set
    only what describes the repository (``repo_layer``)."""
    merged: dict[str, Any] = {}
    _merge(merged, yaml.safe_load(DEFAULTS_FILE.read_text()) or {}, str(DEFAULTS_FILE))
    environ = os.environ if environ is None else environ
    path = config_file or (Path(environ["SETUPBOT_CONFIG"]) if environ.get("SETUPBOT_CONFIG") else None)
    refused: list[tuple[str, str]] = []
    if path is not None:
        _merge(merged, _read_config(Path(path)), str(path))
    elif repo is not None and ((repo / REPO_CONFIG).is_file() or (repo / REPO_CONFIG).is_symlink()):
        origin = str(repo / REPO_CONFIG)
        data, refused = repo_layer(_read_config(repo / REPO_CONFIG, repo=Path(repo)), Path(repo), origin)
        _merge(merged, data, origin)
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
    settings = Settings(**kwargs, refused=tuple(refused))
    if settings.engine.kind not in ("docker", "podman"):
        raise ConfigError(f"engine.kind must be docker or podman, not {settings.engine.kind!r}")
    from bot.redact import register_secret

    for secret in settings.secrets():   # from a flag or an operator file, too, not only from env
        register_secret(secret)
    return settings
