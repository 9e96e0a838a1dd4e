"""Repair candidates and how an atom is trialled in a runner container.

Candidates come first from the experience base (``Retriever.retrieve``); a small set of
deterministic rules adds the obvious ones (a pytest plugin named by its option, a header whose
Debian package is well known, a Python floor met by an available image) so the loop works on an
empty store too. The experience base stays the main source: its candidates are tried first, and
the rules only add what it did not already offer.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from bot import catalogue, safefs
from bot.atoms import Atom, AtomError, spec_name
from bot.debian import HEADER_PACKAGES, PKG_CONFIG_PACKAGES
from bot.evidence.django import named_settings, uses_pytest_django
from bot.evidence.shellcmd import commands, pip_install
from bot.evidence.yamlload import load_yaml
from bot.graph.alternatives import group_of
from bot.graph.mapping import repair_distribution
from bot.graph.runtime import series_allows
from bot.loop.diagnose import Signature, service_for


@dataclass
class Candidate:
    atoms: list[Atom]
    source: str  # knowledge | rule | llm | human
    unit_id: str | None = None
    score: float = 0.0
    why: str = ""
    exact: bool = True  # knowledge: the unit's signal matched (not only similar text)

    @property
    def in_container(self) -> bool:
        """Every atom can be trialled in the running runner (bot.atoms.ATOM_KINDS says which);
        the others change the image and are trialled by a rebuild."""
        return all(a.spec.in_container for a in self.atoms)

    def key(self) -> tuple:
        return tuple((a.kind, tuple(sorted((k, repr(v)) for k, v in a.args.items()))) for a in self.atoms)

    def describe(self) -> str:
        return "; ".join(a.describe() for a in self.atoms)

    def to_json(self) -> dict[str, Any]:
        return {
            "atoms": [a.to_json() for a in self.atoms],
            "source": self.source,
            "unit_id": self.unit_id,
            "score": round(self.score, 4),
            "why": self.why,
        }


# --- deterministic rules ------------------------------------------------------------------------

PYTEST_OPTION_PLUGINS = {
    "--cov": "pytest-cov",
    "--cov-report": "pytest-cov",
    "--cov-config": "pytest-cov",
    "--cov-fail-under": "pytest-cov",
    "--no-cov": "pytest-cov",
    "-n": "pytest-xdist",
    "--numprocesses": "pytest-xdist",
    "--dist": "pytest-xdist",
    "--timeout": "pytest-timeout",
    "--benchmark-skip": "pytest-benchmark",
    "--benchmark-disable": "pytest-benchmark",
    "--reruns": "pytest-rerunfailures",
    "--randomly-seed": "pytest-randomly",
    "-p": "",
    "--mypy": "pytest-mypy",
    "--flake8": "pytest-flake8",
    "--doctest-plus": "pytest-doctestplus",
    "--html": "pytest-html",
    "--ds": "pytest-django",
    "--reuse-db": "pytest-django",
    "--nomigrations": "pytest-django",
    "--asyncio-mode": "pytest-asyncio",
    "--mpl": "pytest-mpl",
    "--hypothesis-show-statistics": "hypothesis",
    "--snapshot-update": "syrupy",
    "--xdoctest": "xdoctest",
    "--black": "pytest-black",
    "--isort": "pytest-isort",
    "--ruff": "pytest-ruff",
    "--memray": "pytest-memray",
    "--remote-data": "pytest-remotedata",
    "--run-slow": "",
    "--env": "pytest-env",
}
PYTEST_INI_PLUGINS = {
    "asyncio_mode": "pytest-asyncio",
    "asyncio_default_fixture_loop_scope": "pytest-asyncio",
    "timeout": "pytest-timeout",
    "env": "pytest-env",
    "DJANGO_SETTINGS_MODULE": "pytest-django",
    "django_find_project": "pytest-django",
    "mock_use_standalone_module": "pytest-mock",
    "flake8-ignore": "pytest-flake8",
    "mypy_ignore_missing_imports": "pytest-mypy",
    "doctest_plus": "pytest-doctestplus",
    "mpl-results-path": "pytest-mpl",
    "log_cli": "",
    "required_plugins": "",
}
PYTEST_FIXTURE_PLUGINS = {
    "mocker": "pytest-mock",
    "class_mocker": "pytest-mock",
    "session_mocker": "pytest-mock",
    "benchmark": "pytest-benchmark",
    "httpserver": "pytest-httpserver",
    "requests_mock": "requests-mock",
    "freezer": "pytest-freezer",
    "event_loop": "pytest-asyncio",
    "aiohttp_client": "pytest-aiohttp",
    "qtbot": "pytest-qt",
    "subtests": "pytest-subtests",
    "snapshot": "syrupy",
    "respx_mock": "respx",
    "httpx_mock": "pytest-httpx",
    "datadir": "pytest-datadir",
    "shared_datadir": "pytest-datadir",
    "faker": "Faker",
    "xprocess": "pytest-xprocess",
    "db": "pytest-django",
    "rf": "pytest-django",
    "settings": "pytest-django",
    "client": "pytest-django",
    "anyio_backend": "anyio",
    "fs": "pyfakefs",
    "time_machine": "time-machine",
    "capsys_binary": "",
    "mock": "pytest-mock",
    "loop": "pytest-aiohttp",
    "responses": "pytest-responses",
    "aioresponses": "aioresponses",
    "celery_app": "celery",
    "redis_proc": "pytest-redis",
    "postgresql": "pytest-postgresql",
    "postgresql_proc": "pytest-postgresql",
}
PYTEST_MARKER_PLUGINS = {
    "asyncio": "pytest-asyncio",
    "django_db": "pytest-django",
    "timeout": "pytest-timeout",
    "benchmark": "pytest-benchmark",
    "flaky": "pytest-rerunfailures",
    "mpl_image_compare": "pytest-mpl",
    "vcr": "pytest-recording",
    "freeze_time": "pytest-freezer",
    "trio": "pytest-trio",
    "httpx_mock": "pytest-httpx",
    "order": "pytest-order",
    "dependency": "pytest-dependency",
    "remote_data": "pytest-remotedata",
}
SHARED_LIB_PACKAGES = {
    "libGL.so.1": "libgl1",
    "libgomp.so.1": "libgomp1",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
    "libSM.so.6": "libsm6",
    "libXext.so.6": "libxext6",
    "libXrender.so.1": "libxrender1",
    "libsndfile.so.1": "libsndfile1",
    "libpq.so.5": "libpq5",
    "libmagic.so.1": "libmagic1",
    "libyaml-0.so.2": "libyaml-0-2",
    "libgeos_c.so.1": "libgeos-c1v5",
    "libcairo.so.2": "libcairo2",
    "libportaudio.so.2": "libportaudio2",
    "libzbar.so.0": "libzbar0",
    "libEGL.so.1": "libegl1",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libxml2.so.2": "libxml2",
    "libxslt.so.1": "libxslt1.1",
    "libffi.so.8": "libffi8",
    "libjpeg.so.62": "libjpeg62-turbo",
    "libusb-1.0.so.0": "libusb-1.0-0",
    "libspatialindex_c.so": "libspatialindex-dev",
    "libgdal.so": "libgdal-dev",
    "libhdf5.so": "libhdf5-dev",
}
# GObject-introspection namespaces (gi.require_version) and the Debian packages with their typelibs
TYPELIB_PACKAGES = {
    "Gst": ["gir1.2-gstreamer-1.0", "gstreamer1.0-plugins-base"],
    "GstBase": ["gir1.2-gstreamer-1.0"],
    "GstPbutils": ["gir1.2-gst-plugins-base-1.0"],
    "GstAudio": ["gir1.2-gst-plugins-base-1.0"],
    "GstVideo": ["gir1.2-gst-plugins-base-1.0"],
    "GstApp": ["gir1.2-gst-plugins-base-1.0"],
    "GstTag": ["gir1.2-gst-plugins-base-1.0"],
    "GLib": ["gir1.2-glib-2.0"],
    "GObject": ["gir1.2-glib-2.0"],
    "Gio": ["gir1.2-glib-2.0"],
    "Gtk": ["gir1.2-gtk-3.0"],
    "Gdk": ["gir1.2-gtk-3.0"],
    "Pango": ["gir1.2-pango-1.0"],
    "GdkPixbuf": ["gir1.2-gdkpixbuf-2.0"],
    "Notify": ["gir1.2-notify-0.7"],
    "Soup": ["gir1.2-soup-3.0"],
    "Secret": ["gir1.2-secret-1"],
    "Rsvg": ["gir1.2-rsvg-2.0"],
    "Poppler": ["gir1.2-poppler-0.18"],
}
COMMAND_PACKAGES = {
    "git": ["git"],
    "pg_config": ["libpq-dev"],
    "mysql_config": ["default-libmysqlclient-dev", "pkg-config"],
    "swig": ["swig"],
    "gfortran": ["gfortran"],
    "java": ["default-jre-headless"],
    "node": ["nodejs"],
    "npm": ["npm"],
    "make": ["make"],
    "cmake": ["cmake"],
}
COMPILER_PACKAGES = {
    "gcc": ["gcc", "libc6-dev"],
    "cc": ["gcc", "libc6-dev"],
    "g++": ["g++"],
    "c++": ["g++"],
    "clang": ["clang"],
    "make": ["make"],
    "cmake": ["cmake"],
}


# Optional C extensions built only when a system library is present at build time: the
# import's Debian -dev packages (the build tools are added to every rebuild)
NATIVE_SUBMODULE_PACKAGES = {
    "yaml": ["libyaml-dev"],
    "lxml": ["libxml2-dev", "libxslt1-dev"],
    "ldap": ["libldap2-dev", "libsasl2-dev"],
    "M2Crypto": ["libssl-dev", "swig"],
    "pycurl": ["libcurl4-openssl-dev"],
    "zmq": ["libzmq3-dev"],
    "psycopg2": ["libpq-dev"],
    "MySQLdb": ["default-libmysqlclient-dev"],
    "gssapi": ["libkrb5-dev"],
    "kerberos": ["libkrb5-dev"],
    "magic": ["libmagic-dev"],
    "cairo": ["libcairo2-dev"],
    "xmlsec": ["libxmlsec1-dev", "libxml2-dev"],
    "snappy": ["libsnappy-dev"],
    "lz4": ["liblz4-dev"],
    "zstandard": ["libzstd-dev"],
    "gmpy2": ["libgmp-dev", "libmpfr-dev", "libmpc-dev"],
    "tables": ["libhdf5-dev"],
    "h5py": ["libhdf5-dev"],
    "shapely": ["libgeos-dev"],
    "pyproj": ["libproj-dev"],
    "smbus": ["libi2c-dev"],
    "usb": ["libusb-1.0-0-dev"],
    "Levenshtein": [],
    "msgpack": [],
    "ujson": [],
}
NATIVE_BUILD_TOOLS = ["gcc", "libc6-dev", "pkg-config"]


def distribution_for(module: str) -> str:
    """The PyPI distribution that provides ``module``: the graph's import table and its
    repair-only names (bot.graph.mapping.repair_distribution), else the module's own name."""
    return repair_distribution(module) or module.replace("_", "-")


