"""What the evidence scanners find, as plain data. Every fact keeps the file and line it came
from, so the DepGraph and the report can say why a node exists."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from bot.evidence.reqparse import parse_spec


@dataclass(frozen=True)
class Source:
    """Where a fact was read: a path relative to the repository, a 1-based line when known."""

    file: str
    line: int | None = None
    detail: str = ""

    def short(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def to_json(self) -> list[Any]:
        return [self.file, self.line, self.detail]


@dataclass(frozen=True)
class TestCommand:
    """A command that runs the tests, where it was read, and how it is run: by a CI workflow
    (its own step, or a make/just recipe a step names), in which folder relative to the
    checkout ("" for the root), and whether it came from documentation, the weakest evidence.
    These are set by the scanners themselves, never read back out of ``source.detail``, whose
    text holds the repository's own names (a job's, a tox section's)."""

    argv: list[str]
    source: Source
    ci: bool = False
    cwd: str = ""
    docs: bool = False


@dataclass(frozen=True)
class ScanWarning:
    """A malformed or ignored input. The run goes on without it."""

    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "message": self.message}


# Requirement groups. "main" and "test" are installed; the rest are recorded only.
MAIN, TEST = "main", "test"


@dataclass
class Requirement:
    spec: str  # PEP 508 text as written (hashes and options removed)
    name: str  # canonical distribution name
    group: str  # main | test | extra:<name> | group:<name> | build | docs | other | conda
    source: Source
    optional: bool = False
    via_file: str | None = None  # a clean requirements file that can be installed with -r
    local: bool = False  # a path or "." line: the project itself or a sibling path
    hashed: bool = False  # its file pins with --hash: installed as it is, in its own step

    @property
    def installed(self) -> bool:
        return self.group in (MAIN, TEST) and not self.local


@dataclass
class PythonConstraint:
    """A statement about the Python version.

    kind: requires (hard: requires-python, python_requires, lock metadata),
          pin (.python-version, runtime.txt, Pipfile, environment.yml, an existing Dockerfile),
          tested (CI matrix, classifiers, tox envlist, nox sessions).
    For ``pin`` and ``tested`` the value is one version like "3.11"; for ``requires`` a
    specifier set like ">=3.9,<4".
    """

    kind: str
    value: str
    source: Source


@dataclass
class ImportUse:
    module: str  # top-level module name
    source: Source
    optional: bool = False  # under try/except ImportError, TYPE_CHECKING or importorskip
    in_tests: bool = False
    lazy: bool = False  # inside a function body
    full: str = ""  # the dotted name as written (for namespace packages)


@dataclass
class ServiceRequirement:
    name: str
    kind: str  # postgres | redis | mysql | mariadb | mongodb | rabbitmq | ... | other
    image: str
    ports: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    evidence: list[Source] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "image": self.image,
            "ports": list(self.ports),
            "env": dict(self.env),
            "evidence": [s.to_json() for s in self.evidence],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ServiceRequirement:
        return cls(
            d["name"],
            d["kind"],
            d["image"],
            list(d.get("ports", [])),
            dict(d.get("env", {})),
            [Source(*e) for e in d.get("evidence", [])],
        )


