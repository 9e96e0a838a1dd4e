"""compose.yaml for the devcontainer when the tests need sibling services: the app service built
from the compiled Dockerfile, plus each service with a health check."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml

from bot.catalogue import KINDS, canonical, split_image
from bot.markers import MARKER_TEXT
from bot.programs import source
from bot.services import ServiceSpec, container_env, wiring_env
from bot.templating import environment

COMPOSE_MARKER = f"{MARKER_TEXT}: remove this line to keep your own version"


@dataclass
class ComposeService:
    name: str
    image: str
    env: dict[str, str] = field(default_factory=dict)
    healthcheck: list[str] | None = None
    # defined by the repository's own compose file: setupbot's file only adds to it (a health
    # check, the host name the tests were wired to) instead of copying it
    base_name: str = ""
    aliases: list[str] = field(default_factory=list)


# the files Compose reads by default, which a repository's development setup lives in
BASE_COMPOSE_FILES = ("compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml")


def _evidence_of(s: Any) -> list[tuple[str, str]]:
    out = []
    for e in (s.get("evidence") if isinstance(s, dict) else getattr(s, "evidence", None)) or []:
        if isinstance(e, dict):
            out.append((str(e.get("file", "")), str(e.get("detail", ""))))
        elif isinstance(e, (list, tuple)) and len(e) >= 3:
            out.append((str(e[0]), str(e[2])))
        else:
            out.append((str(getattr(e, "file", "")), str(getattr(e, "detail", ""))))
    return out


def base_compose(services: Iterable[Any]) -> tuple[str | None, dict[str, str]]:
    """The repository's own compose file (at its root, one Compose reads by default) that defines
    the services, and for each service setupbot starts, its name in that file."""
    chosen: str | None = None
    names: dict[str, str] = {}
    for s in services:
        for file, detail in _evidence_of(s):
            if file in BASE_COMPOSE_FILES and detail.startswith("compose service ") and chosen in (None, file):
                chosen = file
                names[_service_key(ServiceSpec.from_any(s).alias)] = detail[len("compose service ") :].strip()
                break
    return chosen, names


def _service_key(name: str) -> str:
    # Compose service names: lowercase letters, digits, '-', '_', '.'; anything else is replaced.
    cleaned = "".join(c if c.isalnum() or c in "-_." else "-" for c in name.lower()).strip("-.")
    return cleaned or "service"


def compose_services(services: Iterable[Any], base_names: dict[str, str] | None = None) -> list[ComposeService]:
    """The same service definitions the verification started: the verify layer's catalogue gives
    each service its network alias (the host name the tests were wired to), the container's env
    and the health check (the service catalogue's Compose form).
    ``base_names`` (bot.compile.compose.base_compose) maps services the repository's compose file
    defines to their names there."""
    base_names = base_names or {}
    out = []
    for s in services:
        spec = ServiceSpec.from_any(s)
        kind = KINDS.get(spec.kind or "") or KINDS.get(canonical(split_image(spec.image)[0].rsplit("/", 1)[-1]) or "")
        check = getattr(s, "healthcheck", None) or (
            kind.compose_healthcheck(spec.port, container_env(spec)) if kind else None
        )
        key = _service_key(spec.alias)
        if key in base_names:
            base = _service_key(base_names[key])
            out.append(
                ComposeService(
                    base,
                    spec.image,
                    {},
                    list(check) if check else None,
                    base_name=base,
                    aliases=[key] if key != base else [],
                )
            )
            continue
        out.append(ComposeService(key, spec.image, dict(container_env(spec)), list(check) if check else None))
    return out


def app_environment(services: Iterable[Any], env: dict[str, str] | None = None) -> dict[str, str]:
    """What the app container needs to find its services (as the verification wired them), with
    the repository's own test variables winning."""
    return wiring_env([ServiceSpec.from_any(s) for s in services], env or {})


def context_for(output_dir: str) -> str:
    """The repository root as seen from the output folder ("..", "../..", ...)."""
    depth = len([p for p in output_dir.strip("/").split("/") if p not in ("", ".")])
    return "/".join([".."] * max(depth, 1))


def localhost_forwards(services: Iterable[Any]) -> list[str]:
    """LISTEN:ALIAS:PORT for each service: the app container relays localhost to it, as the
    verification's runner did, so tests written for CI's mapped ports work in the devcontainer."""
    out: list[str] = []
    for s in services:
        spec = ServiceSpec.from_any(s)
        for port in sorted({p for p in (spec.port, *spec.ports) if p}):
            item = f"{port}:{_service_key(spec.alias)}:{port}"
            if item not in out and not any(o.split(":")[0] == str(port) for o in out):
                out.append(item)
    return out


def app_command(forwards: list[str]) -> list[str]:
    """Keep the app container alive; with services, also run the localhost relay (the
    verification's own forwarder) in the background."""
    if not forwards:
        return ["sleep", "infinity"]
    # $$ is Compose's escape for a literal $
    return [
        "sh",
        "-c",
        'python -c "$$0" "$$@" >/tmp/setupbot-forwarder.log 2>&1 & exec sleep infinity',
        source("forwarder").strip() + "\n",
        *forwards,
    ]


def app_service_name(base_services: Iterable[str] = ()) -> str:
    """ "app", unless the repository's own compose file already has a service of that name."""
    return "devcontainer" if "app" in set(base_services) else "app"


def render_compose(
    *,
    services: Iterable[Any],
    app_env: dict[str, str] | None = None,
    output_dir: str = ".devcontainer",
    base_names: dict[str, str] | None = None,
    app_name: str = "app",
    relay: bool = True,
) -> str:
    """The compose file: the app (the development container) and the services. ``relay``: the
    app relays localhost to the services with the Python forwarder; off for an image without
    Python (a Rust toolchain image), whose tests reach the services by name through the env."""
    env = environment()
    services = list(services)
    forwards = localhost_forwards(services) if relay else []
    text = (
        env.get_template("compose.yaml.j2")
        .render(
            marker=COMPOSE_MARKER,
            services=compose_services(services, base_names),
            app_name=app_name,
            command=app_command(forwards),
            loopback_v6=bool(forwards),
            app_env={str(k): str(v) for k, v in (app_env or {}).items()},
            output_dir=output_dir.strip("/"),
            # with the repository's compose file listed first, Compose resolves every relative path
            # from that file's folder, the repository root
            context="." if base_names else context_for(output_dir),
        )
        .rstrip("\n")
        + "\n"
    )
    yaml.safe_load(text)  # a template bug must fail here, not in the reviewer's editor
    return text