def distributions_for(module: str) -> list[str]:
    """Distributions worth trying for ``module``, most likely first. Guessed prefixes
    (python-X, pyX) are left out on purpose: installing a guessed name from PyPI invites
    typosquats; the experience base or the LLM may propose them with a reason."""
    return [d for d in dict.fromkeys([distribution_for(module), module]) if d]


def next_python(spec: str, available: Sequence[str], current: str) -> str | None:
    """The lowest available Python that satisfies ``spec`` (a specifier like '>=3.12' or a bare
    version like '3.12' meaning "at least"), other than the current one. A version stands for
    its minor series, as in the planner's choice (bot.graph.runtime.choose_python)."""
    spec = spec.strip()
    if re.fullmatch(r"\d+\.\d+", spec):
        spec = f">={spec}"
    try:
        sset = SpecifierSet(spec)
    except InvalidSpecifier:
        return None
    for v in sorted(available, key=Version):
        if v != current and series_allows(sset, v):
            return v
    return None


def _env_value_from_repo(repo_env: Mapping[str, str], name: str) -> list[str]:
    """The value the repository's own non-secret configuration (``target.env`` of
    .github/setupbot.yml) gives ``name``. Values are never taken from other files: a value read
    from a file (a linked .env.example, a README) would become a set_env, the Dockerfile's ENV
    and a line of the report, which is how a host token once got out (SECURITY.md S13)."""
    value = repo_env.get(name)
    return [str(value)] if value is not None and str(value) else []


