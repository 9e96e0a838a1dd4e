"""The devcontainer.json that builds the compiled Dockerfile, or joins the compose project when
sibling services are needed. Validated against the official base schema (packaged copy) before
it is written, so a reviewer never receives a file their editor rejects."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import jsonschema

from bot.errors import InputError
from bot.markers import MARKER_TEXT
from bot.paths import PACKAGE_DIR
from bot.templating import environment

SCHEMA_PATH = PACKAGE_DIR / "report" / "schemas" / "devContainer.base.schema.json"
DEVCONTAINER_MARKER = f"{MARKER_TEXT}: remove this line to keep your own version"
WORKSPACE = "/workspace"
# The non-root user the compiled Dockerfile creates (bot.compile.dockerfile.DEV_USER); the
# editor attaches as this user, its UID matched to the host user's so bind-mounted files stay
# writable (updateRemoteUserUID). The tests in setupbot's own containers still run as root.
REMOTE_USER = "dev"
# the official python images' interpreter (the Dockerfile installs into it, no virtualenv)
INTERPRETER = "/usr/local/bin/python"


def build_devcontainer(
    *,
    name: str,
    test_command: Sequence[str],
    services: Iterable[Any] = (),
    env: dict[str, str] | None = None,
    post_create: Sequence[str] | None = None,
    forward_ports: Iterable[int] = (),
    context: str = "..",
    compose_files: Sequence[str] = (),
    app_service: str = "app",
    remote_user: str | None = REMOTE_USER,
) -> dict[str, Any]:
    """The devcontainer.json as a dict. ``services`` non-empty switches to the compose form;
    ``compose_files`` are the repository's own compose files that setupbot's compose.yaml
    extends (listed first, so its definitions stay the base). ``post_create`` only when the
    image alone is not enough (e.g. an editable install that needs the mounted source);
    otherwise the field is left out."""
    service_names = [str(getattr(s, "name", s)) for s in services]
    config: dict[str, Any] = {"name": name}
    if service_names:
        config.update(
            {
                "dockerComposeFile": [*compose_files, "compose.yaml"] if compose_files else "compose.yaml",
                "service": app_service,
                "runServices": [app_service, *service_names],
                "workspaceFolder": WORKSPACE,
                "shutdownAction": "stopCompose",
            }
        )
    else:
        config.update(
            {
                "build": {"dockerfile": "Dockerfile", "context": context},
                "workspaceFolder": WORKSPACE,
                "workspaceMount": f"source=${{localWorkspaceFolder}},target={WORKSPACE},type=bind",
            }
        )
    if env:
        config["containerEnv"] = dict(env)
    ports = sorted(set(int(p) for p in forward_ports))
    if ports:
        config["forwardPorts"] = ports
    if post_create:
        config["postCreateCommand"] = list(post_create)
    if remote_user:
        config["remoteUser"] = remote_user
        config["updateRemoteUserUID"] = True
    config["customizations"] = {
        "vscode": {
            "extensions": ["ms-python.python"],
            # the user is created without a login shell choice (useradd's default is sh)
            "settings": {
                "python.defaultInterpreterPath": INTERPRETER,
                "terminal.integrated.defaultProfile.linux": "bash",
            },
        },
        "setupbot": {"testCommand": list(test_command)},
    }
    return config


@lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


def validate_devcontainer(config: dict[str, Any]) -> None:
    """Raise InputError naming the first schema violation."""
    validator = jsonschema.Draft201909Validator(_schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "(top level)"
        raise InputError(
            f"generated devcontainer.json does not match the schema at {where}: {errors[0].message}",
            "This is a setupbot bug; please report it with the plan JSON.",
        )


def parse_devcontainer(text: str) -> dict[str, Any]:
    """devcontainer.json is JSON with comments; setupbot's own files only use whole-line ``//``
    comments, which is all this strips."""
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("//")]
    return json.loads("\n".join(lines))


def render_devcontainer(config: dict[str, Any]) -> str:
    validate_devcontainer(config)
    return (
        environment()
        .get_template("devcontainer.json.j2")
        .render(config=config, marker=DEVCONTAINER_MARKER)
        .rstrip("\n")
        + "\n"
    )
