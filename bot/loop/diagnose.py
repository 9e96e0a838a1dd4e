"""Diagnosis: turn failure output into signatures.

The classes follow the failure taxonomy of the seed papers (DESIGN.md, "Diagnose"):

  version        dependency or runtime version incompatibility (Python floors, newer syntax,
                 no matching distribution, resolver conflicts)
  toolchain      missing compiler, header, shared library, pkg-config module, Rust
  installation   missing module, wrong distribution for an import, extras, pytest plugins
  verification   wrong test command or directory, no tests collected
  service        connection refused on a known service port, unknown service host
  configuration  environment variable, settings module, setuptools-scm without git metadata
  test           the repository's own failures (assertions): never a setup failure

Each classifier is a regex over the output plus a small function that extracts the key (the
module, header, port, variable...). Signatures are deduplicated by (kind, key) and keep the
order in which they first appear, so the first one is the earliest failure in the log.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from bot import catalogue
from bot.junit import ERROR, FAILED, TestResults
from bot.logtext import PIP_BACKTRACKING, outside_host, strip_ansi

SETUP_CATEGORIES = ("version", "toolchain", "installation", "verification", "service", "configuration")


@dataclass(frozen=True)
class Signature:
    kind: str  # e.g. missing_module, missing_header, python_floor
    category: str  # one of SETUP_CATEGORIES or "test"
    key: str  # the discriminating value: module, header, port, variable, ...
    message: str  # the line of output that matched (trimmed)

    @property
    def is_setup_failure(self) -> bool:
        return self.category in SETUP_CATEGORIES

    @property
    def ident(self) -> tuple[str, str]:
        return (self.kind, self.key)

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "category": self.category, "key": self.key, "message": self.message}

    def describe(self) -> str:
        return f"{self.category}/{self.kind}" + (f" ({self.key})" if self.key else "")


# Well-known service ports (a connection refused there means a sibling service is missing) and
# the host names tests use for services, both from the service catalogue.
SERVICE_PORTS = {str(port): kind for port, kind in catalogue.PORT_TO_KIND.items()}
_SERVICE_HOSTS = catalogue.host_words()


def _port_of(port: int) -> Callable[[re.Match[str]], str]:
    return lambda m: str(port)


# typing names that only exist from a given Python (an ImportError for them is a runtime floor).
TYPING_FLOORS = {
    "override": "3.12",
    "TypeAliasType": "3.12",
    "TypeIs": "3.13",
    "ReadOnly": "3.13",
    "NoDefault": "3.13",
    "get_protocol_members": "3.13",
    "is_protocol": "3.13",
    "Buffer": "3.12",
}


def _tail_key(text: str) -> str:
    return text.strip().strip("'\"`").strip()


Rule = tuple[str, str, re.Pattern[str], Callable[[re.Match[str]], str]]


def _rule(
    kind: str,
    category: str,
    pattern: str,
    key: Callable[[re.Match[str]], str] | int | None = 1,
    flags: int = re.MULTILINE,
) -> Rule:
    fn: Callable[[re.Match[str]], str]
    if key is None:

        def fn(m: re.Match[str]) -> str:
            return ""
    elif isinstance(key, int):
        group = key

        def fn(m: re.Match[str]) -> str:
            return _tail_key(m.group(group) or "")
    else:
        fn = key
    return (kind, category, re.compile(pattern, flags), fn)


def _module_top(m: re.Match[str]) -> str:
    return m.group(1).split(".")[0]


def _port_service(m: re.Match[str]) -> str:
    return m.group(1)


RULES: list[Rule] = [
    # --- version incompatibility -------------------------------------------------------------
    _rule("python_floor", "version", r"requires a different Python: [\d.]+ not in '([^']+)'"),
    _rule("python_floor", "version", r"Requires-Python\s*(?:of\s*)?['\"]?([<>=!~][^'\"\s;,]+)"),
    _rule("python_floor", "version", r"current Python version \([\d.]+\) does not satisfy Python\s*([<>=!~][^\s,]+)"),
    _rule("python_floor", "version", r"requires Python ([<>=!~]=?\s*[\d.]+)(?:,| but)"),
    _rule(
        "python_floor",
        "version",
        r"cannot import name '(\w+)' from 'typing'",
        lambda m: TYPING_FLOORS.get(m.group(1), ""),
    ),
    _rule(
        "newer_syntax",
        "version",
        r"^\s*(?:type \w+(?:\[[^\]]*\])? =|(?:async )?def \w+\[[^\]]+\]\(|class \w+\[[^\]]+\][:(]).*\n"
        r"(?:\s*\^+\s*\n)?(?:\s*\^?\s*\n)*\s*SyntaxError: invalid syntax",
        key=lambda m: "3.12",
    ),
    _rule("no_matching_distribution", "version", r"No matching distribution found for ([^\s;]+)"),
    # a dependency's own version check at import (pyarrow 22 under a project that caps numpy<2):
    # its release from the repository's era took the older NumPy
    _rule(
        "dependency_error", "version", r"ImportError: ([A-Za-z_][\w.\-]*) requires NumPy [\d.]+ or newer, found [\d.]+"
    ),
    # NumPy 1.25 finalised the comparison of an array with a string: ``arr == "auto"`` (or
    # ``str(arr) == arr``) gives an array of booleans, where older releases gave the scalar
    # False with a FutureWarning; code that tests the result in an ``if`` now raises. The frame's
    # source line compares with a string literal or a str() call, the error follows it
    _rule(
        "numpy_string_comparison",
        "version",
        r"^[ \t]+\S.*(?:[=!]=\s*(?:str\(|[rbfu]?['\"])|(?:str\([^\n]*\)|['\"])\s*[=!]=).*\n"
        # (Python 3.11 and later mark the expression with a line of carets)
        r"(?:[ \t]*[\^~]+[ \t]*\n)?(?:E\s+)?ValueError: The truth value of an array with more than one element is ambiguous",
        key=lambda m: "numpy",
    ),
    # pip names the constraint it cannot meet: an exact pin the loop gave it (uv's resolution for
    # the image's Python, which ignores the upper bound of a release's Requires-Python, so
    # dataclasses==0.8 for Python 3.11) or the repository's own constraint file
    _rule(
        "constraint_conflict",
        "version",
        r"The user requested \(constraint\) ([A-Za-z0-9][A-Za-z0-9._\-]*==[A-Za-z0-9.+!_\-]+)",
        key=lambda m: str(m.group(1)).lower(),
    ),
    _rule(
        "dependency_conflict",
        "version",
        r"(?:ResolutionImpossible|conflicting dependencies|No solution found when resolving)",
        None,
    ),
    # --- toolchain -----------------------------------------------------------------------------
    _rule("missing_header", "toolchain", r"fatal error: ([\w./+\-]+\.h(?:pp)?): No such file or directory"),
    # meson-python cannot find the interpreter's headers / python3.pc
    _rule("missing_header", "toolchain", r"ERROR: Python dependency not found", key=lambda m: "Python.h"),
    _rule("missing_shared_lib", "toolchain", r"(lib[\w.+\-]+\.so[\w.]*): cannot open shared object file"),
    # ctypes-loaded libraries: cairocffi "cannot load library 'libcairo.so.2'", vispy
    # "ImportError: fontconfig not found" (ctypes.util.find_library found nothing)
    _rule("missing_shared_lib", "toolchain", r"cannot load library '(lib[\w.+\-]+\.so[\w.]*)'"),
    _rule(
        "missing_shared_lib",
        "toolchain",
        r"ImportError: (fontconfig|freetype|cairo|portaudio|sndfile|magic|zbar|GL|EGL) not found",
        key=lambda m: {
            "fontconfig": "libfontconfig.so.1",
            "freetype": "libfreetype.so.6",
            "cairo": "libcairo.so.2",
            "portaudio": "libportaudio.so.2",
            "sndfile": "libsndfile.so.1",
            "magic": "libmagic.so.1",
            "zbar": "libzbar.so.0",
            "GL": "libGL.so.1",
            "EGL": "libEGL.so.1",
        }[m.group(1)],
    ),
    _rule(
        "missing_compiler",
        "toolchain",
        r"(?:error: command '(?:[\w/.-]*/)?(gcc|g\+\+|cc|c\+\+|clang)' failed"
        r"|(?:^|[\s:])(gcc|g\+\+|cc|c\+\+|make|cmake): (?:command )?not found"
        r"|unable to execute '(gcc|g\+\+|cc|c\+\+)')",
        lambda m: next(g for g in m.groups() if g),
    ),
    _rule(
        "missing_pkg_config",
        "toolchain",
        r"(?:pkg-config: (?:command )?not found|(?:Cannot|Did not) find pkg-config"
        r"|pkg-config (?:is )?(?:not|was not) found)",
        None,
    ),
    _rule(
        "missing_pkg_config_module",
        "toolchain",
        r"Package '?([\w.+\-]+)'?,? (?:was not found in the pkg-config search path|required by .*?, not found)",
    ),
    # meson (meson-python builds: pycairo, pygobject, scipy): a dependency it looks up with
    # pkg-config and cmake and does not find
    _rule(
        "missing_pkg_config_module",
        "toolchain",
        r"(?:ERROR: )?Dependency [\"']?([\w.+\-]+)[\"']? (?:is required but )?not found(?:, tried pkgconfig)?",
    ),
    _rule(
        "missing_pkg_config_module", "toolchain", r"Dependency lookup for ([\w.+\-]+) with method '?pkgconfig'? failed"
    ),
    _rule(
        "missing_rust",
        "toolchain",
        r"(?:can't find Rust compiler|cargo(?::)? (?:command )?not found|rustc(?::)? (?:command )?not found"
        r"|Cargo, the Rust package manager, is not installed)",
        None,
    ),
    _rule(
        "missing_command",
        "toolchain",
        r"(?:^|[\s:])(git|pg_config|mysql_config|swig|gfortran|java|node|npm): (?:command )?not found",
    ),
    _rule("missing_command", "toolchain", r"(pg_config|mysql_config) executable not found"),
    # a program the code runs through subprocess is not installed
    # (a bare program name: 'no-such-cert.crt' or 'data.json' is a file a test expects, not a program)
    _rule(
        "missing_command",
        "toolchain",
        r"FileNotFoundError: \[Errno 2\] No such file or directory: '((?:[A-Za-z_][\w+\-]*|python\d(?:\.\d+)?))'",
    ),
    # the test command itself is missing from the image: the engine's exec reports it
    _rule("missing_compiler", "toolchain", r'exec: "(gcc|g\+\+|cc|c\+\+|make|cmake)": executable file not found'),
    _rule(
        "missing_command",
        "toolchain",
        r'exec: "(git|pg_config|mysql_config|swig|gfortran|java|node|npm)": executable file not found',
    ),
    # a Debian package this suite does not have: the repair that asked for it is broken
    _rule(
        "unknown_apt_package",
        "toolchain",
        r"^E: (?:Unable to locate package |Package '?)([a-z0-9][a-z0-9+.\-]*)'?(?: has no installation candidate)?$",
    ),
    # two Debian packages that cannot be installed together (libcurl4-gnutls-dev and
    # libcurl4-openssl-dev): apt's resolver says "A : Conflicts: B" (apt 2) or
    # "A:amd64 Conflicts B" (apt 3's solver); the key is "A|B"
    _rule(
        "apt_conflict",
        "toolchain",
        r"^\s*([a-z0-9][a-z0-9+.\-]*)(?::[a-z0-9]+)?(?:=\S+)?\s*:?\s+(?:Conflicts|Breaks):?\s+([a-z0-9][a-z0-9+.\-]*)",
        key=lambda m: f"{m.group(1)}|{m.group(2)}" if m.group(1) != m.group(2) else "",
    ),
    # --- installation --------------------------------------------------------------------------
    # an application, not an installable package: setuptools' automatic discovery refuses a
    # flat layout with several top-level packages; poetry-core refuses a name with no package
    # directory or a configuration that is not a package
    _rule(
        "not_a_package",
        "installation",
        r"(?:Multiple top-level (?:packages|modules) discovered in a flat-layout"
        r"|No file/folder found for package [\w.\-]+"
        r"|The Poetry configuration is invalid"
        r"|error: package directory '[^']+' does not exist"
        r"|is not a valid (?:package|distribution|project) name)",
        key=None,
    ),
    _rule("missing_module", "installation", r"ModuleNotFoundError: No module named '([\w.]+)'", _module_top),
    _rule("missing_module", "installation", r"ImportError: No module named '?([\w.]+)'?", _module_top),
    _rule(
        "import_name_error",
        "installation",
        r"ImportError: cannot import name '(\w+)' from '([\w.]+)'",
        lambda m: m.group(2).split(".")[0],
    ),
    # a module without an attribute its users expect: another distribution (or version) of the
    # same import name is installed (the `attr` package instead of `attrs`)
    _rule(
        "module_attribute",
        "installation",
        r"AttributeError: module '([\w.]+)' has no attribute '\w+'",
        lambda m: m.group(1).split(".")[0],
    ),
    # PyGObject: a GObject-introspection typelib (gi.require_version) that is not installed
    _rule("missing_typelib", "installation", r"(?:ValueError: )?Namespace (\w+) not available"),
    _rule(
        "missing_extra",
        "installation",
        r"(?:does not provide the extra|WARNING: \S+ [\d.]+ does not provide the extra) '([\w\-]+)'",
    ),
    _rule("missing_extra", "installation", r"(?:install|requires) (?:the )?['\"`]?[\w.\-]+\[([\w,\-]+)\]['\"`]? extra"),
    _rule(
        "pytest_plugin_arg", "installation", r"error: unrecognized arguments: (\S+)", lambda m: m.group(1).split("=")[0]
    ),
    _rule("pytest_plugin_ini", "installation", r"(?:PytestConfigWarning: )?Unknown config option: (\w+)"),
    _rule("pytest_missing_fixture", "installation", r"fixture '(\w+)' not found"),
    # pytest 9 reads a [tool.pytest] table, which older releases ignored: a pyproject that has
    # one beside [tool.pytest.ini_options] (written for the older ones) is refused
    _rule(
        "pytest_config_tables",
        "version",
        r"Cannot use both \[tool\.pytest\] \(native TOML types\) and \[tool\.pytest\.ini_options\]",
        key=lambda m: "pytest",
    ),
    _rule(
        "pytest_async_unsupported",
        "installation",
        r"(?:async def functions are not natively supported|PytestUnhandledCoroutineWarning"
        r"|coroutine '[\w.]+' was never awaited)",
        key=lambda m: "async",
    ),
    _rule("pytest_unknown_marker", "installation", r"'(\w+)' not found in `markers` configuration option"),
    # --- missing service -------------------------------------------------------------------------
    _rule(
        "connection_refused",
        "service",
        r"(?:Connection refused|could not connect to server|Connect call failed|connection to server at)"
        r"[^\n]*?(?:port |:)(\d{2,5})\b",
        _port_service,
        flags=re.MULTILINE | re.IGNORECASE,
    ),
    _rule(
        "connection_refused",
        "service",
        r"(?:port|:)\s*(\d{2,5})\D[^\n]*?(?:Connection refused|failed: Connection refused)",
        _port_service,
        flags=re.MULTILINE | re.IGNORECASE,
    ),
    # redis-py: "Error 111 connecting to localhost:6379. Connection refused." and, in a container
    # without a loopback route to that port, "Error 99 ... Cannot assign requested address."
    _rule("connection_refused", "service", r"Error (?:111|99|61|10061) connecting to [\w.\-]+:(\d+)", _port_service),
    _rule(
        "connection_refused",
        "service",
        r"(?:localhost|127\.0\.0\.1|::1)[\"']?(?::|, ?|\s+port\s+)(\d{2,5})\b[^\n]*?Cannot assign requested address",
        _port_service,
    ),
    # a client's own refusal message names its service even without a port (catalogue words)
    *(
        _rule("connection_refused", "service", "|".join(kind.refusal_patterns), key=_port_of(kind.port))
        for kind in catalogue.KINDS.values()
        if kind.refusal_patterns
    ),
    _rule(
        "unknown_service_host",
        "service",
        r"(?:could not translate host name|Name or service not known|nodename nor servname"
        r"|Temporary failure in name resolution)[^\n]*?[\"']?\b("
        + "|".join(sorted(_SERVICE_HOSTS, key=len, reverse=True))
        + r")\b",
        lambda m: _SERVICE_HOSTS[m.group(1).lower()],
        flags=re.MULTILINE | re.IGNORECASE,
    ),
    # a host outside named by a dotted name (a git dependency's host, an index the build was
    # told to use): not a service, and nothing installed makes it answer (not a setup failure)
    _rule(
        "external_network",
        "external",
        r"Could not resolve host:? '?([A-Za-z0-9][\w\-]*(?:\.[\w\-]+)+)",
        key=lambda m: m.group(1).lower(),
    ),
    # pip could not download a requirement from a host outside (a URL requirement's archive on
    # a code host this machine does not reach): no package or pin makes that host answer
    _rule(
        "external_network",
        "external",
        r"Could not install packages due to an OSError: HTTPS?ConnectionPool\(host='(?!localhost'|127\.|\[?::1)([^']+)'[^\n]*?"
        r"(?:NewConnectionError|NameResolutionError|Name or service not known|Temporary failure in name resolution"
        r"|ProxyError|ConnectTimeout|Network is unreachable)",
        key=lambda m: m.group(1).lower(),
    ),
    # a distribution that compiles CUDA or ROCm extensions at install: the GPU toolkits are not
    # on any runner image, nor on the index (not a setup failure: the report says so)
    _rule(
        "gpu_toolkit",
        "external",
        r"CUDA_HOME (?:or ROCM_HOME )?environment variable (?:must be set|is not set)"
        # or a compiler that finds no header of the CUDA toolkit (pycuda's build: cuda.h)
        r"|fatal error: (?:cuda|cuda_runtime|cuda_runtime_api|cublas_v2|cudnn|nvrtc)\.h: No such file or directory",
        key=None,
    ),
    # --- missing configuration -------------------------------------------------------------------
    _rule(
        "django_settings",
        "configuration",
        r"(?:You must either define the environment variable DJANGO_SETTINGS_MODULE"
        r"|DJANGO_SETTINGS_MODULE (?:is not set|environment variable)"
        r"|AppRegistryNotReady: Apps aren't loaded yet"
        r"|Requested setting \w+, but settings are not configured)",
        key=lambda m: "DJANGO_SETTINGS_MODULE",
    ),
    _rule(
        "missing_env", "configuration", r"os\.environ\[['\"](\w+)['\"]\][^\n]*\n(?:[^\n]*\n){0,8}?[E\s]*KeyError: '\1'"
    ),
    _rule(
        "missing_env",
        "configuration",
        r"(?:environment variable|env var|envvar) ['\"`]?([A-Z][A-Z0-9_]{2,})['\"`]? (?:is )?(?:not set|missing|required|must be set|undefined)",
    ),
    _rule(
        "missing_env",
        "configuration",
        r"(?:[Ss]et|[Dd]efine|[Mm]issing|[Rr]equired) (?:the )?(?:environment variable|env var) ['\"`]?([A-Z][A-Z0-9_]{2,})",
    ),
    # os.getenv("X") gave None and what it was handed refused it (create_engine(os.getenv(
    # "DATABASE_URL")): the traceback's frame line names the variable, the error line says None
    _rule(
        "missing_env",
        "configuration",
        r"os\.(?:getenv|environ\.get)\(\s*['\"]([A-Z][A-Z0-9_]{2,})['\"]\s*\)[^\n]*\n(?:[^\n]*\n){0,16}?"
        r"[^\n]*(?:got None|NoneType|, not None)",
    ),
    # (not debconf's "(TERM is not set, so the dialog frontend is not usable.)", which every apt
    # step without a terminal prints and which says nothing about the failure)
    _rule(
        "missing_env",
        "configuration",
        r"(?<!debconf: \()(?<![\w(])['\"`]?([A-Z][A-Z0-9_]{2,})['\"`]? (?:environment variable )?is not set",
    ),
    _rule(
        "scm_version",
        "configuration",
        r"(?:setuptools-scm was unable to detect version|setuptools_scm.*unable to detect version"
        r"|unable to detect version for|Unable to find a version for this package"
        r"|hatch-vcs.*unable|Cannot find a git repository)",
        key=lambda m: "setuptools-scm",
        flags=re.MULTILINE | re.IGNORECASE,
    ),
    # --- verification mismatch -------------------------------------------------------------------
    _rule(
        "no_tests_collected",
        "verification",
        r"(?:^no tests ran in|collected 0 items|^no tests collected)",
        key=lambda m: "",
        flags=re.MULTILINE,
    ),
    _rule(
        "path_not_found",
        "verification",
        r"ERROR: (?:file or directory not found|file not found|module or package not found): (\S+)",
    ),
    # a pytest plugin implements a hook this pytest does not know (one of them is older than the
    # other): key, the plugin's top-level module
    _rule(
        "plugin_hook_mismatch",
        "version",
        r"unknown hook '\w+' in plugin <module '([A-Za-z_]\w*)",
    ),
    # the code reads a distribution's metadata (importlib.metadata.version, pkg_resources) and
    # nothing installed carries it: most often the project itself, run from the checkout
    _rule(
        "missing_distribution",
        "installation",
        r"(?:PackageNotFoundError: (?:No package metadata was found for )?"
        r"|DistributionNotFound: The '?)([A-Za-z0-9][A-Za-z0-9._\-]*)",
    ),
    # a Rust toolchain is there, older than a crate needs (cargo's MSRV check, or an edition
    # it does not know): the key is the rustc the crate asks for ("" when only the edition says)
    _rule(
        "rust_too_old",
        "toolchain",
        r"(?:requires rustc (\d+\.\d+)(?:\.\d+)?(?: or newer)?"
        r"|feature `edition20(2)4` is required|older than the `20(2)4` edition)",
        key=lambda m: m.group(1) or ("1.85" if (m.group(2) or m.group(3)) else ""),
    ),
    _rule(
        "no_test_runner",
        "verification",
        r"No module named pytest\b|/usr/\S*python\S*: No module named pytest",
        key=lambda m: "pytest",
    ),
    _rule(
        "import_path_mismatch", "verification", r"(?:ImportPathMismatchError|import file mismatch)", key=lambda m: ""
    ),
    # --- pip/build failures without a finer cause --------------------------------------------------
    # (pip's own lines, at the start of a line: a test that logs "WARNING Failed to build path"
    # is not a wheel build)
    _rule(
        "wheel_build_failed",
        "toolchain",
        r"^\s*(?:ERROR: |error: )?(?:Failed building wheel for|Failed to build|"
        r"error: failed-wheel-build-for-install[^\n]*\n[^\n]*?)"
        r" ?([A-Za-z0-9][\w.\-]*)",
    ),
    # --- the repository's own failures -----------------------------------------------------------
    _rule("assertion", "test", r"^E\s+(AssertionError\b.*|assert .*)$", key=lambda m: ""),
]

# What makes a native build fail, more precisely than "the build failed".
_BUILD_CAUSES = (
    "missing_header",
    "missing_compiler",
    "missing_pkg_config",
    "missing_pkg_config_module",
    "missing_rust",
    "rust_too_old",
    "missing_command",
    "python_floor",
    "missing_shared_lib",
    "python_pin",
)
# Kinds that are usually a symptom of a more precise signature in the same log; they are
# dropped when the precise one is present.
_GENERIC = {
    "wheel_build_failed": (*_BUILD_CAUSES, "scm_version", "not_a_package"),
    "missing_module": ("newer_syntax",),
    # a CUDA header is the GPU toolkit's, which no Debian -dev package of the runner provides
    "missing_header": ("gpu_toolkit",),
    "no_matching_distribution": ("python_floor", "python_pin"),
    "locked_build_failed": _BUILD_CAUSES,
    "dependency_conflict": ("python_floor", "constraint_conflict"),
}

# The rest of a pytest header line for "no module named pytest" matches missing_module too.
_SUPPRESS_MODULE = {"pytest"}


# the warnings module's line: "path.py:LINE: CategoryWarning: message" (what follows on that line
# is advice the library printed, never the failure)
_PY_WARNING = re.compile(r"\.py:\d+: \w*Warning: ")


def _iter_matches(output: str) -> Iterator[tuple[int, Signature]]:
    for kind, category, pattern, key_fn in RULES:
        for m in pattern.finditer(output):
            key = key_fn(m)
            if kind in ("python_floor", "apt_conflict") and not key:
                continue
            if kind == "import_name_error" and key == "typing" and m.group(1) in TYPING_FLOORS:
                continue  # reported as the python_floor it is
            line_start = output.rfind("\n", 0, m.start()) + 1
            line_end = output.find("\n", m.end())
            if _PY_WARNING.search(output, line_start, m.start()):
                # "x.py:63: MovedIn20Warning: ... Set environment variable SQLALCHEMY_WARN_20=1
                # to show all deprecation warnings": a warning the code printed and went on
                continue
            line = output[line_start : line_end if line_end != -1 else len(output)].strip()
            yield m.start(), Signature(kind, category, key, line[:300])


def diagnose(output: str) -> list[Signature]:
    """Every signature in ``output``, earliest first, one per (kind, key)."""
    if not output:
        return []
    # the legacy builder colours a step's stderr: "\x1b[91mE\x1b[0m\x1b[91m: Unable to locate package"
    output = strip_ansi(output)
    # Very long logs: the interesting part is the head (first error) and the tail (summary).
    if len(output) > 2_000_000:
        output = output[:1_000_000] + "\n" + output[-1_000_000:]
    found: dict[tuple[str, str], tuple[int, Signature]] = {}
    for pos, sig in _iter_matches(output):
        if sig.kind == "missing_module" and sig.key in _SUPPRESS_MODULE and "No module named pytest" in output:
            continue
        ident = sig.ident
        if ident not in found or pos < found[ident][0]:
            found[ident] = (pos, sig)
    for pos, sig in _pin_signatures(output):
        found.setdefault(sig.ident, (pos, sig))
    for pos, sig in _locked_builds(output):
        found.setdefault(sig.ident, (pos, sig))
    for pos, sig in _native_submodules(output):
        found.setdefault(sig.ident, (pos, sig))
        found.pop(("missing_module", sig.key), None)
    for pos, sig in _backtracking(output):
        found.setdefault(sig.ident, (pos, sig))
    if any(k == "python_pin" for k, _ in found):
        # pip's "Ignored the following versions" line lists every release's Requires-Python:
        # the loose floor read from its first entry is not the pin's
        for ident in [
            i for i, (_, sg) in found.items() if i[0] == "python_floor" and "Ignored the following" in sg.message
        ]:
            found.pop(ident)
    for kind, key in [i for i in found if i[0] == "apt_conflict"]:
        a, _, b = key.partition("|")
        mirror = (kind, f"{b}|{a}")
        if mirror in found and (kind, key) in found and found[mirror][0] < found[(kind, key)][0]:
            found.pop((kind, key))  # the same conflict, seen from the other side
    kinds = {k for k, _ in found}
    result = [s for _, s in sorted(found.values(), key=lambda t: t[0])]
    result = [s for s in result if not any(p in kinds for p in _GENERIC.get(s.kind, ()))]
    # A port that is refused and also named by host: keep the port form (it names the service).
    return result


_NO_MATCH_PIN = re.compile(r"No matching distribution found for ([A-Za-z0-9][\w.\-]*)(?:\[[^\]]*\])?==([\w.+!\-]+)")
_IGNORED = re.compile(r"Ignored the following versions that require a different python version: ([^\n]+)")


def _pin_signatures(output: str) -> Iterator[tuple[int, Signature]]:
    """A pin with no release for this Python: pip names the Requires-Python of every release it
    skipped ("Ignored the following versions ...: 1.7.3 Requires-Python >=3.7,<3.11; ..."). The
    pinned release's range is the Python the pins need."""
    ignored: dict[str, str] = {}
    for m in _IGNORED.finditer(output):
        for entry in m.group(1).split(";"):
            parts = entry.strip().split(" Requires-Python ", 1)
            if len(parts) == 2:
                ignored.setdefault(parts[0].strip(), parts[1].strip())
    for m in _NO_MATCH_PIN.finditer(output):
        spec = ignored.get(m.group(2))
        if spec:
            yield (
                m.start(),
                Signature(
                    "python_pin",
                    "version",
                    spec,
                    f"{m.group(1)}=={m.group(2)} needs Python {spec}: no release of it installs on this Python",
                ),
            )


