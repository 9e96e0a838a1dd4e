"""Typed repair operations ("atoms").

An atom is the executable part of an experience unit and the only way a repair changes the
environment. The knowledge base stores atoms, the loop trials them in a runner container, and
a kept atom becomes a DepGraph change (bot.graph applies it) so the compiled Dockerfile
reproduces it. The working container is never the artifact.

Kinds and their arguments (all values are strings or lists of strings):

  apt_install      packages: [..]              Debian packages (e.g. libpq-dev)
  pip_install      packages: [..]              requirement specifiers (e.g. "psycopg2-binary<3")
  pip_constraint   constraints: [..]           pins applied to every pip install (e.g. "numpy<2")
  switch_python    version: "3.13"             change the runtime (new base image)
  set_env          name, value                 an environment variable for build and tests
  start_service    service: postgres|redis|mysql|mariadb|rabbitmq|..., env: {..} (optional)
  use_tool         tool: poetry|pdm|uv|hatch   install the project with that tool
  run              command: [argv..]           a command run at build time (argv list)
  install_extras   extras: [..]                install the project with these extras
  test_command     command: [argv..]           the target command to run the tests
  git_init         (none)                      give setuptools-scm a version (SETUPTOOLS_SCM_PRETEND_VERSION)
  install_deps_only (none)                     the repository is an application, not an installable
                                               package: install its dependencies only and run it
                                               from the checkout (Poetry's --no-root)
  drop_package     manager: apt|pip, packages  leave what the plan added out of the image (one side
                                               of a Debian conflict, a distribution that shadows
                                               the module a declared one provides)

``{python}`` and ``{match:N}`` placeholders in string arguments are filled from the context:
the chosen Python version and regex group N of the signal that matched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ATOM_KINDS: dict[str, tuple[str, ...]] = {
    "apt_install": ("packages",),
    "pip_install": ("packages",),
    "pip_constraint": ("constraints",),
    "switch_python": ("version",),
    "set_env": ("name", "value"),
    "start_service": ("service",),
    "use_tool": ("tool",),
    "run": ("command",),
    "install_extras": ("extras",),
    "test_command": ("command",),
    "git_init": (),
    "install_deps_only": (),
    "drop_package": ("manager", "packages"),
}

# Debian package names, pip requirement specifiers, env names: what an atom may carry.
# Anything else (shell metacharacters, newlines) is refused before it reaches a container.
_DEB_NAME = re.compile(r"^[a-z0-9][a-z0-9+.\-]{0,100}$")
_DEB_SPEC = re.compile(r"^[a-z0-9][a-z0-9+.\-]{0,100}(?:=[A-Za-z0-9.+~:\-]{1,100})?$")  # name or name=version
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,100}$")
_PIP_SPEC = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-\[\], <>=!~;*'\"]{0,200}$")
_VERSION = re.compile(r"^3\.\d{1,2}$")
_MATCH_REF = re.compile(r"^\{match:\d\}$")
_TOOLS = {"poetry", "pdm", "uv", "hatch", "pip"}


class AtomError(ValueError):
    """An atom that is malformed or not allowed."""


@dataclass(frozen=True)
class Atom:
    kind: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, **{k: v for k, v in self.args.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Atom:
        if not isinstance(data, Mapping) or "kind" not in data:
            raise AtomError(f"an atom needs a 'kind': {data!r}")
        atom = cls(str(data["kind"]), {k: v for k, v in data.items() if k != "kind"})
        atom.validate()
        return atom

    def describe(self) -> str:
        a = self.args
        match self.kind:
            case "apt_install" | "pip_install":
                return f"{self.kind} {' '.join(a['packages'])}"
            case "pip_constraint":
                return f"pip_constraint {' '.join(a['constraints'])}"
            case "set_env":
                return f"set_env {a['name']}={a['value']}"
            case "run" | "test_command":
                return f"{self.kind} {' '.join(a['command'])}"
            case "drop_package":
                return f"drop_package {a['manager']} {' '.join(a['packages'])}"
            case _:
                rest = " ".join(f"{k}={v}" for k, v in a.items())
                return f"{self.kind} {rest}".strip()

    def validate(self) -> None:
        """Raise AtomError unless the atom is well formed and within the allowed values."""
        if self.kind not in ATOM_KINDS:
            raise AtomError(f"unknown atom kind {self.kind!r}; known: {', '.join(ATOM_KINDS)}")
        for req in ATOM_KINDS[self.kind]:
            if req not in self.args:
                raise AtomError(f"atom {self.kind} needs '{req}'")
        a = self.args

        def str_list(key: str) -> list[str]:
            v = a[key]
            if not isinstance(v, (list, tuple)) or not v or not all(isinstance(x, str) for x in v):
                raise AtomError(f"atom {self.kind}: '{key}' must be a non-empty list of strings")
            return list(v)

        if self.kind == "apt_install":
            for p in str_list("packages"):
                if not _DEB_SPEC.match(p):
                    raise AtomError(f"apt_install: {p!r} is not a Debian package name")
        elif self.kind in ("pip_install", "pip_constraint", "install_extras"):
            key = {"pip_install": "packages", "pip_constraint": "constraints", "install_extras": "extras"}[self.kind]
            for p in str_list(key):
                if not _PIP_SPEC.match(p) or "{" in p.replace("{python}", "").replace("{match:", ""):
                    if not re.match(r"^\{match:\d\}$", p):
                        raise AtomError(f"{self.kind}: {p!r} is not a requirement specifier")
        elif self.kind == "switch_python":
            if not isinstance(a["version"], str) or not (_VERSION.match(a["version"]) or a["version"].startswith("{")):
                raise AtomError(f"switch_python: {a['version']!r} is not a Python version like 3.12")
        elif self.kind == "set_env":
            # a learned or generic unit may name the variable from its signal: {match:N}
            if not isinstance(a["name"], str) or not (_ENV_NAME.match(a["name"]) or _MATCH_REF.match(a["name"])):
                raise AtomError(f"set_env: {a['name']!r} is not an environment variable name")
            if not isinstance(a["value"], str) or "\n" in a["value"] or len(a["value"]) > 500:
                raise AtomError("set_env: the value must be one line of at most 500 characters")
        elif self.kind == "use_tool":
            if a["tool"] not in _TOOLS:
                raise AtomError(f"use_tool: {a['tool']!r} is not one of {sorted(_TOOLS)}")
        elif self.kind in ("run", "test_command"):
            for part in str_list("command"):
                if "\n" in part or "\x00" in part:
                    raise AtomError(f"{self.kind}: arguments must be single lines")
        elif self.kind == "drop_package":
            if a["manager"] not in ("apt", "pip"):
                raise AtomError(f"drop_package: manager {a['manager']!r} is not apt or pip")
            pattern = _DEB_NAME if a["manager"] == "apt" else re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,100}$")
            for p in str_list("packages"):
                if not pattern.match(p):
                    raise AtomError(f"drop_package: {p!r} is not a package name")
        elif self.kind == "start_service":
            if not isinstance(a["service"], str) or not _DEB_NAME.match(a["service"]):
                raise AtomError(f"start_service: {a['service']!r} is not a service name")

    def fill(self, context: Mapping[str, str]) -> Atom:
        """Replace {python} and {match:N} placeholders from ``context``."""

        def sub(v: Any) -> Any:
            if isinstance(v, str):
                for k, val in context.items():
                    v = v.replace("{" + k + "}", str(val))
                return v
            if isinstance(v, (list, tuple)):
                return [sub(x) for x in v]
            if isinstance(v, Mapping):
                return {k: sub(x) for k, x in v.items()}
            return v

        return Atom(self.kind, {k: sub(v) for k, v in self.args.items()})