def _django_settings_modules(repo: Path) -> list[str]:
    found: list[str] = []
    # one iterative walk (safefs), not Path.glob("**"): that recurses, and a 1,100-level tree
    # ended in RecursionError
    skip = {"node_modules", "venv", ".venv", ".git"}
    files = safefs.glob_files(
        repo,
        lambda rel: re.search(r"(?:^|/)settings[^/]*\.py$|(?:^|/)settings/[^/]+\.py$", rel) is not None,
        skip_dirs=skip,
        limit=200,
    )
    for rel_text in files:
        rel = Path(rel_text)
        if rel.parent.name == "settings" and rel.name != "__init__.py" and len(found) < 40:
            found.append(".".join(rel.with_suffix("").parts))
        if re.fullmatch(r"settings[^/]*\.py", rel.name):
            if any(part.startswith(".") or part in ("node_modules", "venv", ".venv") for part in rel.parts):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts and parts[0] == "src":
                parts = parts[1:]
            found.append(".".join(parts))
    # what the repository names first, then test settings: they are what the tests expect
    guessed = sorted(dict.fromkeys(found), key=lambda m: (0 if "test" in m else 1, len(m)))
    return list(dict.fromkeys([module for module, _ in named_settings(repo)] + guessed))


def _django_runner(repo: Path) -> bool:
    """The repository declares Django's own test runner: a manage.py that runs Django."""
    text = safefs.try_read_text(repo, "manage.py", max_bytes=200_000)
    return text is not None and "django" in text


# a file that pytest's or unittest's default discovery could collect: test*.py, *_test.py, or
# any module in a tests/, test/ or testing/ folder
_TEST_FILE = re.compile(r"(?:^|/)(?:test[^/]*|[^/]*_test)\.py$|(?:^|/)(?:tests?|testing)/(?:[^/]+/)*[^/]+\.py$")


def has_test_files(repo: Path) -> bool:
    """Whether the checkout holds any file a test runner's default discovery could collect (one
    bounded walk through the safe reader; vendored trees are skipped)."""
    skip = {"node_modules", "venv", ".venv", ".git", "site-packages"}
    return bool(safefs.glob_files(repo, lambda rel: _TEST_FILE.search(rel) is not None, skip_dirs=skip, limit=1))


def repo_context(repo: Path) -> dict[str, str]:
    """What the experience base's units may be conditioned on, read from the repository:
    ``framework`` (django, when manage.py runs Django); ``test_files`` ("none" when the checkout
    holds no file a runner's discovery could collect: then no other test command finds tests).
    Not ``settings_module``: the unit it fills sets the variable alone, and the django_settings
    rule adds pytest-django with it."""
    context = {"framework": "django"} if _django_runner(repo) else {}
    if not has_test_files(repo):
        context["test_files"] = "none"
    return context


def find_test_dirs(repo: Path) -> list[str]:
    return [
        d for d in ("tests", "test", "src/tests", "testing") if (repo / d).is_dir() and safefs.inside(repo, repo / d)
    ]


@dataclass(frozen=True)
class RuleContext:
    """What a rule may consult besides the signature."""

    repo: Path
    python: str
    available_pythons: Sequence[str]
    repo_env: Mapping[str, str]  # the repository's own non-secret config (target.env)
    specs: Mapping[str, str]  # the plan's requirement per distribution (canonical name)


Rule = Callable[[Signature, RuleContext], list[Candidate]]
# signature kind -> the rule that repairs it: every deterministic "failure -> fix" in one shape
RULES: dict[str, Rule] = {}