_INCLUDED = re.compile(r"`([A-Za-z0-9][\w.\-]*)` \(v([\w.+!\-]+)\) was included because")
_BUILD_FAILED = re.compile(
    r"Failed to build|build backend returned an error|Build failures usually indicate|"
    r"Failed to build a native library|maturin failed|failed-wheel-build"
)


def _locked_builds(output: str) -> Iterator[tuple[int, Signature]]:
    """uv installing from a lock (``uv sync --frozen``) built a locked release from its sdist and
    the build failed: uv names the release ("`pydantic-core` (v2.18.3) was included because
    ..."). The lock fixes the version, so a release with no wheel for this Python is built from
    source; the Python its wheels were made for is the usual way out."""
    if not _BUILD_FAILED.search(output):
        return
    for m in _INCLUDED.finditer(output):
        key = f"{m.group(1)}=={m.group(2)}"
        yield (
            m.start(),
            Signature(
                "locked_build_failed",
                "version",
                key,
                f"{key} (from the lock) was built from source and the build failed",
            ),
        )


_SUBMODULE = re.compile(r"No module named '([A-Za-z_]\w*)\.([\w.]+)'")


def _native_submodules(output: str) -> Iterator[tuple[int, Signature]]:
    """``No module named 'X.Y'`` while ``X`` itself imports (the traceback runs through its
    installed files): the distribution is there but was built without an optional part, usually
    a C extension left out for want of a system library."""
    for m in _SUBMODULE.finditer(output):
        top = m.group(1)
        if re.search(rf"/(?:site|dist)-packages/{re.escape(top)}/", output):
            line_start = output.rfind("\n", 0, m.start()) + 1
            line_end = output.find("\n", m.end())
            line = output[line_start : line_end if line_end != -1 else len(output)].strip()
            yield m.start(), Signature("missing_native_submodule", "toolchain", top, line[:300])