@dataclass
class Project:
    name: str | None = None
    name_source: Source | None = None
    installable: bool = False  # pyproject with a build system, setup.py or setup.cfg
    install_source: Source | None = None
    build_backend: str | None = None
    build_requires: list[str] = field(default_factory=list)
    scm_version: Source | None = None  # setuptools-scm, hatch-vcs, versioningit, ...
    scm_tool: str | None = None
    c_extensions: Source | None = None
    # setup.py imports a module of the checkout (its own package for __version__, versioneer.py):
    # a build backend that does not put the checkout on sys.path cannot run it
    self_import: Source | None = None
    # setup.py imports a distribution at module level (Cython, numpy, pybind11) to run: pip's
    # isolated build has only what [build-system] requires, so one not listed there is missing
    build_imports: list[tuple[str, Source]] = field(default_factory=list)
    manager: str | None = None  # poetry | pdm | uv | hatch | flit | setuptools | pipenv | conda
    # the project declares dependencies that cannot be read without running its build
    # (setup(install_requires=compute()), [project] dynamic dependencies no file gives): only
    # installing the project with its dependencies gets them all
    unread_dependencies: Source | None = None
    extras: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class LockFile:
    kind: str  # poetry | pdm | uv | pipenv
    file: str
    pins: dict[str, str] = field(default_factory=dict)  # canonical name -> version
    python: str | None = None
    # every locked version of each name (a lock may hold several, one per Python/platform)
    versions: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Evidence:
    repo: Path
    warnings: list[ScanWarning] = field(default_factory=list)
    requirements: list[Requirement] = field(default_factory=list)
    constraints: list[Requirement] = field(default_factory=list)  # -c files
    python: list[PythonConstraint] = field(default_factory=list)
    imports: list[ImportUse] = field(default_factory=list)
    local_modules: set[str] = field(default_factory=set)
    # what the checkout's root holds as importable modules (top-level *.py and packages): what
    # setup.py can import with the checkout on sys.path
    root_modules: set[str] = field(default_factory=set)
    # package folders whose test modules import a module beside them by its bare name (from utils
    # import x with tests/utils.py): pytest puts the first folder above without __init__.py on
    # sys.path, not this one, so the tests need it on the path; folder -> the first such import
    test_paths: dict[str, Source] = field(default_factory=dict)
    apt_packages: list[tuple[str, Source]] = field(default_factory=list)
    # Debian packages a README or docs page installs: often for another use of the project (a
    # desktop's keyring daemon, a docs build) than its tests
    docs_apt_packages: list[tuple[str, Source]] = field(default_factory=list)
    services: list[ServiceRequirement] = field(default_factory=list)
    env: dict[str, tuple[str, Source]] = field(default_factory=dict)
    test_commands: list[TestCommand] = field(default_factory=list)
    # make/just targets a CI step runs (`make local-test`): their recipes are read for test
    # commands whatever they are called
    ci_targets: list[tuple[str, Source]] = field(default_factory=list)
    test_extras: list[tuple[str, Source]] = field(default_factory=list)
    requirement_files: list[tuple[str, Source]] = field(default_factory=list)  # named by CI/tox/nox/docs
    # requirement files one factor of a tox test environment installs (sanic-latest: -r
    # requirements/sanic-latest.txt): a cell of a version matrix, not installed as a whole
    matrix_files: list[tuple[str, Source]] = field(default_factory=list)
    pytest_plugins: list[tuple[str, Source]] = field(default_factory=list)
    pytest_config: Source | None = None
    # the settings module a Django project's own runner names, when its tests do not use
    # pytest-django (bot.evidence.django): pytest's collection needs both
    django_settings: tuple[str, Source] | None = None
    project: Project = field(default_factory=Project)
    locks: list[LockFile] = field(default_factory=list)
    files_seen: list[str] = field(default_factory=list)
    # every file of the repository (RepoFiles.all_files: no link out of it): what a path on a
    # command line may name, checked without touching the filesystem again
    tree: frozenset[str] = frozenset()
    # workspaces and monorepos (bot.evidence.workspace): how they were found and the members
    workspace: str = ""
    members: list[Any] = field(default_factory=list)
    # the root's own test folder when the root is itself a package beside its members
    root_tests: Source | None = None
    # setupbot's own outputs met while scanning (path -> why), left out of the evidence
    generated: dict[str, str] = field(default_factory=dict)

    def warn(self, file: str, line: int | None, message: str) -> None:
        self.warnings.append(ScanWarning(file, line, message))

    def add_requirement(self, spec: str, group: str, source: Source, **kw: Any) -> Requirement | None:
        parsed = parse_spec(spec)
        if parsed is None:
            self.warn(source.file, source.line, f"cannot parse requirement {spec!r}; ignored")
            return None
        name, clean = parsed
        req = Requirement(clean, canonicalize_name(name), group, source, **kw)
        self.requirements.append(req)
        return req
