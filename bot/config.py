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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

from bot import safefs, yamlsafe
from bot.catalogue import KINDS, kind_of, split_image
from bot.errors import ConfigError, SetupbotError
from bot.markers import check_output_dir
from bot.paths import PACKAGE_DIR
from bot.redact import register_secret

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
    # seconds an image build may go on after pip says its resolver is taking longer than usual
    resolver_grace: int = 300
    keep_containers: bool = False
    network_mode: str = "bridge"


@dataclass(frozen=True)
class CASettings:
    file: str = "auto"


@dataclass(frozen=True)
class ImagesSettings:
    suites: tuple[str, ...] = ("bookworm", "trixie")
    mirror: str = ""  # "" = debootstrap's own default mirror
    cache_dir: str = ""
    # Also keep each built image as a `docker save` archive under cache_dir, named by its recipe
    # hash, so an engine whose store is empty loads it instead of building it again.
    archives: bool = False
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
    min_similarity: float = 0.6
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
    lock: bool = True


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
    """One entry of ``services:``: a service the tests need (bot/services.py reads it)."""

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
    # Keys of the repository's own .github/setupbot.yml that were dropped, as (key, reason): the
    # repository describes itself, the operator governs the sandbox (SECURITY.md S11).
    refused: tuple[tuple[str, str], ...] = ()

    # Keys whose values are secrets: never logged, never passed to containers or prompts.
    SECRET_KEYS = ("llm.api_key", "github.token")

    def secrets(self) -> list[str]:
        """The secret values in force, for the redactor."""
        from urllib.parse import urlsplit

        try:  # the password inside the shared store's URL (postgresql://user:password@host/db)
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
        raise ConfigError(
            f"{where}: cannot use {value!r} as {t}", "Fix the value in the file or variable named above."
        ) from exc
    return value


def _at(origin: str, marks: Mapping[tuple, int] | None, *path: Any) -> str:
    """``origin`` with the line of ``path`` in it, when the layer is a file with line marks."""
    line = (marks or {}).get(tuple(path))
    return f"{origin}:{line}" if line else origin


def merge_layer(
    base: dict[str, Any],
    layer: Mapping[str, Any],
    origin: str,
    *,
    marks: Mapping[tuple, int] | None = None,
    origins: dict[str, str] | None = None,
    layer_name: str = "",
    list_offset: int = 0,
) -> None:
    """Merge one layer into ``base`` in place, rejecting unknown keys. ``marks`` ({key path:
    line}) puts the user's line into errors; ``origins`` records which layer set each key.
    ``list_offset`` is the index in the file of a list section's first entry in ``layer``."""
    hint = "`setupbot config schema` lists the sections and keys."
    if not isinstance(layer, Mapping):
        raise ConfigError(f"{origin}: the top level must be a mapping of sections", hint)
    for section, value in layer.items():
        if section not in _SECTIONS:
            raise ConfigError(
                f"{_at(origin, marks, section)}: unknown section '{section}'.{_suggest(str(section), list(_SECTIONS))}",
                hint,
            )
        if section in LIST_ITEMS:
            base[section] = _checked_list(section, value, origin, marks, list_offset)
            if origins is not None:
                origins[section] = layer_name or origin
            continue
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise ConfigError(f"{_at(origin, marks, section)}: section '{section}' must be a mapping")
        _merge_section(base, section, value, origin, marks, origins, layer_name)


def _checked_list(
    section: str, value: Any, origin: str, marks: Mapping[tuple, int] | None, offset: int = 0
) -> tuple[dict[str, Any], ...]:
    """A list section (services, siblings) as the layer wrote it, once its keys and values check."""
    if value is None:
        value = []
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise ConfigError(f"{_at(origin, marks, section)}: '{section}' must be a list of mappings")
    item_fields = {sf.name: sf for sf in dataclasses.fields(LIST_ITEMS[section])}
    known = list(item_fields)
    for i, item in enumerate(value, start=offset):
        for key, v in item.items():
            if key not in known:
                raise ConfigError(
                    f"{_at(origin, marks, section, i, key)}: unknown key '{key}' in {section}[{i}]."
                    f"{_suggest(str(key), known)}",
                    f"Known keys of a {section} entry: {', '.join(known)}.",
                )
            if v is not None:  # checked only: the readers take the values as written
                _coerce(v, item_fields[key].type, f"{_at(origin, marks, section, i, key)}: {section}[{i}].{key}")
    return tuple(dict(v) for v in value)