_LOOKING_AT = re.compile(r"pip is looking at multiple versions of ([A-Za-z0-9][\w.\-]*)")
_STOPPED = re.compile(r"^\[setupbot\] build (?:stopped: pip's resolver|timed out after)", re.M)


def _backtracking(output: str) -> Iterator[tuple[int, Signature]]:
    """pip's resolver backtracked until the build was stopped (engine.resolver_grace) or timed
    out: the requirements resolve, but pip tries release after release of what it names. The
    key is those names."""
    said = PIP_BACKTRACKING.search(output)
    if said is None or not _STOPPED.search(output):
        return
    names = sorted({m.group(1).lower() for m in _LOOKING_AT.finditer(output)})
    yield (
        said.start(),
        Signature(
            "resolver_backtracking",
            "installation",
            ",".join(names),
            "pip's resolver backtracked"
            + (f" over {', '.join(names)}" if names else "")
            + " until the build was stopped: it is taking longer than usual",
        ),
    )


def setup_failures(signatures: list[Signature]) -> list[Signature]:
    return [s for s in signatures if s.is_setup_failure]


def service_for(sig: Signature) -> str:
    """The sibling service a service signature asks for ("" when unknown)."""
    if sig.kind == "connection_refused":
        return SERVICE_PORTS.get(sig.key, "")
    if sig.kind == "unknown_service_host":
        return sig.key
    return ""


