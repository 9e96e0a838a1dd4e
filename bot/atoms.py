"""Typed repair operations ("atoms").

An atom is the executable part of an experience unit and the only way a repair changes the
environment. The knowledge base stores atoms, the loop trials them in a runner container, and
a kept atom becomes a DepGraph change (bot.graph applies it) so the compiled Dockerfile
reproduces it. The working container is never the artifact.

Each kind is defined once, in ``ATOM_KINDS`` at the end of this module (arguments and their
check, description, in-container trial, graph change, what the outputs compile from it); its
graph change is ``bot.graph.apply.APPLY[kind]``. Kinds and their arguments (all values are
strings or lists of strings):

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
  install_project  name                        the tests read the project's own distribution metadata
                                               (importlib.metadata): install the project named, not
                                               only its dependencies (undoes install_deps_only)
  drop_package     manager: apt|pip, packages  leave what the plan added out of the image (one side
                                               of a Debian conflict, a distribution that shadows
                                               the module a declared one provides)
  build_without_isolation module               the project's build (setup.py) imports a module
                                               pip's isolated build environment lacks: install
                                               the project without build isolation, after the
                                               distribution that provides it, or with the checkout
                                               on PYTHONPATH when the checkout holds it
  compile_in_place sources: [..]               Cython modules of the checkout that nothing else
                                               compiles (their .pyx paths, relative): built next
                                               to their source with Cython's cythonize -i, in
                                               the image and again in the devcontainer

``{python}`` and ``{match:N}`` placeholders in string arguments are filled from the context:
the chosen Python version and regex group N of the signal that matched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.utils import canonicalize_name

# Debian package names, pip requirement specifiers, env names: what an atom may carry.
# Anything else (shell metacharacters, newlines) is refused before it reaches a container.
_DEB_NAME = re.compile(r"^[a-z0-9][a-z0-9+.\-]{0,100}$")
_DEB_SPEC = re.compile(r"^[a-z0-9][a-z0-9+.\-]{0,100}(?:=[A-Za-z0-9.+~:\-]{1,100})?$")  # name or name=version
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,100}$")
_PIP_SPEC = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-\[\], <>=!~;*'\"]{0,200}$")
_VERSION = re.compile(r"^3\.\d{1,2}$")
_MATCH_REF = re.compile(r"^\{match:\d\}$")
_CONTEXT_REF = re.compile(r"^\{[a-z_]+\}$")
_TOOLS = {"poetry", "pdm", "uv", "hatch", "pip"}
_DIST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,100}$")
# a Cython source of the checkout: identifiers joined by "/" (no "..", nothing absolute)
_PYX_PATH = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]{0,100}/){0,12}[A-Za-z_][A-Za-z0-9_]{0,100}\.pyx$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,100}(?:\.[A-Za-z_][A-Za-z0-9_]{0,100}){0,10}$")


def spec_name(spec: str) -> str:
    """The canonical distribution name of a requirement specifier ("Foo_Bar[x]>=1" -> foo-bar)."""
    return canonicalize_name(re.split(r"[<>=!~\[;@ ]", spec, maxsplit=1)[0])


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
        return ATOM_KINDS[self.kind].describe(self.args) if self.kind in ATOM_KINDS else self.kind

    @property
    def spec(self) -> AtomKind:
        return ATOM_KINDS[self.kind]

    def validate(self) -> None:
        """Raise AtomError unless the atom is well formed and within the allowed values."""
        if self.kind not in ATOM_KINDS:
            raise AtomError(f"unknown atom kind {self.kind!r}; known: {', '.join(ATOM_KINDS)}")
        kind = ATOM_KINDS[self.kind]
        for req in kind.required:
            if req not in self.args:
                raise AtomError(f"atom {self.kind} needs '{req}'")
        kind.check(self.kind, self.args)

    def trial_commands(self) -> list[list[str]]:
        """The argv lists that apply this atom in a running runner container (none for kinds
        that change the image or only the evaluation's environment)."""
        return ATOM_KINDS[self.kind].trial(self.args)

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


# --- the atom-kind registry ------------------------------------------------------------------
# Each kind of repair is defined once: its arguments and their check, how it reads in a report,
# whether and how it is trialled in a running container, and what it becomes in the DepGraph
# (``graph``: bot.graph.apply.APPLY holds the function) and so in the outputs (``compiles``:
# what bot.compile renders from that graph change). tests/unit/test_atom_kinds.py holds every
# kind to all of it.


def _str_list(kind: str, args: Mapping[str, Any], key: str) -> list[str]:
    v = args[key]
    if not isinstance(v, (list, tuple)) or not v or not all(isinstance(x, str) for x in v):
        raise AtomError(f"atom {kind}: '{key}' must be a non-empty list of strings")
    return list(v)


def _check_none(kind: str, a: Mapping[str, Any]) -> None:
    return None


def _check_project_name(kind: str, a: Mapping[str, Any]) -> None:
    # a unit names it from its signal: {match:N}
    if not isinstance(a["name"], str) or not (_DIST_NAME.match(a["name"]) or _MATCH_REF.match(a["name"])):
        raise AtomError(f"{kind}: {a['name']!r} is not a distribution name")


def _check_apt(kind: str, a: Mapping[str, Any]) -> None:
    for p in _str_list(kind, a, "packages"):
        if not _DEB_SPEC.match(p):
            raise AtomError(f"apt_install: {p!r} is not a Debian package name")


def _check_specs(key: str) -> Callable[[str, Mapping[str, Any]], None]:
    def check(kind: str, a: Mapping[str, Any]) -> None:
        for p in _str_list(kind, a, key):
            if not _PIP_SPEC.match(p) or "{" in p.replace("{python}", "").replace("{match:", ""):
                if not _MATCH_REF.match(p):
                    raise AtomError(f"{kind}: {p!r} is not a requirement specifier")

    return check


def _check_python(kind: str, a: Mapping[str, Any]) -> None:
    if not isinstance(a["version"], str) or not (_VERSION.match(a["version"]) or a["version"].startswith("{")):
        raise AtomError(f"switch_python: {a['version']!r} is not a Python version like 3.12")


def _check_env(kind: str, a: Mapping[str, Any]) -> None:
    # a learned or generic unit may name the variable from its signal: {match:N}
    if not isinstance(a["name"], str) or not (_ENV_NAME.match(a["name"]) or _MATCH_REF.match(a["name"])):
        raise AtomError(f"set_env: {a['name']!r} is not an environment variable name")
    if not isinstance(a["value"], str) or "\n" in a["value"] or len(a["value"]) > 500:
        raise AtomError("set_env: the value must be one line of at most 500 characters")


def _check_tool(kind: str, a: Mapping[str, Any]) -> None:
    if a["tool"] not in _TOOLS:
        raise AtomError(f"use_tool: {a['tool']!r} is not one of {sorted(_TOOLS)}")


def _check_command(kind: str, a: Mapping[str, Any]) -> None:
    for part in _str_list(kind, a, "command"):
        if "\n" in part or "\x00" in part:
            raise AtomError(f"{kind}: arguments must be single lines")


def _check_drop(kind: str, a: Mapping[str, Any]) -> None:
    if a["manager"] not in ("apt", "pip"):
        raise AtomError(f"drop_package: manager {a['manager']!r} is not apt or pip")
    pattern = _DEB_NAME if a["manager"] == "apt" else _DIST_NAME
    for p in _str_list(kind, a, "packages"):
        if not pattern.match(p):
            raise AtomError(f"drop_package: {p!r} is not a package name")


def _check_module(kind: str, a: Mapping[str, Any]) -> None:
    if not isinstance(a["module"], str) or not (_MODULE.match(a["module"]) or _MATCH_REF.match(a["module"])):
        raise AtomError(f"{kind}: {a['module']!r} is not a module name")


def _check_sources(kind: str, a: Mapping[str, Any]) -> None:
    for p in _str_list(kind, a, "sources"):
        if not _PYX_PATH.match(p):
            raise AtomError(f"{kind}: {p!r} is not a relative path of a .pyx file made of identifiers")


# Cython's own command line (the ``cythonize`` script), run as a module so no PATH is assumed:
# ``-i`` builds each extension next to its source, where the checkout's imports find it
CYTHONIZE = ["python", "-m", "Cython.Build.Cythonize", "-i"]


def cythonize_command(sources: list[str]) -> list[str]:
    return [*CYTHONIZE, *sources]


def _check_service(kind: str, a: Mapping[str, Any]) -> None:
    # a unit may name it from the context: {database}
    if not isinstance(a["service"], str) or not (_DEB_NAME.match(a["service"]) or _CONTEXT_REF.match(a["service"])):
        raise AtomError(f"start_service: {a['service']!r} is not a service name")


def _describe_plain(kind: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda a: f"{kind} {' '.join(f'{k}={v}' for k, v in a.items())}".strip()


def _no_trial(a: Mapping[str, Any]) -> list[list[str]]:
    return []


PIP_INSTALL = ["python", "-m", "pip", "install", "-q", "--disable-pip-version-check"]


@dataclass(frozen=True)
class AtomKind:
    name: str
    required: tuple[str, ...]
    check: Callable[[str, Mapping[str, Any]], None]
    describe: Callable[[Mapping[str, Any]], str]
    # trialled in the running runner container (snapshot/rollback); else by a rebuild
    in_container: bool
    trial: Callable[[Mapping[str, Any]], list[list[str]]]
    graph: str  # the DepGraph change (bot.graph.apply.APPLY[name] makes it)
    compiles: str  # what the outputs render from it ("Dockerfile: ..." / "not in the Dockerfile: ...")

    @property
    def in_dockerfile(self) -> bool:
        return self.compiles.startswith("Dockerfile")


ATOM_KINDS: dict[str, AtomKind] = {
    k.name: k
    for k in [
        AtomKind(
            "apt_install",
            ("packages",),
            _check_apt,
            lambda a: f"apt_install {' '.join(a['packages'])}",
            True,
            lambda a: [
                ["apt-get", "update", "-qq"],
                ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *a["packages"]],
            ],
            "SYSTEMLIB node per package, action apt, before every pip install",
            "Dockerfile: the apt-get install step",
        ),
        AtomKind(
            "pip_install",
            ("packages",),
            _check_specs("packages"),
            lambda a: f"pip_install {' '.join(a['packages'])}",
            True,
            lambda a: [[*PIP_INSTALL, *a["packages"]]],
            "PACKAGE node per specifier, action repair-pip (a declared one keeps action pip, new spec)",
            "Dockerfile: the pip install of repairs",
        ),
        AtomKind(
            "pip_constraint",
            ("constraints",),
            _check_specs("constraints"),
            lambda a: f"pip_constraint {' '.join(a['constraints'])}",
            True,
            lambda a: [[*PIP_INSTALL, *a["constraints"]]],
            "CONFIG node per pin, action constraint",
            "Dockerfile: the constraints file and PIP_CONSTRAINT",
        ),
        AtomKind(
            "switch_python",
            ("version",),
            _check_python,
            _describe_plain("switch_python"),
            False,
            _no_trial,
            "RUNTIME node: version and python:X.Y-slim base image",
            "Dockerfile: FROM",
        ),
        AtomKind(
            "set_env",
            ("name", "value"),
            _check_env,
            lambda a: f"set_env {a['name']}={a['value']}",
            True,
            _no_trial,  # the trial passes it to the evaluation's environment
            "CONFIG node, action env, a prerequisite of the target and the project",
            "Dockerfile: ENV (and the devcontainer's environment)",
        ),
        AtomKind(
            "start_service",
            ("service",),
            _check_service,
            _describe_plain("start_service"),
            False,
            _no_trial,
            "SERVICE node with image, ports and env, a prerequisite of the target",
            "not in the Dockerfile: compose.yaml and the devcontainer's runServices",
        ),
        AtomKind(
            "use_tool",
            ("tool",),
            _check_tool,
            _describe_plain("use_tool"),
            False,
            _no_trial,
            "the project node's install_with",
            "Dockerfile: the project install step runs that tool",
        ),
        AtomKind(
            "run",
            ("command",),
            _check_command,
            lambda a: f"run {' '.join(a['command'])}",
            True,
            lambda a: [list(a["command"])],
            "CONFIG node, action run, after the tools and before the project",
            "Dockerfile: a RUN step",
        ),
        AtomKind(
            "install_extras",
            ("extras",),
            _check_specs("extras"),
            _describe_plain("install_extras"),
            False,
            _no_trial,
            "the project node's extras",
            "Dockerfile: the project install step names the extras",
        ),
        AtomKind(
            "test_command",
            ("command",),
            _check_command,
            lambda a: f"test_command {' '.join(a['command'])}",
            True,
            _no_trial,  # the trial evaluates with it
            "TARGET node: command (marked command_from_repair: it wins over the configured one)",
            "Dockerfile: CMD (and the report's test command)",
        ),
        AtomKind(
            "git_init",
            (),
            _check_none,
            _describe_plain("git_init"),
            False,
            _no_trial,
            "set_env SETUPTOOLS_SCM_PRETEND_VERSION (a CONFIG env node)",
            "Dockerfile: ENV SETUPTOOLS_SCM_PRETEND_VERSION",
        ),
        AtomKind(
            "install_deps_only",
            (),
            _check_none,
            _describe_plain("install_deps_only"),
            False,
            _no_trial,
            "the project node's deps_only",
            "Dockerfile: the project's dependencies are installed, not the project",
        ),
        AtomKind(
            "install_project",
            ("name",),
            _check_project_name,
            lambda a: f"install_project {a['name']}",
            False,
            _no_trial,
            "the project node loses deps_only, when the name is the project's",
            "Dockerfile: the project is installed editable",
        ),
        AtomKind(
            "drop_package",
            ("manager", "packages"),
            _check_drop,
            lambda a: f"drop_package {a['manager']} {' '.join(a['packages'])}",
            False,
            _no_trial,
            "the named node loses its action (attrs.dropped = repair)",
            "Dockerfile: the package is no longer installed",
        ),
        AtomKind(
            "build_without_isolation",
            ("module",),
            _check_module,
            lambda a: f"build_without_isolation {a['module']}",
            False,
            _no_trial,
            "the project node's self_import (a module the checkout holds) or build_imports (with the "
            "PACKAGE node of the distribution that provides the module)",
            "Dockerfile: the project installs with --no-build-isolation (and the checkout on PYTHONPATH)",
        ),
        AtomKind(
            "compile_in_place",
            ("sources",),
            _check_sources,
            lambda a: f"compile_in_place {' '.join(a['sources'])}",
            True,
            lambda a: [cythonize_command(list(a["sources"]))],
            "CONFIG node, action run (in_checkout), after the project",
            "Dockerfile: a RUN step after the source (and the devcontainer's postCreateCommand)",
        ),
    ]
}
