"""Experience units: <id, signals, advice, atoms, telemetry> (DESIGN.md, "The experience base").

A unit is stored as its JSON document. Every unit that enters a store passes two checks:
the JSON schema (shape) and ``Atom.validate`` (each atom is allowed and well formed), and every
signal pattern must compile. A unit that fails is refused with the reason.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from bot.atoms import Atom, AtomError
from bot.errors import KnowledgeError
from bot.graph.mapping import DATA, repair_distribution

# libyaml's parser when PyYAML has it: the seed is parsed at every fresh store
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SCHEMA_FILE = Path(__file__).with_name("unit.schema.json")
SEED_DIR = Path(__file__).with_name("seed")

# SetupX tiers: a unit proven often is "golden", one that keeps failing sinks to "cold".
GOLDEN, COLD, NORMAL = 1.5, 0.6, 1.0
TIER_MIN_HITS = 5


def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text())


_VALIDATOR = jsonschema.Draft202012Validator(_schema())


@dataclass(frozen=True)
class Telemetry:
    hits: int = 0
    successes: int = 0
    failures: int = 0
    offered: int = 0

    @property
    def success_rate(self) -> float:
        return self.successes / self.hits if self.hits else 0.0

    @property
    def tier(self) -> float:
        if self.hits >= TIER_MIN_HITS and self.success_rate >= 0.2:
            return GOLDEN
        if self.hits >= TIER_MIN_HITS and self.success_rate < 0.1:
            return COLD
        return NORMAL

    @property
    def tier_name(self) -> str:
        return {GOLDEN: "golden", COLD: "cold"}.get(self.tier, "normal")

    def to_json(self) -> dict[str, int]:
        return {"hits": self.hits, "successes": self.successes, "failures": self.failures, "offered": self.offered}


@dataclass(frozen=True)
class Unit:
    id: str
    category: str
    patterns: tuple[str, ...]
    advice: str
    atoms: tuple[Atom, ...]
    keywords: tuple[str, ...] = ()
    when: Mapping[str, Any] = field(default_factory=dict)
    title: str = ""
    weight: float = 1.0
    provenance: tuple[Mapping[str, Any], ...] = ()
    telemetry: Telemetry = field(default_factory=Telemetry)
    embedding: tuple[float, ...] | None = None

    @cached_property
    def regexes(self) -> tuple[re.Pattern[str], ...]:
        compiled = []
        for p in self.patterns:
            try:
                compiled.append(re.compile(p, re.MULTILINE))
            except re.error:
                continue  # only a document edited behind the store's back gets here
        return tuple(compiled)

    def match(self, text: str) -> re.Match[str] | None:
        """The first signal pattern that matches ``text``."""
        for rx in self.regexes:
            m = rx.search(text)
            if m:
                return m
        return None

    def search_text(self) -> str:
        """What lexical and embedding similarity look at: signals plus advice."""
        literal = " ".join(_pattern_words(p) for p in self.patterns)
        return " ".join([self.title, literal, " ".join(self.keywords), self.advice])

    def applies(self, context: Mapping[str, Any]) -> bool:
        """Applicability conditions: OS family, Debian suite, Python version range, tool, framework.
        Unknown context values do not exclude a unit (the loop may not know the tool yet), except
        the framework."""
        os_names = self.when.get("os")
        if os_names and "any" not in os_names and context.get("os") and context["os"] not in os_names:
            return False
        spec = self.when.get("python")
        if spec and context.get("python"):
            try:
                if Version(str(context["python"])) not in SpecifierSet(spec):
                    return False
            except (InvalidSpecifier, ValueError):
                pass
        suites = self.when.get("suite")
        if suites and context.get("suite") and context["suite"] not in suites:
            return False
        tools = self.when.get("tool")
        if tools and context.get("tool") and context["tool"] not in tools:
            return False
        # a framework's own unit applies only where the loop saw that framework: unlike the
        # others, an unknown framework excludes it (it would outrank the generic unit anywhere)
        frameworks = self.when.get("framework")
        if frameworks and context.get("framework") not in frameworks:
            return False
        return True

    def to_json(self, *, with_telemetry: bool = True, with_embedding: bool = False) -> dict[str, Any]:
        signals: dict[str, Any] = {"patterns": list(self.patterns)}
        if self.keywords:
            signals["keywords"] = list(self.keywords)
        if self.when:
            signals["when"] = dict(self.when)
        data: dict[str, Any] = {"id": self.id, "category": self.category}
        if self.title:
            data["title"] = self.title
        data.update({"signals": signals, "advice": self.advice, "atoms": [a.to_json() for a in self.atoms]})
        if self.weight != 1.0:
            data["weight"] = self.weight
        if self.provenance:
            data["provenance"] = [dict(p) for p in self.provenance]
        if with_telemetry:
            data["telemetry"] = self.telemetry.to_json()
        if with_embedding and self.embedding is not None:
            data["embedding"] = list(self.embedding)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, validate: bool = True) -> Unit:
        """Validate and build a unit; raise KnowledgeError with the reason when it is invalid.
        ``validate=False`` is for documents a store already validated on the way in: it skips
        the schema and the pattern compilation (patterns compile on first use), not the atoms."""
        if not validate:
            return cls._build(data)
        where = f"unit {data.get('id', '?')!r}" if isinstance(data, Mapping) else "unit"
        errors = sorted(_VALIDATOR.iter_errors(data), key=lambda e: list(e.absolute_path))
        if errors:
            e = errors[0]
            path = "/".join(str(p) for p in e.absolute_path) or "(top level)"
            raise KnowledgeError(
                f"{where} is invalid at {path}: {e.message}", f"See {SCHEMA_FILE.name} for the shape of a unit."
            )
        for p in data["signals"]["patterns"]:
            try:
                re.compile(p)
            except re.error as exc:
                raise KnowledgeError(
                    f"{where}: signal pattern {p!r} does not compile: {exc}",
                    "Signal patterns are Python regular expressions.",
                ) from exc
        spec = (data["signals"].get("when") or {}).get("python")
        if spec is not None:
            try:
                SpecifierSet(spec)
            except InvalidSpecifier as exc:
                raise KnowledgeError(
                    f"{where}: when.python {spec!r} is not a version range", "Use a PEP 440 specifier such as '>=3.12'."
                ) from exc
        return cls._build(data, where)

    @classmethod
    def _build(cls, data: Mapping[str, Any], where: str = "") -> Unit:
        where = where or f"unit {data.get('id', '?')!r}"
        atoms = []
        for raw in data["atoms"]:
            try:
                atoms.append(Atom.from_json(raw))
            except AtomError as exc:
                raise KnowledgeError(
                    f"{where} has an invalid atom: {exc}", "Atoms are listed in bot/atoms.py."
                ) from exc
        signals = data["signals"]
        when = dict(signals.get("when") or {})
        emb = data.get("embedding")
        return cls(
            id=data["id"],
            category=data["category"],
            patterns=tuple(signals["patterns"]),
            advice=data["advice"],
            atoms=tuple(atoms),
            keywords=tuple(signals.get("keywords", ())),
            when=when,
            title=data.get("title", ""),
            weight=float(data.get("weight", 1.0)),
            provenance=tuple(data.get("provenance", ())),
            telemetry=Telemetry(**(data.get("telemetry") or {})),
            embedding=tuple(emb) if emb else None,
        )


def _pattern_words(pattern: str) -> str:
    """Readable words of a regex, for lexical ranking: escapes and syntax removed."""
    text = re.sub(r"\\[dDsSwWbB]|\(\?[:!=<P][^)]*?\)?|[\^$*+?{}()\[\]|]|\\", " ", pattern)
    return re.sub(r"\s+", " ", text).strip()


def load_units_file(path: Path) -> list[Unit]:
    """Units from a YAML or JSON file (a list, or {units: [...]})."""
    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else yaml.load(text, Loader=_YAML_LOADER)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise KnowledgeError(
            f"cannot read units from {path}: {exc}", "The file must be YAML or JSON holding a list of units."
        ) from exc
    generated: list[dict[str, Any]] = []
    if isinstance(data, Mapping):
        if data.get("generate") is not None:
            generated = generate_units(data["generate"], path)
        data = data.get("units", [])
    if not isinstance(data, list):
        raise KnowledgeError(f"{path}: expected a list of units", "Write a list, or a mapping with a 'units' list.")
    return [Unit.from_json(d) for d in [*generated, *data]]


def _install_module_unit(module: str, advice: str | None, where: Path) -> dict[str, Any]:
    dist = repair_distribution(module)
    if not dist:
        raise KnowledgeError(
            f"{where}: no distribution is known for the import {module!r}",
            "Add it to bot/graph/data/import_map.json, or write the unit by hand.",
        )
    return {
        "id": "install-module-" + module.lower().replace(".", "-"),
        "category": "install",
        "title": f"import {module} needs {dist}",
        "signals": {
            "patterns": [f"No module named '?{re.escape(module)}(?:'|\\.|$)"],
            "keywords": [dist.lower(), "modulenotfounderror"],
        },
        "advice": advice or f"The import name {module} is provided by the distribution {dist}; install {dist}.",
        "atoms": [{"kind": "pip_install", "packages": [dist]}],
    }


def generate_units(spec: Any, where: Path) -> list[dict[str, Any]]:
    """Units generated from a table the rules use, so that one fact is written once
    (docs/architecture.md, "One form for repair knowledge"). ``install-module``: one unit per
    module, its distribution from bot.graph.mapping; a module given as ``{name: advice}``
    keeps its own advice."""
    if (
        not isinstance(spec, Mapping)
        or spec.get("kind") != "install-module"
        or not isinstance(spec.get("modules"), list)
    ):
        raise KnowledgeError(
            f"{where}: 'generate' needs kind: install-module and a list of modules",
            "See bot/knowledge/seed/install-modules.yml.",
        )
    out = []
    for item in spec["modules"]:
        module, advice = next(iter(item.items())) if isinstance(item, Mapping) else (item, None)
        out.append(_install_module_unit(str(module), advice, where))
    return out


def seed_digest() -> str:
    """A digest of the packaged seed files: stores reload the seed only when it changes."""
    h = hashlib.sha256()
    # generated units read the import table: a change there is a change of the seed
    for path in [*sorted(SEED_DIR.glob("*.yml")), DATA / "import_map.json"]:
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def _seed_units_cached(digest: str) -> tuple[Unit, ...]:
    units: list[Unit] = []
    seen: set[str] = set()
    for path in sorted(SEED_DIR.glob("*.yml")):
        for unit in load_units_file(path):
            if unit.id in seen:
                raise KnowledgeError(f"seed unit id {unit.id!r} appears twice ({path.name})")
            seen.add(unit.id)
            units.append(unit)
    return tuple(units)


def seed_units() -> list[Unit]:
    """The knowledge shipped with the package (bot/knowledge/seed/*.yml), validated."""
    return list(_seed_units_cached(seed_digest()))


def iter_valid(raw_units: Iterable[Mapping[str, Any]]) -> tuple[list[Unit], list[str]]:
    """Split raw unit documents into valid units and reasons for the invalid ones."""
    good, bad = [], []
    for i, raw in enumerate(raw_units):
        try:
            good.append(Unit.from_json(raw))
        except KnowledgeError as exc:
            bad.append(f"#{i}: {exc.what}")
    return good, bad