def rule(*kinds: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for kind in kinds:
            RULES[kind] = fn
        return fn

    return register


def _one(kind: str, why: str, **args: Any) -> Candidate:
    return Candidate([Atom(kind, args)], "rule", why=why)


def _from_table(atom: str, table: Mapping[str, Any], why: str) -> Rule:
    """A rule that looks the signature's key up in ``table`` (a package name or a list)."""

    def look_up(sig: Signature, ctx: RuleContext) -> list[Candidate]:
        found = table.get(sig.key)
        if not found:
            return []
        packages = found if isinstance(found, list) else [found]
        return [_one(atom, why.format(key=sig.key, found=packages[0]), packages=packages)]

    return look_up


_NO_MODULE_NAMED = re.compile(r"No module named '?([A-Za-z_][\w.]*)")
# a Cython source asks for C++ with this directive at its head ("# distutils: language = c++")
_CPP_DIRECTIVE = re.compile(r"^#\s*distutils\s*:\s*language\s*=\s*c\+\+", re.MULTILINE)


def checkout_cython_source(repo: Path, module: str) -> str | None:
    """The checkout's ``.pyx`` source of a dotted module (``a.b.c`` -> ``a/b/c.pyx``, or under
    ``src/``), when the module is a submodule the checkout keeps only as Cython source; else None.
    Read through the one safe reader: a link out of the repository is not followed."""
    parts = module.split(".")
    if len(parts) < 2 or not all(p.isidentifier() for p in parts):
        return None
    for base in ("", "src/"):
        rel = base + "/".join(parts) + ".pyx"
        if safefs.is_file(repo, rel):
            return rel
    return None


def _compile_cython(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    """A submodule of the checkout that exists only as a Cython ``.pyx`` (no build step of the
    project compiles it): compile it in place, with the compiler and Cython it needs."""
    m = _NO_MODULE_NAMED.search(sig.message)
    source = checkout_cython_source(ctx.repo, m.group(1)) if m else None
    if source is None:
        return []
    head = safefs.try_read_text(ctx.repo, source, max_bytes=4096, head=True) or ""
    compilers = ["g++"] if _CPP_DIRECTIVE.search(head) else ["gcc"]
    # cythonize builds through distutils, which Python 3.12 dropped: setuptools provides it
    tools = ["Cython" + ctx.specs.get("cython", ""), "setuptools" + ctx.specs.get("setuptools", "")]
    return [
        Candidate(
            [
                Atom("apt_install", {"packages": compilers}),
                Atom("pip_install", {"packages": tools}),
                Atom("compile_in_place", {"sources": [source]}),
            ],
            "rule",
            why=f"{m.group(1) if m else source} is a Cython module of the checkout ({source}) that nothing compiles",
        )
    ]


@rule("missing_module", "no_test_runner")
def _install_module(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    if sig.kind == "missing_module":
        compiled = _compile_cython(sig, ctx)
        if compiled:
            return compiled
    return [
        _one("pip_install", f"import {sig.key} is provided by {dist}", packages=[dist])
        for dist in distributions_for(sig.key)
    ]


# NumPy 1.24 is the last release whose comparison of an array with a string gives the scalar
# False; it has wheels up to Python 3.11
_NUMPY_SCALAR_COMPARISON = ("numpy<1.25", "3.11")


@rule("numpy_string_comparison")
def _numpy_before_the_comparison_change(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    pin, newest = _NUMPY_SCALAR_COMPARISON
    why = (
        "the code tests the result of comparing an array with a string, which NumPy 1.25 made an "
        "array of booleans; NumPy 1.24 gives the scalar the code expects"
    )
    if Version(ctx.python) <= Version(newest):
        return [_one("pip_constraint", why, constraints=[pin])]
    offered = [v for v in ctx.available_pythons if Version(v) <= Version(newest)]
    if not offered:
        return []
    v = max(offered, key=Version)
    return [
        Candidate(
            [Atom("switch_python", {"version": v}), Atom("pip_constraint", {"constraints": [pin]})],
            "rule",
            why=f"{why}; it has wheels up to Python {newest}, and {v} is offered",
        )
    ]


@rule("import_name_error", "module_attribute")
def _install_the_right_distribution(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    dist = distribution_for(sig.key)
    if dist and dist.lower() != sig.key.lower():
        return [_one("pip_install", f"{sig.key} comes from {dist}; another distribution shadows it", packages=[dist])]
    return []


@rule("pytest_plugin_arg")
def _pytest_option_plugin(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    k = sig.key
    plugin = PYTEST_OPTION_PLUGINS.get(k) or next(
        (p for opt, p in PYTEST_OPTION_PLUGINS.items() if p and k.startswith(opt + "-")), ""
    )
    return [_one("pip_install", f"pytest option {k} comes from {plugin}", packages=[plugin])] if plugin else []


RULES["pytest_plugin_ini"] = _from_table("pip_install", PYTEST_INI_PLUGINS, "ini option {key} comes from {found}")
RULES["pytest_missing_fixture"] = _from_table("pip_install", PYTEST_FIXTURE_PLUGINS, "fixture {key} comes from {found}")
RULES["pytest_unknown_marker"] = _from_table("pip_install", PYTEST_MARKER_PLUGINS, "marker {key} comes from {found}")
RULES["missing_shared_lib"] = _from_table("apt_install", SHARED_LIB_PACKAGES, "{key} is in Debian's {found}")
RULES["missing_command"] = _from_table("apt_install", COMMAND_PACKAGES, "{key} is not installed")


@rule("pytest_async_unsupported")
def _async_tests(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    return [
        _one("pip_install", "async tests need pytest-asyncio", packages=["pytest-asyncio"]),
        _one("pip_install", "async tests under anyio", packages=["anyio"]),
    ]


@rule("pytest_config_tables")
def _pytest_before_native_tables(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    why = "pytest 9 refuses [tool.pytest] beside [tool.pytest.ini_options]; releases before it read only the latter"
    return [_one("pip_constraint", why, constraints=["pytest<9"])]


@rule("python_pin")
def _python_for_a_pin(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    # a pinned release that installs only on another Python: the offered one that fits
    chosen = next_python(sig.key, ctx.available_pythons, ctx.python)
    return (
        [_one("switch_python", f"{sig.message.split(':')[0]}; {chosen} is offered", version=chosen)] if chosen else []
    )


@rule("no_matching_distribution")
def _older_python_for_an_old_pin(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    # an old pin may only have releases for older Pythons: the offered ones below this one,
    # newest first (pip did not say which Python the release needs)
    if "==" not in sig.key:
        return []
    return _older_pythons(ctx, f"{sig.key} may only have releases for older Pythons")


@rule("constraint_conflict")
def _exclude_the_conflicting_pin(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    # the exact pin pip cannot install beside its dependents gives way to a range that leaves
    # out only that release (a range drops the exact pins it excludes), so pip picks another
    name, _, version = sig.key.partition("==")
    why = (
        f"pip cannot meet the constraint {sig.key} beside what depends on {name} (a release whose "
        f"Requires-Python excludes Python {ctx.python} is one cause: uv's resolution ignores that bound); "
        f"the constraint now leaves out only {version}"
    )
    return [_one("pip_constraint", why, constraints=[f"{name}!={version}"])] if name and version else []


@rule("locked_build_failed")
def _older_python_for_a_locked_sdist(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    # the lock pins a release that had to be built from source here: its wheels are most likely
    # for the Pythons of its day
    return _older_pythons(ctx, f"the lock pins {sig.key}, which has no wheel for Python {ctx.python} here")


def _older_pythons(ctx: RuleContext, why: str) -> list[Candidate]:
    """``switch_python`` to each offered Python below the current one, newest first."""
    older = sorted((v for v in ctx.available_pythons if Version(v) < Version(ctx.python)), key=Version, reverse=True)
    return [_one("switch_python", f"{why}; {v} is offered", version=v) for v in older]


@rule("not_a_package")
def _deps_only(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    return [
        _one(
            "install_deps_only",
            "the project is an application, not an installable package: "
            "install its dependencies and run it from the checkout",
        )
    ]


@rule("apt_conflict")
def _one_side_of_a_conflict(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    first, _, second = sig.key.partition("|")
    group = group_of(first) or group_of(second) or ()
    # keep the preferred side of a known group; else the one apt named first
    order = (
        [second, first]
        if group and second in group and first in group and group.index(second) < group.index(first)
        else [first, second]
    )
    return [
        _one("drop_package", f"{first} and {second} exclude each other; keep {keep}", manager="apt", packages=[drop])
        for keep, drop in (order, order[::-1])
    ]


@rule("unknown_apt_package")
def _a_package_this_debian_has_not(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    """apt has no candidate for a package the plan asks for (the repository's own Dockerfile or
    docs name it for an older Debian): install what took its place, or leave it out."""
    from bot.debian import successors

    package = sig.key
    instead = successors(package)
    out: list[Candidate] = []
    if instead:
        drop, add = (
            Atom("drop_package", {"manager": "apt", "packages": [package]}),
            Atom("apt_install", {"packages": instead}),
        )
        out.append(
            Candidate(
                [drop, add],
                "rule",
                why=f"this Debian has no {package}; {', '.join(instead)} took its place",
            )
        )
    out.append(_one("drop_package", f"this Debian has no {package}: leave it out", manager="apt", packages=[package]))
    return out


@rule("missing_native_submodule")
def _rebuild_with_the_extension(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    from packaging.utils import canonicalize_name

    dist = distribution_for(sig.key)
    libs = NATIVE_SUBMODULE_PACKAGES.get(sig.key, [])
    spec = ctx.specs.get(canonicalize_name(dist), dist)
    rebuild = [
        "python",
        "-m",
        "pip",
        "install",
        "--no-cache-dir",
        "--force-reinstall",
        "--no-deps",
        "--no-binary",
        dist,
        spec,
    ]
    why = f"{dist} is installed but was built without its optional extension"
    out = []
    if libs:
        out.append(
            Candidate(
                [Atom("apt_install", {"packages": [*libs, *NATIVE_BUILD_TOOLS]}), Atom("run", {"command": rebuild})],
                "rule",
                why=f"{why}: rebuild it from source against {', '.join(libs)}",
            )
        )
    out.append(
        Candidate(
            [Atom("apt_install", {"packages": [*NATIVE_BUILD_TOOLS, "swig"]}), Atom("run", {"command": rebuild})],
            "rule",
            why=f"{why}: rebuild it from source with a compiler",
        )
    )
    return out


@rule("python_floor", "newer_syntax")
def _newer_python(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    spec = sig.key if sig.kind == "python_floor" else f">{ctx.python}"
    chosen = next_python(spec, ctx.available_pythons, ctx.python)
    return [_one("switch_python", f"needs Python {spec}; {chosen} is available", version=chosen)] if chosen else []


@rule("missing_header")
def _header_package(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    k = sig.key
    pkg = HEADER_PACKAGES.get(k) or HEADER_PACKAGES.get(k.split("/")[-1])
    return [_one("apt_install", f"{k} is in Debian's {pkg}", packages=[pkg, "gcc", "libc6-dev"])] if pkg else []


@rule("missing_compiler")
def _compiler(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    return [
        _one(
            "apt_install", f"{sig.key} is not installed", packages=COMPILER_PACKAGES.get(sig.key, ["gcc", "libc6-dev"])
        )
    ]


@rule("missing_pkg_config")
def _pkg_config(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    return [_one("apt_install", "pkg-config is not installed", packages=["pkg-config"])]


@rule("missing_pkg_config_module")
def _pkg_config_module(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    k = sig.key
    pkg = PKG_CONFIG_PACKAGES.get(k) or (f"lib{k.removeprefix('lib')}-dev" if re.match(r"^[a-z0-9.+\-]+$", k) else "")
    return [_one("apt_install", f"pkg-config module {k}", packages=[pkg, "pkg-config"])] if pkg else []


@rule("missing_typelib")
def _typelib(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    k = sig.key
    if k not in TYPELIB_PACKAGES:
        return []
    return [
        _one("apt_install", f"the {k} typelib is in Debian's {TYPELIB_PACKAGES[k][0]}", packages=TYPELIB_PACKAGES[k])
    ]


@rule("missing_rust")
def _rust(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    # Debian's -web pair: the newest toolchain every suite ships (bookworm 1.85 or 1.96, trixie
    # 1.96; the plain rustc is 1.63 on bookworm), since what compiles here is a crates.io
    # dependency's sdist, and crates raise their MSRV with their releases. The pair conflicts
    # with the plain rustc/cargo, which a maturin plan never has alongside (bot.ecosystems.rust.pyrust).
    return [
        _one(
            "apt_install",
            "the build needs a Rust toolchain: Debian's newest (rustc-web, cargo-web)",
            packages=["rustc-web", "cargo-web"],
        )
    ]


@rule("plugin_hook_mismatch")
def _align_the_plugin(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    # the plugin's newest release follows pytest's current hooks; the era pins (bot.loop.era)
    # align the plugin and pytest with the repository's date instead
    dist = distribution_for(sig.key)
    return [
        _one(
            "pip_install",
            f"{dist} implements a hook this pytest does not know: its newest release follows pytest's hooks",
            packages=[dist],
        )
    ]


@rule("missing_distribution")
def _install_the_distribution(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    # the project's own name: install the project (the loop drops this candidate for another
    # name); else the distribution the code reads the metadata of
    return [
        _one(
            "install_project",
            f"the tests read the metadata of {sig.key}: install the project, not only its dependencies",
            name=sig.key,
        ),
        _one(
            "pip_install",
            f"the code reads the metadata of {sig.key}, which nothing installed carries",
            packages=[sig.key],
        ),
    ]


@rule("rust_too_old")
def _newer_rust(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    # the plain pair is 1.63 on bookworm; the -web pair (1.85, 1.96 with bookworm-security;
    # trixie 1.96) conflicts with it, so it replaces it
    return [
        Candidate(
            [
                Atom("drop_package", {"manager": "apt", "packages": ["rustc", "cargo"]}),
                Atom("apt_install", {"packages": ["rustc-web", "cargo-web"]}),
            ],
            "rule",
            why=f"a crate needs rustc {sig.key or 'newer'}; Debian's newer toolchain (rustc-web, cargo-web) "
            "replaces the plain rustc and cargo",
        )
    ]


@rule("missing_extra")
def _extra(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    return [_one("install_extras", f"the extra {sig.key} is not installed", extras=[sig.key])]


@rule("connection_refused", "unknown_service_host")
def _service(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    service = service_for(sig)
    return [_one("start_service", f"the tests talk to {service}", service=service)] if service else []


@rule("scm_version")
def _scm_version(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    return [
        _one("set_env", "no git metadata in the build context", name="SETUPTOOLS_SCM_PRETEND_VERSION", value="0.0.0")
    ]


@rule("django_settings")
def _django_settings(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    out = []
    # a Django project that does not use pytest-django: the runner it declares
    if _django_runner(ctx.repo) and not uses_pytest_django(ctx.repo):
        out.append(
            _one(
                "test_command",
                "a Django project without pytest-django: its tests run under manage.py test",
                command=["python", "manage.py", "test"],
            )
        )
    # pytest only sets Django up (django.setup()) through pytest-django; the variable alone
    # leaves "Apps aren't loaded yet"
    for module in _django_settings_modules(ctx.repo)[:3]:
        out.append(
            Candidate(
                [
                    Atom("pip_install", {"packages": ["pytest-django"]}),
                    Atom("set_env", {"name": "DJANGO_SETTINGS_MODULE", "value": module}),
                ],
                "rule",
                why=f"Django tests under pytest need pytest-django and the settings module {module}",
            )
        )
    return out


def _service_that_sets(name: str, ctx: RuleContext) -> list[Candidate]:
    """A catalogue service whose wiring sets ``name`` (DATABASE_URL, REDIS_URL, ...) and whose
    client library the plan installs (psycopg2-binary, redis): starting it gives the variable a
    value that points at a real server, where a placeholder would fail to connect or parse."""
    modules = [re.sub(r"[-_]binary$", "", d).replace("-", "_") for d in ctx.specs]
    out = []
    for kind, clients in sorted(catalogue.kinds_for_imports(modules).items()):
        if name in catalogue.wiring_env(kind, "service", "1", {}):
            why = f"{name} is unset, the {kind} service's wiring sets it, and the plan installs {clients[0]}"
            out.append(_one("start_service", why, service=kind))
    return out


@rule("missing_env")
def _env_value(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    k = sig.key
    values = _env_value_from_repo(ctx.repo_env, k)
    if not values:
        placeholder = _one("set_env", f"{k} is read by the tests; no value is documented", name=k, value="test")
        return [*_service_that_sets(k, ctx), placeholder]
    return [_one("set_env", f"the repository's target.env sets {k}", name=k, value=value) for value in values[:2]]


@rule("no_tests_collected", "path_not_found")
def _where_the_tests_are(sig: Signature, ctx: RuleContext) -> list[Candidate]:
    out = []
    if _django_runner(ctx.repo):
        out.append(
            _one(
                "test_command",
                "a Django project: its tests run under manage.py test",
                command=["python", "manage.py", "test"],
            )
        )
    for d in find_test_dirs(ctx.repo):
        out.append(_one("test_command", f"tests live in {d}/", command=["python", "-m", "pytest", d]))
    return out


def _valid(cand: Candidate) -> bool:
    try:
        for a in cand.atoms:
            a.validate()
    except AtomError:
        return False
    return True


def rule_candidates(
    sig: Signature,
    *,
    repo: Path,
    python: str,
    available_pythons: Sequence[str],
    repo_env: Mapping[str, str] | None = None,
    specs: Mapping[str, str] | None = None,
) -> list[Candidate]:
    """The obvious fixes for a signature, without the experience base (``RULES``). ``repo_env``:
    the repository's own non-secret config (target.env); ``specs``: the plan's requirement for
    each distribution (canonical name -> specifier), so a rebuild keeps the release the plan chose."""
    found = RULES.get(sig.kind)
    if found is None:
        return []
    ctx = RuleContext(repo, python, available_pythons, repo_env or {}, specs or {})
    return [c for c in found(sig, ctx) if _valid(c)]


# --- generic strategies: when no rule or unit repairs the failure ---------------------------------


def _workflow_run_blocks(repo: Path) -> list[str]:
    """The ``run:`` scripts of the repository's workflows (the first ten files), read through
    the one safe reader: a link out of the repository is not followed."""
    from types import SimpleNamespace

    blocks: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "run" and isinstance(value, str):
                    blocks.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    sink: Any = SimpleNamespace(warn=lambda *a, **k: None)
    folder = repo / ".github" / "workflows"
    try:
        names = os.listdir(folder) if safefs.inside(repo, folder) and folder.is_dir() else []
    except OSError:
        names = []
    workflows = [f".github/workflows/{n}" for n in names if re.fullmatch(r"[^/]+\.ya?ml", n)]
    for rel in sorted(workflows)[:10]:
        text = safefs.try_read_text(repo, rel, max_bytes=1_000_000)
        try:
            if text is not None:
                walk(load_yaml(sink, rel.rsplit("/", 1)[-1], text))
        except (TypeError, AttributeError):
            continue
    return blocks


def ci_install_specs(repo: Path) -> list[str]:
    """The distributions the repository's own CI, tox and nox install by name
    (``pip install X Y``, tox ``deps``, nox ``session.install("X")``), in the order found.
    Only requirement specifiers are kept: no options, URLs, paths or shell expansions."""
    found: list[str] = []

    def keep(spec: str) -> None:
        spec = spec.strip().strip("'\"")
        if spec.lower() in ("pip", "setuptools", "wheel"):
            return  # upgrading the installer is not a dependency
        if spec and not spec.startswith(("-", ".", "/", "$", "{")) and "://" not in spec and spec not in found:
            try:
                Atom("pip_install", {"packages": [spec]}).validate()
            except AtomError:
                return
            found.append(spec)

    def shell(text: str) -> None:
        for cmd in commands(text):
            for spec in (pip_install(cmd) or {}).get("packages", []):
                keep(spec)

    for block in _workflow_run_blocks(repo):
        shell(block)
    tox = safefs.try_read_text(repo, "tox.ini", max_bytes=1_000_000)
    if tox is not None:
        for block in re.findall(r"^deps\s*=([^\n]*(?:\n[ \t]+[^\n]*)*)", tox, re.M):
            for line in block.splitlines():
                keep(line.split("#")[0].split(":", 1)[-1] if re.match(r"\s*[\w,-]+:\s", line) else line.split("#")[0])
        for cmd in re.findall(r"^\s*(?:commands_pre|commands)\s*=([^\n]*(?:\n[ \t]+[^\n]*)*)", tox, re.M):
            shell(cmd)
    nox = safefs.try_read_text(repo, "noxfile.py", max_bytes=1_000_000)
    if nox is not None:
        for args in re.findall(r"session\.install\(([^)]*)\)", nox):
            for spec in re.findall(r"[\"']([^\"']+)[\"']", args):
                keep(spec)
    return found


# the step a build failed in: the classic builder names its command, BuildKit's plain log heads
# each step with it (the last one before the failure is the one that failed)
_FAILED_COMMAND = re.compile(r"The command '/bin/sh -c (?P<cmd>.*?)' returned a non-zero code")
_BUILDKIT_STEP = re.compile(r"^\[[^\]]*\d+/\d+\] RUN (?P<cmd>.*)$", re.M)
# pip installing the checkout itself: -e . / -e '.[test]' / plain . (with or without extras)
_PROJECT_INSTALL = re.compile(r"\bpip install\b[^&;|]*?\s(?:-e\s+)?['\"]?\.(?:\[[^\]]*\])?['\"]?(?:\s|$)")


def project_install_failed(log: str) -> bool:
    """Whether the build failed in the step that installs the project itself from the checkout."""
    failed = [m.group("cmd") for m in _FAILED_COMMAND.finditer(log)]
    if not failed:
        failed = [m.group("cmd") for m in _BUILDKIT_STEP.finditer(log)][-1:]
    return bool(failed) and bool(_PROJECT_INSTALL.search(" ".join(failed[-1].split()) + " "))


def generic_candidates(repo: Path, graph: Any, log: str = "") -> list[tuple[str, Candidate]]:
    """Strategies for a failure no rule or unit repairs, each named: when the project's own
    install step failed, install its dependencies only and run it from the checkout (what an
    application's CI does); install what the repository's own CI installs; leave out what the
    static plan only guessed (system packages from the distribution table, distributions guessed
    from imports, extras that are not for the tests), one group at a time."""
    out: list[tuple[str, Candidate]] = []
    project = next((n for n in graph.of_type("PACKAGE") if n.action == "project" and not n.attrs.get("member")), None)
    if project is not None and not project.attrs.get("deps_only") and project_install_failed(log):
        out.append(
            (
                "install the dependencies only and run from the checkout",
                Candidate(
                    [Atom("install_deps_only", {})],
                    "rule",
                    why="the project's own install step failed with no classified cause; its "
                    "dependencies install without it, and the tests run from the checkout",
                ),
            )
        )
    ci = _ci_specs_not_planned(repo, graph)
    if ci:
        out.append(
            (
                "follow the CI's install commands",
                Candidate(
                    [Atom("pip_install", {"packages": ci})],
                    "rule",
                    why="the repository's CI, tox or nox installs these by name",
                ),
            )
        )
    for name, manager, packages, why in _guessed_groups(graph):
        if packages:
            drop = Atom("drop_package", {"manager": manager, "packages": packages})
            out.append((name, Candidate([drop], "rule", why=why)))
    return [(name, cand) for name, cand in out if _valid(cand)]


def _ci_specs_not_planned(repo: Path, graph: Any) -> list[str]:
    """What the repository's CI, tox or nox installs by name that the plan does not install."""
    from packaging.utils import canonicalize_name

    have = {canonicalize_name(n.name) for n in graph.of_type("PACKAGE") + graph.of_type("TOOL") if n.action}
    return [s for s in ci_install_specs(repo) if spec_name(s) not in have]


def _guessed_groups(graph: Any) -> list[tuple[str, str, list[str], str]]:
    """The groups the static plan only guessed, in the order they are tried: (strategy name,
    package manager, packages, why). A group may be empty."""
    guessed_apt = sorted(
        n.name
        for n in graph.of_type("SYSTEMLIB")
        if n.action == "apt" and n.evidence and all(e[0] == "bot/graph/data/system_packages.json" for e in n.evidence)
    )
    guessed_pip = sorted(
        n.name for n in graph.of_type("PACKAGE") if n.action == "pip" and n.attrs.get("source") == "import"
    )
    optional = sorted(
        n.name
        for n in graph.of_type("PACKAGE")
        if n.action == "pip" and str(n.attrs.get("group", "")).startswith(("extra:", "group:", "docs"))
    )
    return [
        (
            "leave out the system packages the plan guessed",
            "apt",
            guessed_apt,
            "the plan added them from its table, not from the repository",
        ),
        (
            "leave out the distributions guessed from imports",
            "pip",
            guessed_pip,
            "the plan guessed them from import names",
        ),
        (
            "leave out the optional extras and docs requirements",
            "pip",
            optional,
            "optional parts the plan installed",
        ),
    ]


def knowledge_candidates(retriever: Any, log_text: str, context: Mapping[str, str], limit: int) -> list[Candidate]:
    """Candidates from the experience base, best first."""
    if retriever is None:
        return []
    found = retriever.retrieve(log_text, context=dict(context))
    out = []
    for c in found[:limit]:
        atoms = []
        try:
            for a in c.atoms:
                atom = a if isinstance(a, Atom) else Atom.from_json(a)
                atom.validate()
                atoms.append(atom)
        except AtomError:
            continue
        if atoms:
            unit = c.unit
            uid = getattr(unit, "id", None) or (unit.get("id") if isinstance(unit, Mapping) else None)
            advice = getattr(unit, "advice", "") or (unit.get("advice", "") if isinstance(unit, Mapping) else "")
            cand = Candidate(atoms, "knowledge", unit_id=uid, score=float(getattr(c, "score", 0.0)), why=advice)
            cand.exact = bool(getattr(c, "exact", True))
            out.append(cand)
    return out


def merge_candidates(*groups: Iterable[Candidate]) -> list[Candidate]:
    seen: set = set()
    out = []
    for group in groups:
        for cand in group:
            if cand.key() in seen:
                continue
            seen.add(cand.key())
            out.append(cand)
    return out
