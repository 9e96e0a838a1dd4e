"""The registry of stand-in images ``setupbot images bootstrap`` can build.

A recipe is data: the official name the image answers to, a Jinja Dockerfile template under
``templates/``, the image it builds FROM, and a probe that must pass in the result. Debian and
Python stand-ins are defined here; service stand-ins (postgres, redis, ...) are the list
``SERVICE_RECIPES`` in ``bot/engine/service_recipes.py``, made of the same ``ImageRecipe``.
Adding an image is one entry, never new build code.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.paths import templates_dir

log = logging.getLogger(__name__)

# Bump when the build procedure itself changes, so every stand-in is rebuilt.
RECIPE_FORMAT = "1"
ROOTFS_REPOSITORY = "setupbot/rootfs"

# The interpreter each Debian suite ships; the stand-in python:X-slim uses it.
# forky (testing) ships 3.14 as its python3; it is not among the default images.suites (one
# more debootstrap and two more builds per bootstrap): add it there to offer 3.14 offline.
# bullseye (3.9) is not among them either: `setupbot images bootstrap --python 3.9` builds it, for
# pins whose wheels stop at 3.9 (its pip and setuptools are too old to pass for the official
# image's, so newer wheels of both come from the index, through the host's pip: WHEELS).
SUITE_PYTHON = {"bullseye": "3.9", "bookworm": "3.11", "trixie": "3.13", "forky": "3.14"}
SUITE_NUMBER = {"bullseye": "11", "bookworm": "12", "trixie": "13"}
# the pip and setuptools a stand-in installs in place of its suite's own, where those are older
# than a Dockerfile may rely on (PEP 660 editable installs need pip 21.3 and setuptools 64):
# the releases bookworm's stand-in has, which still support Python 3.9
WHEELS = {"bullseye": ("pip==23.0.1", "setuptools==66.1.1")}
# suites whose Python's sysconfig names an install folder that is not on sys.path: bullseye's 3.9
# says /usr/lib/python3.9/site-packages (Debian made /usr/local/lib/.../dist-packages sysconfig's
# default only from 3.10), so a tool that installs where sysconfig says (Poetry with
# virtualenvs.create=false) installs what nothing imports. The stand-in puts that folder on
# sys.path, as the official image's one site-packages is.
SYSCONFIG_OFF_PATH = {"bullseye"}


@dataclass(frozen=True)
class ImageRecipe:
    tag: str  # official name, e.g. "python:3.13-slim"
    template: str  # Jinja Dockerfile under templates/ ("" = context's Dockerfile)
    base: str  # FROM: "setupbot/rootfs:<suite>" or another recipe's tag
    kind: str = "service"  # "debian" | "python" | "service"
    name: str = ""  # "3.13" for python, "postgres" for a service
    version: str = ""  # service version ("16"), informational
    variables: Mapping[str, Any] = field(default_factory=dict)  # passed to the template
    files: Mapping[str, str] = field(default_factory=dict)  # context file -> template path
    probe: tuple[str, ...] = ()  # argv that must exit 0 in the built image
    version_env: str = ""  # ENV set to the probe's last output line
    env: Mapping[str, str] = field(default_factory=dict)  # ENV added in the last layer
    aliases: tuple[str, ...] = ()  # further tags for the same image
    ports: tuple[int, ...] = ()  # services: ports it listens on
    context: str = ""  # directory under templates/ copied as the build
    # context; its plain Dockerfile gets BASE as a build arg
    wheels: tuple[str, ...] = ()  # requirements the host's pip downloads into the context's wheels/

    def template_variables(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {"base": self.base, **dict(self.variables), **dict(extra or {})}

    def recipe_hash(self, base_id: str, ca_fingerprint: str, extra: Mapping[str, Any] | None = None) -> str:
        """Changes when anything that shapes the image changes: the templates, the variables,
        the base image, the CA bundle, the build procedure."""
        root = templates_dir()
        payload = {
            "format": RECIPE_FORMAT,
            "tag": self.tag,
            "template": (root / self.template).read_text() if self.template else "",
            "context": {
                p.relative_to(root / self.context).as_posix(): p.read_text(errors="replace")
                for p in sorted((root / self.context).rglob("*"))
                if p.is_file()
            }
            if self.context
            else {},
            "finish": (root / "images" / "finish.Dockerfile.j2").read_text(),
            "files": {k: (root / v).read_text() for k, v in sorted(self.files.items())},
            "variables": self.template_variables(extra),
            "probe": list(self.probe),
            "version_env": self.version_env,
            "env": dict(self.env),
            **({"wheels": list(self.wheels)} if self.wheels else {}),
            "base_id": base_id,
            "ca": ca_fingerprint,
        }
        blob = json.dumps(payload, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:20]


def rootfs_tag(suite: str) -> str:
    return f"{ROOTFS_REPOSITORY}:{suite}"


def debian_recipe(suite: str) -> ImageRecipe:
    return ImageRecipe(
        tag=f"debian:{suite}-slim",
        template="images/debian.Dockerfile.j2",
        base=rootfs_tag(suite),
        kind="debian",
        name=suite,
        variables={"suite": suite},
        probe=("sh", "-c", "apt-get --version >/dev/null && cat /etc/debian_version"),
        aliases=((f"debian:{SUITE_NUMBER[suite]}-slim",) if suite in SUITE_NUMBER else ()),
    )


def python_recipe(version: str, suite: str) -> ImageRecipe:
    # The probe checks what a Dockerfile relies on; its last line is the full version.
    probe_script = (
        "set -e; for t in python python3 pip pip3; do command -v $t >/dev/null; done; "
        "! command -v gcc >/dev/null; ! command -v cc >/dev/null; "
        "python -m venv /tmp/probe-venv && /tmp/probe-venv/bin/python -m pip --version >/dev/null; "
        "rm -rf /tmp/probe-venv; "
        # where sysconfig says to install (Poetry, uv) is importable
        "python -c 'import sys, sysconfig; assert sysconfig.get_paths()[\"purelib\"] in sys.path'; "
        "python -c 'import ssl, sqlite3, ctypes, venv, ensurepip' 2>/dev/null || python -c 'import ssl, sqlite3, ctypes, venv'; "
        "python -c 'import platform; print(platform.python_version())'"
    )
    return ImageRecipe(
        tag=f"python:{version}-slim",
        template="images/python.Dockerfile.j2",
        base=f"debian:{suite}-slim",
        kind="python",
        name=version,
        variables={
            "python": version,
            "suite": suite,
            **({"wheels": True} if suite in WHEELS else {}),
            **({"sysconfig_site": True} if suite in SYSCONFIG_OFF_PATH else {}),
        },
        wheels=WHEELS.get(suite, ()),
        probe=("sh", "-c", probe_script),
        version_env="PYTHON_VERSION",
        aliases=(f"python:{version}-slim-{suite}",),
    )


def core_recipes(suites: tuple[str, ...] = ("bookworm", "trixie")) -> list[ImageRecipe]:
    out: list[ImageRecipe] = []
    for suite in suites:
        out.append(debian_recipe(suite))
        if suite in SUITE_PYTHON:
            out.append(python_recipe(SUITE_PYTHON[suite], suite))
    return out


def service_recipes() -> list[ImageRecipe]:
    """``SERVICE_RECIPES`` from bot/engine/service_recipes.py, when that module exists."""
    try:
        module = importlib.import_module("bot.engine.service_recipes")
    except ModuleNotFoundError as exc:
        if exc.name != "bot.engine.service_recipes":
            raise
        return []
    declared = getattr(module, "SERVICE_RECIPES", [])
    if isinstance(declared, Mapping):
        return [_service_recipe_from_mapping(name, entry) for name, entry in declared.items()]
    recipes = list(declared)
    for r in recipes:
        if not isinstance(r, ImageRecipe):
            raise TypeError(f"SERVICE_RECIPES must hold ImageRecipe objects, not {type(r).__name__}")
    return recipes


def _service_recipe_from_mapping(name: str, entry: Mapping[str, Any]) -> ImageRecipe:
    """The mapping form: {context, base, tags, kind[, ports]}; the context directory holds a
    plain Dockerfile that takes its base as the BASE build argument."""
    tags = list(entry["tags"])
    first = tags[0]
    version = first.split(":", 1)[1] if ":" in first else ""
    return ImageRecipe(
        tag=first,
        template="",
        base=entry["base"],
        kind="service",
        name=name,
        version=version,
        context=entry["context"],
        aliases=tuple(tags[1:]),
        ports=tuple(entry.get("ports", ())),
        probe=tuple(entry.get("probe", ())),
    )


def all_recipes(suites: tuple[str, ...] = ("bookworm", "trixie")) -> list[ImageRecipe]:
    return [*core_recipes(suites), *service_recipes()]
