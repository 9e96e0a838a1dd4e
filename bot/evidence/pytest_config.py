"""pytest configuration (pytest.ini, tox.ini [pytest], setup.cfg [tool:pytest],
pyproject [tool.pytest.ini_options]): options that need a plugin installed."""

from __future__ import annotations

import configparser
import re
import shlex
from collections.abc import Mapping
from typing import Any

from bot.evidence.files import RepoFiles, line_of
from bot.evidence.model import Evidence, Source

# addopts flag -> distribution that provides it
FLAG_PLUGINS = {
    "--cov": "pytest-cov",
    "--cov-report": "pytest-cov",
    "--cov-config": "pytest-cov",
    "--no-cov": "pytest-cov",
    "--cov-fail-under": "pytest-cov",
    "--cov-branch": "pytest-cov",
    "-n": "pytest-xdist",
    "--numprocesses": "pytest-xdist",
    "--dist": "pytest-xdist",
    "--timeout": "pytest-timeout",
    "--reruns": "pytest-rerunfailures",
    "--benchmark-skip": "pytest-benchmark",
    "--benchmark-disable": "pytest-benchmark",
    "--benchmark-only": "pytest-benchmark",
    "--html": "pytest-html",
    "--randomly-seed": "pytest-randomly",
    "-p randomly": "pytest-randomly",
    "--mypy": "pytest-mypy",
    "--flake8": "pytest-flake8",
    "--ruff": "pytest-ruff",
    "--black": "pytest-black",
    "--isort": "pytest-isort",
    "--mpl": "pytest-mpl",
    "--mpl-baseline-path": "pytest-mpl",
    "--ds": "pytest-django",
    "--reuse-db": "pytest-django",
    "--nomigrations": "pytest-django",
    "--no-migrations": "pytest-django",
    "--doctest-plus": "pytest-doctestplus",
    "--remote-data": "pytest-remotedata",
    "--asyncio-mode": "pytest-asyncio",
    "--snapshot-update": "syrupy",
    "--hypothesis-show-statistics": "hypothesis",
    "--hypothesis-profile": "hypothesis",
    "--checkdocs": "pytest-checkdocs",
    "--enabler": "pytest-enabler",
    "--memray": "pytest-memray",
    "--codeblocks": "pytest-codeblocks",
    "--forked": "pytest-forked",
    "--boxed": "pytest-xdist",
    "--looponfail": "pytest-xdist",
    "--instafail": "pytest-instafail",
    "--sugar": "pytest-sugar",
    "--durations-min": "",
    "--junit-xml": "",
    "--strict-markers": "",
    "--doctest-modules": "",
    "--typeguard-packages": "typeguard",
    "--beartype-packages": "beartype",
    "--pylint": "pytest-pylint",
    "--pycodestyle": "pytest-pycodestyle",
    "--cram": "pytest-cram",
    "--env": "pytest-env",
    "--freeze-uuids": "pytest-freezer",
    "--vcr-record": "pytest-recording",
    "--record-mode": "pytest-recording",
    "--block-network": "pytest-recording",
    "--disable-socket": "pytest-socket",
    "--allow-hosts": "pytest-socket",
    "--httpx-mock": "pytest-httpx",
    "--celery": "pytest-celery",
}
# ini keys -> distribution
INI_PLUGINS = {
    "asyncio_mode": "pytest-asyncio",
    "asyncio_default_fixture_loop_scope": "pytest-asyncio",
    "timeout": "pytest-timeout",
    "timeout_method": "pytest-timeout",
    "DJANGO_SETTINGS_MODULE": "pytest-django",
    "django_find_project": "pytest-django",
    "env": "pytest-env",
    "mock_use_standalone_module": "pytest-mock",
    "flake8-max-line-length": "pytest-flake8",
    "mpl-baseline-path": "pytest-mpl",
    "doctest_plus": "pytest-doctestplus",
    "doctest_rst": "pytest-doctestplus",
    "qt_api": "pytest-qt",
    "trio_mode": "pytest-trio",
    "anyio_mode": "anyio",
    "bdd_features_base_dir": "pytest-bdd",
    "console_output_style": "",
    "postgresql_host": "pytest-postgresql",
    "mypy_ini_file": "pytest-mypy",
    "benchmark_min_rounds": "pytest-benchmark",
    "reruns": "pytest-rerunfailures",
    "faulthandler_timeout": "",
    "xfail_strict": "",
    "testpaths": "",
}


def record(ev: Evidence, file: str, options: Mapping[str, Any], text: str) -> None:
    """Record the plugins that ``options`` (one pytest configuration section) needs."""
    if ev.pytest_config is None:
        ev.pytest_config = Source(file, line_of(text, "pytest"), "pytest configuration")
    addopts = options.get("addopts", "")
    if isinstance(addopts, list):
        addopts = " ".join(str(x) for x in addopts)
    addopts = str(addopts)
    try:
        tokens = shlex.split(addopts, comments=True)
    except ValueError:
        tokens = addopts.split()
        ev.warn(file, line_of(text, "addopts"), "unbalanced quotes in pytest addopts")
    for i, tok in enumerate(tokens):
        flag = tok.split("=", 1)[0]
        dist = FLAG_PLUGINS.get(flag)
        if flag == "-p" and i + 1 < len(tokens):
            dist = _plugin_module_dist(tokens[i + 1])
        elif flag.startswith("-p") and len(flag) > 2:
            dist = _plugin_module_dist(flag[2:])
        if dist:
            ev.pytest_plugins.append((dist, Source(file, line_of(text, tok), f"pytest addopts {tok}")))
    for key, value in options.items():
        dist = INI_PLUGINS.get(key)
        if dist:
            ev.pytest_plugins.append((dist, Source(file, line_of(text, key), f"pytest option {key}")))
        if key == "required_plugins":
            values = value if isinstance(value, list) else str(value).split()
            for v in values:
                m = re.match(r"^[A-Za-z0-9_.\-]+", str(v))
                if m:
                    ev.pytest_plugins.append((m.group(0), Source(file, line_of(text, str(v)), "required_plugins")))


def _plugin_module_dist(module: str) -> str:
    if module.startswith("no:"):
        return ""
    known = {
        "xdist": "pytest-xdist",
        "pytest_cov": "pytest-cov",
        "randomly": "pytest-randomly",
        "pytest_asyncio": "pytest-asyncio",
        "anyio": "anyio",
        "pytester": "",
        "doctest": "",
        "pytest_mock": "pytest-mock",
        "pytest_timeout": "pytest-timeout",
        "trio": "pytest-trio",
        "pytest_django": "pytest-django",
        "hypothesis": "hypothesis",
        "syrupy": "syrupy",
    }
    if module in known:
        return known[module]
    if module.startswith("pytest_"):
        return module.replace("_", "-")
    return ""


def scan_ini(files: RepoFiles, ev: Evidence) -> None:
    for rel, section in (
        ("pytest.ini", "pytest"),
        (".pytest.ini", "pytest"),
        ("tox.ini", "pytest"),
        ("setup.cfg", "tool:pytest"),
    ):
        text = files.read_text(rel)
        if text is None:
            continue
        parser = configparser.RawConfigParser(strict=False)
        try:
            parser.read_string(text, source=rel)
        except configparser.Error as exc:
            if rel in ("pytest.ini", ".pytest.ini"):
                ev.warn(
                    rel,
                    getattr(exc, "lineno", None),
                    f"cannot parse: {exc.message if hasattr(exc, 'message') else exc}",
                )
            continue  # tox.ini / setup.cfg report their own parse errors
        if parser.has_section(section):
            record(ev, rel, dict(parser.items(section)), text)
