"""Service kinds by image name (the service catalogue, bot/catalogue.py), client imports, and
docker-compose files."""

from __future__ import annotations

import re
from typing import Any

from bot.catalogue import kind_of, kinds_for_imports
from bot.evidence.files import RepoFiles, line_of
from bot.evidence.model import Evidence, ImportUse, ServiceRequirement, Source
from bot.evidence.yamlload import load_yaml


def service_kind(image: str, name: str = "") -> str:
    """The catalogue's kind for a CI or compose service (bot/catalogue.py), "other" for an image
    the catalogue does not know (the application itself, or something setupbot cannot start)."""
    return kind_of(name=name, image=image) or "other"


def service_clients(ev: Evidence) -> dict[str, list[ImportUse]]:
    """Kinds of service the code talks to, from its client imports (``pymemcache`` -> memcached):
    a hint the report and the loop can name, never a service started on its own."""
    out: dict[str, list[ImportUse]] = {}
    for use in ev.imports:
        for kind in kinds_for_imports([use.module, use.full or use.module]):
            out.setdefault(kind, []).append(use)
    return out


COMPOSE_NAMES = (
    "docker-compose.yml",
    "docker-compose.yaml",
    "compose.yml",
    "compose.yaml",
    "docker-compose.test.yml",
    "docker-compose.tests.yml",
    "docker-compose.ci.yml",
    "docker-compose.dev.yml",
    "docker-compose.override.yml",
)


def scan_compose(files: RepoFiles, ev: Evidence) -> None:
    for rel in files.all_files():
        parts = rel.split("/")
        if len(parts) > 2 or parts[-1] not in COMPOSE_NAMES:
            continue
        if len(parts) == 2 and parts[0] not in (
            "docker",
            "tests",
            "test",
            "ci",
            ".ci",
            "dev",
            ".devcontainer",
            "deploy",
        ):
            continue
        text = files.read_text(rel)
        if text is None:
            continue
        data = load_yaml(ev, rel, text)
        if data is None:
            continue
        services = data.get("services") if isinstance(data, dict) else None
        if not isinstance(services, dict):
            ev.warn(rel, None, "no services mapping; ignored")
            continue
        for name, svc in services.items():
            if not isinstance(svc, dict):
                continue
            image = svc.get("image")
            if not isinstance(image, str) or "${" in image:
                continue  # built from the repository itself: the application, not a dependency
            kind = service_kind(image, str(name))
            if kind == "other":
                continue
            env = _compose_env(svc.get("environment"))
            ports = [str(p) for p in (svc.get("ports") or []) if isinstance(p, (str, int))]
            if any(s.kind == kind for s in ev.services):
                for s in ev.services:
                    if s.kind == kind:
                        s.evidence.append(Source(rel, line_of(text, image), f"compose service {name}"))
                continue
            ev.services.append(
                ServiceRequirement(
                    str(name), kind, image, ports, env, [Source(rel, line_of(text, image), f"compose service {name}")]
                )
            )


def _compose_env(env: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(env, dict):
        for k, v in env.items():
            if v is not None and "${" not in str(v):
                out[str(k)] = str(v)
    elif isinstance(env, list):
        for item in env:
            m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", str(item))
            if m and "${" not in m.group(2):
                out[m.group(1)] = m.group(2)
    return out