# --- errors raised inside an installed dependency ----------------------------------------------

_FRAME = re.compile(r"^(\S+\.py):\d+: (?:in \S|[A-Z]\w*(?:Error|Exception)\b)")
_E_LINE = re.compile(r"^E\s+([A-Za-z_][\w.]*(?:Error|Exception|Warning|NotReady|Exit))\b:?\s*(.*)$")
_SITE = re.compile(r"/(?:site|dist)-packages/([A-Za-z_]\w*)(?:/|\.py)")
# the test runner's own frames say nothing about the dependencies under test
_RUNNER_MODULES = {"_pytest", "pytest", "pluggy", "py", "_pydev_bundle", "typeguard"}


def dependency_errors(output: str) -> list[Signature]:
    """Exceptions whose innermost frame is in an installed distribution (``site-packages`` or
    ``dist-packages``), one per top-level module: at collection time that is a dependency whose
    installed release does not fit the repository (an API removed, a check tightened). Only
    meaningful for collection output: during a test run the same shape is an ordinary failure."""
    found: dict[str, Signature] = {}
    last_frame = ""
    for line in output.splitlines():
        frame = _FRAME.match(line)
        if frame:
            last_frame = frame.group(1)
            continue
        err = _E_LINE.match(line)
        if err and last_frame:
            site = _SITE.search(last_frame)
            if site and site.group(1) not in _RUNNER_MODULES and site.group(1) not in found:
                found[site.group(1)] = Signature("dependency_error", "version", site.group(1), line.strip()[:300])
            last_frame = ""
    return list(found.values())


