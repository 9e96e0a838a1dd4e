"""Diagnosis classifiers over real-looking pip, compiler, pytest and service output."""

from __future__ import annotations

import pytest

from bot.loop.diagnose import diagnose, service_for, setup_failures

CASES = [
    # version incompatibility
    (
        "ERROR: Package 'fixture-floor' requires a different Python: 3.11.2 not in '>=3.12'",
        "python_floor",
        "version",
        ">=3.12",
    ),
    (
        "  × No solution found when resolving dependencies:\n  ╰─▶ Because the current Python version (3.11.9) does not satisfy Python>=3.13",
        "python_floor",
        "version",
        ">=3.13",
    ),
    (
        '  File "/workspace/pkg/core.py", line 3\n    type Vector = list[float]\n         ^^^^^^\nSyntaxError: invalid syntax',
        "newer_syntax",
        "version",
        "3.12",
    ),
    (
        "ImportError: cannot import name 'override' from 'typing' (/usr/local/lib/python3.11/typing.py)",
        "python_floor",
        "version",
        "3.12",
    ),
    (
        "ERROR: Could not find a version that satisfies the requirement numpy==9.9\nERROR: No matching distribution found for numpy==9.9",
        "no_matching_distribution",
        "version",
        "numpy==9.9",
    ),
    # toolchain
    (
        "      src/ext.c:1:10: fatal error: yaml.h: No such file or directory\n    compilation terminated.\n      error: command '/usr/bin/gcc' failed with exit code 1\n  ERROR: Failed building wheel for tinyext",
        "missing_header",
        "toolchain",
        "yaml.h",
    ),
    ("      error: command 'gcc' failed: No such file or directory", "missing_compiler", "toolchain", "gcc"),
    (
        "ImportError: libGL.so.1: cannot open shared object file: No such file or directory",
        "missing_shared_lib",
        "toolchain",
        "libGL.so.1",
    ),
    ("/bin/sh: 1: pkg-config: not found", "missing_pkg_config", "toolchain", ""),
    (
        "Package libxml-2.0 was not found in the pkg-config search path.",
        "missing_pkg_config_module",
        "toolchain",
        "libxml-2.0",
    ),
    ("      error: can't find Rust compiler", "missing_rust", "toolchain", ""),
    ("E   FileNotFoundError: [Errno 2] No such file or directory: 'jq'", "missing_command", "toolchain", "jq"),
    ("Error: pg_config executable not found.", "missing_command", "toolchain", "pg_config"),
    # installation
    ("E   ModuleNotFoundError: No module named 'yaml.constructor'", "missing_module", "installation", "yaml"),
    (
        "E   ImportError: cannot import name 'encode' from 'jwt' (/usr/local/lib/python3.11/site-packages/jwt/__init__.py)",
        "import_name_error",
        "installation",
        "jwt",
    ),
    ("E   AttributeError: module 'attr' has no attribute 'define'", "module_attribute", "installation", "attr"),
    (
        "ERROR: usage: __main__.py [options] [file_or_dir] [file_or_dir] [...]\n__main__.py: error: unrecognized arguments: --cov=pkg --cov-report=term\n  inifile: /workspace/pyproject.toml",
        "pytest_plugin_arg",
        "installation",
        "--cov",
    ),
    ("  def test_x(mocker):\nE       fixture 'mocker' not found", "pytest_missing_fixture", "installation", "mocker"),
    (
        "PytestUnhandledCoroutineWarning: async def functions are not natively supported and have been skipped.",
        "pytest_async_unsupported",
        "installation",
        "async",
    ),
    ("WARNING: fastapi 0.110.0 does not provide the extra 'full'", "missing_extra", "installation", "full"),
    ("PytestConfigWarning: Unknown config option: asyncio_mode", "pytest_plugin_ini", "installation", "asyncio_mode"),
    # verification
    ("collected 0 items\n\n============ no tests ran in 0.01s ============", "no_tests_collected", "verification", ""),
    ("ERROR: file or directory not found: tests/unit", "path_not_found", "verification", "tests/unit"),
    ("/usr/local/bin/python: No module named pytest", "no_test_runner", "verification", "pytest"),
    # services
    (
        'psycopg2.OperationalError: connection to server at "localhost" (127.0.0.1), port 5432 failed: Connection refused',
        "connection_refused",
        "service",
        "5432",
    ),
    (
        "redis.exceptions.ConnectionError: Error 111 connecting to localhost:6379. Connection refused.",
        "connection_refused",
        "service",
        "6379",
    ),
    (
        "E           redis.exceptions.ConnectionError: Error 99 connecting to localhost:6379. Cannot assign requested address.",
        "connection_refused",
        "service",
        "6379",
    ),
    (
        "pymysql.err.OperationalError: (2003, \"Can't connect to MySQL server on 'localhost' ([Errno 111] Connection refused)\")",
        "connection_refused",
        "service",
        "3306",
    ),
    (
        'psycopg.OperationalError: could not translate host name "postgres" to address: Name or service not known',
        "unknown_service_host",
        "service",
        "postgres",
    ),
    # configuration
    (
        "  File \"/workspace/app/settings.py\", line 4, in <module>\n    SECRET = os.environ['APP_SETTINGS']\n             ~~~~~~~~~~^^^^^^^^^^^^^^^^\n  File \"<frozen os>\", line 714, in __getitem__\nKeyError: 'APP_SETTINGS'",
        "missing_env",
        "configuration",
        "APP_SETTINGS",
    ),
    (
        "app/settings.py:4: in <module>\n    settings = importlib.import_module(os.environ[\"APP_SETTINGS\"])\n<frozen os>:679: in __getitem__\n    ???\nE   KeyError: 'APP_SETTINGS'",
        "missing_env",
        "configuration",
        "APP_SETTINGS",
    ),
    ("RuntimeError: the environment variable DATABASE_URL is not set", "missing_env", "configuration", "DATABASE_URL"),
    (
        "ERROR: /workspace/pyproject.toml: Cannot use both [tool.pytest] (native TOML types) and "
        "[tool.pytest.ini_options] (string-based INI format) simultaneously.",
        "pytest_config_tables",
        "version",
        "pytest",
    ),
    (
        'database.py:7: in <module>\n    engine = create_engine(os.getenv("DATABASE_URL"))\n'
        "             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "/usr/local/lib/python3.13/dist-packages/sqlalchemy/engine/url.py:907: in make_url\n"
        "    raise exc.ArgumentError(\n"
        "E   sqlalchemy.exc.ArgumentError: Expected string or URL object, got None",
        "missing_env",
        "configuration",
        "DATABASE_URL",
    ),
    (
        "django.core.exceptions.ImproperlyConfigured: Requested setting INSTALLED_APPS, but settings are not configured. You must either define the environment variable DJANGO_SETTINGS_MODULE or call settings.configure()",
        "django_settings",
        "configuration",
        "DJANGO_SETTINGS_MODULE",
    ),
    (
        "LookupError: setuptools-scm was unable to detect version for /workspace.",
        "scm_version",
        "configuration",
        "setuptools-scm",
    ),
]