def _merge_section(
    base: dict[str, Any],
    section: str,
    value: Mapping[str, Any],
    origin: str,
    marks: Mapping[tuple, int] | None,
    origins: dict[str, str] | None,
    layer_name: str,
) -> None:
    """Merge the keys of one mapping section into ``base[section]``, coerced to their types."""
    cls = cast(Any, _SECTIONS[section].default_factory)
    fields = {sf.name: sf for sf in dataclasses.fields(cls)}
    current = base.setdefault(section, {})
    for key, v in value.items():
        if key not in fields:
            raise ConfigError(
                f"{_at(origin, marks, section, key)}: unknown key '{section}.{key}'.{_suggest(str(key), list(fields))}",
                f"Known keys in '{section}': {', '.join(fields)}.",
            )
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


def read_config_file(path: Path, *, repo: Path | None = None) -> tuple[Any, dict[tuple, int]]:
    """The data of a settings file and its line marks; errors name the file and line. Reading is
    bounded (``_read_config``); the marks come from a second, cheap compose of the same text, which
    ``_read_config`` has already proven small and shallow."""
    data = _read_config(path, repo=repo)
    try:
        raw = (
            safefs.read_bytes(repo, REPO_CONFIG.as_posix(), max_bytes=MAX_CONFIG_BYTES)
            if repo is not None
            else Path(path).read_bytes()
        )
        marks = line_marks(raw.decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, safefs.UnsafePath):
        marks = {}
    return data, marks


def _env_layer(environ: Mapping[str, str], names: dict[str, str] | None = None) -> dict[str, Any]:
    """SETUPBOT_<SECTION>_<KEY>=value. Only variables whose <SECTION> is a settings section are
    read (an unknown key in a known section is an error); any other SETUPBOT_ name (say
    SETUPBOT_VERSION) belongs to something else and is ignored. ``names`` gets {section.key:
    variable} for the origin of each value."""
    reserved = {
        "SETUPBOT_CONFIG",
        "SETUPBOT_DEBUG",
        "SETUPBOT_TEST_PG_URL",
        "SETUPBOT_TEST_BUILDX_CONFIG",
        "SETUPBOT_RUN_ID",
    }
    layer: dict[str, Any] = {}
    for name, value in environ.items():
        if not name.startswith("SETUPBOT_") or name in reserved:
            continue
        rest = name[len("SETUPBOT_") :].lower()
        for section in sorted(_SECTIONS, key=len, reverse=True):
            if rest.startswith(section + "_") and section not in LIST_ITEMS:
                key = rest[len(section) + 1 :]
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
                    name,
                    rest.split("_")[0],
                    close[0].upper(),
                )
    return layer


# What the repository's own file may set: what describes the repository (SECURITY.md S11).
# Everything else governs the sandbox or where data goes and comes from the operator only
# (packaged defaults, SETUPBOT_* environment, SETUPBOT_CONFIG, CLI flags, action inputs).
REPO_KEYS: dict[str, tuple[str, ...]] = {
    "target": ("test_command", "env", "collect_only", "as_of"),
    "output": ("dir", "lock"),
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
    try:
        if repo is not None:
            raw = safefs.read_bytes(repo, REPO_CONFIG.as_posix(), max_bytes=MAX_CONFIG_BYTES)
        else:
            raw = Path(path).read_bytes()
            if len(raw) > MAX_CONFIG_BYTES:
                raise ConfigError(
                    f"{path} is larger than {MAX_CONFIG_BYTES // 1024} KiB",
                    "A setupbot configuration is a few lines; check the file.",
                )
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}: line {line} is not valid UTF-8", "Save the file as UTF-8.") from None
    except safefs.UnsafePath as exc:
        raise ConfigError(f"cannot read {path}: {exc.what}", "Make it a plain file inside the repository.") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", "Fix the file or remove it.") from exc
    try:
        return yamlsafe.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: not valid YAML: {problem}", "Fix the YAML or remove the file.") from None


def _sibling_refusal(entry: Mapping[str, Any], repo: Path) -> str | None:
    """Why a sibling named by the repository's file is refused, or None: a path must stay
    inside the repository (no absolute path, no '..', no link out), a url must be https."""
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
    image = str(entry.get("image") or "").strip()
    try:
        ports = [int(p) for p in (entry.get("ports") or []) if str(p).isdigit()]
    except TypeError:
        ports = []
    kind = kind_of(str(entry.get("kind") or "")) or kind_of(str(entry.get("name") or ""), image, ports)
    if kind is None or KINDS[kind].wiring is None:
        return "not a service of the catalogue"
    if image and split_image(image)[0] not in KINDS[kind].repositories:
        return f"image {image[:100]!r} is not one of the catalogue's images for {kind}"
    return None