def collection_signatures(output: str) -> list[Signature]:
    """Signatures for a failed test collection: the classifiers, then errors raised inside a
    dependency (unless that module already has a signature), then, when the collection failed
    with nothing classified at all, one ``external_network`` when it could not reach a host
    outside, else one ``collection_error`` so that the era repair can be tried."""
    sigs = diagnose(output)
    named = {s.key for s in sigs if s.is_setup_failure}
    kinds = {s.kind for s in sigs}
    outside = _outside_network(output)
    # a host outside that was not reached raises through the clients' frames (socket, urllib3,
    # requests, a hub client): those are the network's failure, not their releases
    for dep in [] if outside is not None else dependency_errors(output):
        # the same module already has a more precise signature; Django raising "apps aren't
        # loaded" is the settings problem, not Django's release
        if dep.key in named or (dep.key == "django" and "django_settings" in kinds):
            continue
        sigs.append(dep)
    if outside is not None and not any(s.is_setup_failure for s in sigs):
        # the collection reached for a host outside: no package or pin makes that answer
        return [*sigs, outside]
    if not any(s.is_setup_failure for s in sigs) and re.search(r"errors? during collection|^ERROR ", output, re.M):
        # the first "E " line, when it names an exception
        first = next((ln for ln in output.splitlines() if ln.startswith("E ")), "")
        first = first if _E_LINE.match(first) else ""
        sigs.append(Signature("collection_error", "version", "", (first or "test collection failed").strip()[:300]))
    return sigs