@pytest.mark.parametrize("output,kind,category,key", CASES, ids=[c[1] + ":" + c[3] for c in CASES])
def test_classifier(output, kind, category, key):
    sigs = diagnose(output)
    assert sigs, f"nothing diagnosed in {output!r}"
    first = sigs[0]
    assert (first.kind, first.category, first.key) == (kind, category, key)
    assert first.is_setup_failure


def test_assertion_is_the_repositorys_own_failure():
    out = (
        "    def test_add():\n>       assert add(1, 1) == 3\nE       assert 2 == 3\n"
        "FAILED tests/test_math.py::test_add - assert 2 == 3\n===== 1 failed, 3 passed in 0.05s ====="
    )
    sigs = diagnose(out)
    assert [s.kind for s in sigs] == ["assertion"]
    assert setup_failures(sigs) == []


def test_header_wins_over_generic_wheel_failure_and_order_is_earliest_first():
    out = (
        "  Building wheel for tinyext (pyproject.toml): started\n"
        "  src/ext.c:1:10: fatal error: ffi.h: No such file or directory\n"
        "  ERROR: Failed building wheel for tinyext\n"
        "E   ModuleNotFoundError: No module named 'requests'\n"
    )
    kinds = [(s.kind, s.key) for s in diagnose(out)]
    assert kinds == [("missing_header", "ffi.h"), ("missing_module", "requests")]


def test_wheel_failure_without_a_cause_is_still_a_signature():
    sigs = diagnose("  ERROR: Failed building wheel for weirdpkg\nFailed to build weirdpkg\n")
    assert ("wheel_build_failed", "weirdpkg") in [s.ident for s in sigs]


def test_duplicates_collapse_and_service_names():
    out = "\n".join(["E   ModuleNotFoundError: No module named 'yaml'"] * 5)
    assert len(diagnose(out)) == 1
    sig = diagnose("Error 111 connecting to localhost:6379. Connection refused.")[0]
    assert service_for(sig) == "redis"


def test_clean_and_empty_output():
    assert diagnose("") == []
    assert diagnose("===== 12 passed in 0.30s =====") == []


def test_huge_output_is_handled():
    out = "x" * 3_000_000 + "\nE   ModuleNotFoundError: No module named 'zzz'\n"
    assert diagnose(out)[0].key == "zzz"


def test_advice_in_a_python_warning_line_is_no_missing_variable() -> None:
    # duckdb_engine: 81 tests passed, yet the loop read SQLALCHEMY_WARN_20 and
    # SQLALCHEMY_SILENCE_UBER_WARNING from SQLAlchemy's deprecation warning and spent 160 s on
    # trials that changed nothing
    log = (
        "=============================== warnings summary ===============================\n"
        "duckdb_engine/tests/test_basic.py::test_get_views\n"
        "  /workspace/duckdb_engine/tests/test_basic.py:63: MovedIn20Warning: Deprecated API features"
        " detected! These feature(s) are not compatible with SQLAlchemy 2.0. Set environment variable"
        " SQLALCHEMY_WARN_20=1 to show all deprecation warnings.  Set environment variable"
        " SQLALCHEMY_SILENCE_UBER_WARNING=1 to silence this message.\n"
        "================= 81 passed, 10 skipped, 12 warnings in 12.31s =================\n"
    )
    assert [s for s in diagnose(log) if s.kind == "missing_env"] == []


def test_a_variable_named_outside_a_warning_line_is_still_read() -> None:
    log = "E   RuntimeError: Set environment variable DATABASE_URL before running the tests\n"
    assert [s.key for s in diagnose(log) if s.kind == "missing_env"] == ["DATABASE_URL"]