def repo_layer(data: Any, repo: Path, origin: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Keep what the repository's file may set; return it and the refused keys with reasons.
    Refusals are not errors: the run goes on with the operator's values and reports them."""
    if not isinstance(data, Mapping):
        return data, []  # _merge_repo_layer refuses the file with the shape error
    kept: dict[str, Any] = {}
    refused: list[tuple[str, str]] = []
    for section, value in data.items():
        if section in REPO_LISTS:
            # not a list: _merge_repo_layer refuses it with the shape
            kept[section] = _repo_entries(section, value, repo, refused) if isinstance(value, list) else value
        elif section in REPO_KEYS:
            kept[section] = _repo_keys(section, value, refused) if isinstance(value, Mapping) else value
        elif section in _SECTIONS:
            keys = list(value) if isinstance(value, Mapping) else []
            why = _OPERATOR_WHY.get(section, "set by the operator only")
            refused += [(f"{section}.{k}", why) for k in keys] or [(section, why)]
        else:
            kept[section] = value  # unknown: _merge_repo_layer refuses it with a suggestion
    for key, why in refused:
        log.warning("%s: refused %s: %s", origin, key, why)
    return kept, refused


def _repo_entries(section: str, value: list, repo: Path, refused: list[tuple[str, str]]) -> list:
    """The entries of a list section (siblings, services) the repository may name; the others
    go to ``refused`` and stay as ``_REFUSED``, so that the rest keep their index (and line)."""
    good: list[Any] = []
    known = {f.name for f in dataclasses.fields(LIST_ITEMS[section])}
    for i, entry in enumerate(value):
        why = None
        if isinstance(entry, Mapping) and not set(entry) - known:  # a typo: refused with a suggestion later
            why = _sibling_refusal(entry, repo) if section == "siblings" else _service_refusal(entry)
        if why:
            refused.append((f"{section}[{i}]", why))
            good.append(_REFUSED)
        else:
            good.append(entry)
    return good


_REFUSED = object()  # a list entry already refused (``_repo_entries``), in its place


def _repo_keys(section: str, value: Mapping[str, Any], refused: list[tuple[str, str]]) -> dict[str, Any]:
    """The keys of a section the repository may set; operator-only keys go to ``refused``."""
    part = {}
    for key, v in value.items():
        if key in REPO_KEYS[section] or key not in {
            f.name for f in dataclasses.fields(cast(Any, _SECTIONS[section].default_factory))
        }:
            part[key] = v  # unknown keys stay: _merge_repo_layer refuses them with the right one
        else:
            refused.append((f"{section}.{key}", "set by the operator only"))
    if section == "target" and isinstance(part.get("env"), Mapping):
        part["env"] = _repo_env(part["env"], refused)
    if section == "output" and "dir" in part:
        try:
            check_output_dir(str(part["dir"] or ""))
        except SetupbotError as exc:
            del part["dir"]
            refused.append(("output.dir", exc.what))
    return part


def _repo_env(values: Mapping[Any, Any], refused: list[tuple[str, str]]) -> dict[Any, Any]:
    """target.env from the repository: variable names, each value one line of text."""
    env = {}
    for name, v in values.items():
        text = "" if v is None else str(v)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", str(name)):
            refused.append((f"target.env.{str(name)[:40]}", "not a variable name"))
        elif isinstance(v, (list, dict)) or any(ord(c) < 32 and c != "\t" for c in text) or len(text) > 4096:
            refused.append((f"target.env.{name}", "the value must be one line of text"))
        else:
            env[name] = v
    return env


def load_settings(
    repo: Path | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    config_file: Path | None = None,
    origins: dict[str, str] | None = None,
) -> Settings:
    """Resolve the settings chain. ``overrides`` is a {section: {key: value}} mapping from the
    CLI or action inputs (values of None are ignored). ``config_file`` and SETUPBOT_CONFIG name
    an operator's file (every key allowed); the repository's own .github/setupbot.yml may set
    only what describes the repository (``repo_layer``). ``origins``, when given, gets the layer that
    set each value: default, operator or repository file (path), environment (variable), flag."""
    merged: dict[str, Any] = {}
    merge_layer(
        merged,
        yaml.safe_load(DEFAULTS_FILE.read_text()) or {},
        str(DEFAULTS_FILE),
        origins=origins,
        layer_name="default",
    )
    environ = os.environ if environ is None else environ
    path = config_file or (Path(environ["SETUPBOT_CONFIG"]) if environ.get("SETUPBOT_CONFIG") else None)
    refused = _merge_file_layer(merged, path, repo, origins)
    _merge_env_layer(merged, environ, origins)
    if overrides:
        cleaned = {s: {k: v for k, v in (vals or {}).items() if v is not None} for s, vals in overrides.items()}
        merge_layer(
            merged,
            {s: v for s, v in cleaned.items() if v or s in ("services", "siblings")},
            "command line",
            origins=origins,
            layer_name="flag",
        )
    kwargs: dict[str, Any] = {}
    for name, f in _SECTIONS.items():
        if name in ("services", "siblings"):
            kwargs[name] = tuple(merged.get(name, ()))
        else:
            kwargs[name] = cast(Any, f.default_factory)(**merged.get(name, {}))
    settings = Settings(**kwargs, refused=tuple(refused))
    if settings.engine.kind not in ("docker", "podman"):
        raise ConfigError(f"engine.kind must be docker or podman, not {settings.engine.kind!r}")
    for secret in settings.secrets():  # from a flag or an operator file, too, not only from env
        register_secret(secret)
    return settings


def _merge_file_layer(
    merged: dict[str, Any], path: Path | None, repo: Path | None, origins: dict[str, str] | None
) -> list[tuple[str, str]]:
    """Merge the operator's file (``path``) or else the repository's own; return what the
    repository's file was refused."""
    refused: list[tuple[str, str]] = []
    if path is not None:
        data, marks = read_config_file(Path(path))
        merge_layer(merged, data, str(path), marks=marks, origins=origins, layer_name=f"operator file ({path})")
    elif repo is not None and ((repo / REPO_CONFIG).is_file() or (repo / REPO_CONFIG).is_symlink()):
        origin = str(repo / REPO_CONFIG)
        try:
            data, marks = read_config_file(repo / REPO_CONFIG, repo=Path(repo))
        except ConfigError as exc:
            refused.append((REPO_CONFIG.as_posix(), f"not read: {_relative(exc.what, origin)}"))
            log.warning("not read: %s", exc.what)
            return refused
        data, refused = repo_layer(data, Path(repo), origin)
        refused += _merge_repo_layer(merged, data, origin, marks, origins)
    return refused


def _relative(message: str, origin: str) -> str:
    """A message about the repository's file names it as the repository does (no host path)."""
    return message.replace(origin, REPO_CONFIG.as_posix())


def _merge_repo_layer(
    merged: dict[str, Any],
    data: Any,
    origin: str,
    marks: Mapping[tuple, int],
    origins: dict[str, str] | None,
) -> list[tuple[str, str]]:
    """Merge the repository's file one key (or list entry) at a time. The file is untrusted input
    and a pull request's author may have written it: a key that does not check is refused with
    the reason and its line, and the run goes on with the rest; the report lists it."""
    refused: list[tuple[str, str]] = []
    name = f"repository file ({origin})"

    def attempt(key: str, layer: Mapping[str, Any], **kw: Any) -> bool:
        try:
            merge_layer(merged, layer, origin, marks=marks, origins=origins, layer_name=name, **kw)
        except ConfigError as exc:
            refused.append((key, _relative(exc.what, origin)))
            log.warning("refused %s: %s", key, exc.what)
            return False
        return True

    if not isinstance(data, Mapping):
        attempt(REPO_CONFIG.as_posix(), data)
        return refused
    for section, value in data.items():
        if section in LIST_ITEMS and isinstance(value, list):
            good = [
                e
                for i, e in enumerate(value)
                if e is not _REFUSED and attempt(f"{section}[{i}]", {section: [e]}, list_offset=i)
            ]
            merged[section] = tuple(dict(e) for e in good)
        elif section in _SECTIONS and section not in LIST_ITEMS and isinstance(value, Mapping):
            for key, v in value.items():
                attempt(f"{section}.{key}", {section: {key: v}})
        else:
            attempt(str(section)[:40], {section: value})
    return refused


def _merge_env_layer(merged: dict[str, Any], environ: Mapping[str, str], origins: dict[str, str] | None) -> None:
    names: dict[str, str] = {}
    for section, values in _env_layer(environ, names).items():
        for key, value in values.items():  # one variable at a time: errors name the variable
            variable = names[f"{section}.{key}"]
            merge_layer(
                merged,
                {section: {key: value}},
                f"environment variable {variable}",
                origins=origins,
                layer_name=f"environment ({variable})",
            )