def _outside_network(output: str) -> Signature | None:
    """An ``external_network`` signature (not a setup failure) when an error line of pytest's
    output (``E   ...``) says a host outside could not be reached: the tests need the network while they are
    collected, and the sandbox has none. The key is the first host named."""
    hits = [
        (line, host)
        for line in output.splitlines()
        if line.startswith("E ") and (host := outside_host(line)) is not None
    ]
    if not hits:
        return None
    host = next((h for _, h in hits if h), "")
    return Signature("external_network", "external", host, hits[0][0].strip()[:300])


_ASSERTION = re.compile(r"\bAssertionError\b|^\s*(?:E\s+)?assert\s", re.M)


# a call into a dependency that its newer release no longer takes: a keyword or an argument it
# dropped, an attribute or a name it removed (click 8.2's CliRunner(mix_stderr=...))
_API_DRIFT = re.compile(
    r"TypeError: .*(?:got an unexpected keyword argument|missing \d+ required (?:positional|keyword-only) "
    r"arguments?|takes (?:from )?\d+ (?:to \d+ )?positional arguments? but \d+ (?:was|were) given)"
    r"|AttributeError: (?:module|type object) '[\w.]+' has no attribute"
    r"|ImportError: cannot import name '\w+' from '[\w.]+'"
)


def api_drift_in(log: str) -> bool:
    """Whether a run's output ends on a call a dependency no longer takes (``_API_DRIFT``): at
    start-up or collection, before any test has a result of its own."""
    return bool(_API_DRIFT.search(log or ""))


def api_drift_failures(results: TestResults) -> list[str]:
    """The failing tests whose failure is a call a dependency no longer takes (a dropped keyword
    argument, a removed attribute or name): what a newer release changes under a test that
    passed in the repository's era."""
    return [
        test
        for test, outcome in results.outcomes.items()
        if outcome in (FAILED, ERROR) and _API_DRIFT.search(results.messages.get(test, ""))
    ]


# the items that pytest's lint plugins add per file (pytest-ruff's `::ruff` and `::ruff::format`,
# pytest-mypy's `::mypy`, pytest-black's `::black`...), and the linter each runs: a linter's newer
# release brings new rules, so files that were clean in the repository's era fail today
LINT_ITEMS = {
    "ruff": "ruff",
    "mypy": "mypy",
    "black": "black",
    "isort": "isort",
    "flake-8": "flake8",
    "flake8": "flake8",
    "pylint": "pylint",
    "pycodestyle": "pycodestyle",
}


def lint_failures(results: TestResults) -> dict[str, str]:
    """The failing tests that are a lint plugin's per-file items, with the linter each runs."""
    out = {}
    for test, outcome in results.outcomes.items():
        if outcome not in (FAILED, ERROR):
            continue
        parts = test.split("::")
        for part in reversed(parts[1:]):
            linter = LINT_ITEMS.get(part.lower())
            if linter is not None:
                out[test] = linter
                break
    return out


def assertion_failures(results: TestResults) -> list[str]:
    """The failing tests whose failure is an assertion the test made (a value it compared), not an
    exception the code under test raised: what a newer release of a dependency can change by
    producing other output (a renderer's markup, a formatter's message)."""
    return [
        test
        for test, outcome in results.outcomes.items()
        if outcome == FAILED and _ASSERTION.search(results.messages.get(test, ""))
    ]
