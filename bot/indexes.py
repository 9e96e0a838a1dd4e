"""The host's Python package index configuration: private indexes and mirrors.

Read from the host, never from the repository under test: ``PIP_INDEX_URL``,
``PIP_EXTRA_INDEX_URL``, ``UV_INDEX_URL``/``UV_DEFAULT_INDEX``, ``UV_EXTRA_INDEX_URL``/``UV_INDEX``
and pip's configuration files (``PIP_CONFIG_FILE``, the site, user and legacy pip.conf). The
result reaches resolution (uv's flags), runner containers (exec-time environment, which is not
stored in the container's configuration or its snapshots) and image builds (build arguments of
the transient Dockerfile copy). Nothing here is ever written into a generated file: an index URL
may carry credentials.
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

# The variables pip and uv read inside containers and builds.
INDEX_ENV = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL")


@dataclass(frozen=True)
class IndexConfig:
    index_url: str = ""  # replaces the default index
    extra_index_urls: tuple[str, ...] = ()  # searched as well

    def __bool__(self) -> bool:
        return bool(self.index_url or self.extra_index_urls)

    def env(self) -> dict[str, str]:
        """Variables that make pip and uv in a container or build use these indexes."""
        out: dict[str, str] = {}
        if self.index_url:
            out["PIP_INDEX_URL"] = out["UV_INDEX_URL"] = self.index_url
        if self.extra_index_urls:
            out["PIP_EXTRA_INDEX_URL"] = out["UV_EXTRA_INDEX_URL"] = " ".join(self.extra_index_urls)
        return out

    def uv_args(self) -> list[str]:
        args: list[str] = []
        if self.index_url:
            args += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            args += ["--extra-index-url", url]
        return args


def _pip_conf_files(environ: Mapping[str, str]) -> list[Path]:
    """pip's configuration files, lowest priority first (site, user, then PIP_CONFIG_FILE)."""
    if environ.get("PIP_CONFIG_FILE") == os.devnull:
        return []
    files = [Path("/etc/xdg/pip/pip.conf"), Path("/etc/pip.conf")]
    home = Path(environ.get("HOME") or Path.home())
    xdg = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    files += [home / ".pip" / "pip.conf", xdg / "pip" / "pip.conf"]
    virtual_env = environ.get("VIRTUAL_ENV")
    if virtual_env:
        files.append(Path(virtual_env) / "pip.conf")
    if environ.get("PIP_CONFIG_FILE"):
        files.append(Path(environ["PIP_CONFIG_FILE"]))
    return files


def _from_pip_conf(environ: Mapping[str, str]) -> tuple[str, list[str]]:
    index, extra = "", list[str]()
    for path in _pip_conf_files(environ):
        parser = configparser.RawConfigParser()
        try:
            if not parser.read(path):
                continue
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue  # pip would refuse it too; resolution goes on with the rest
        for section in ("global", "install"):
            if parser.has_option(section, "index-url"):
                index = parser.get(section, "index-url").strip()
            if parser.has_option(section, "extra-index-url"):
                extra = parser.get(section, "extra-index-url").split()
    return index, extra


def host_index_config(environ: Mapping[str, str] | None = None) -> IndexConfig:
    """The host's index settings; uv's variables over pip's, variables over files."""
    environ = os.environ if environ is None else environ
    index, extra = _from_pip_conf(environ)
    index = environ.get("PIP_INDEX_URL", index)
    if environ.get("PIP_EXTRA_INDEX_URL") is not None:
        extra = environ["PIP_EXTRA_INDEX_URL"].split()
    index = environ.get("UV_DEFAULT_INDEX") or environ.get("UV_INDEX_URL") or index
    if environ.get("UV_EXTRA_INDEX_URL") or environ.get("UV_INDEX"):
        extra = (environ.get("UV_INDEX") or environ.get("UV_EXTRA_INDEX_URL") or "").split()
    # UV_INDEX entries may be named ("internal=https://..."): the URL is what pip and uv need.
    extra = [u.split("=", 1)[1] if "=" in u.split("://", 1)[0] else u for u in extra]
    return IndexConfig(index.strip(), tuple(u for u in extra if u))


# what a project's page of the simple API is asked for: PEP 691's JSON, else PEP 503's HTML
SIMPLE_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"


def project_page(index_url: str, name: str) -> str:
    """The simple API page of distribution ``name`` (already normalised) on ``index_url``."""
    return f"{index_url.rstrip('/')}/{name}/"


def default_index_url(environ: Mapping[str, str] | None = None) -> str:
    """The index pip and uv install from on this host: the configured one, else pip's own
    default, asked of pip rather than written here. "" when neither is known, and then nothing
    is looked up."""
    configured = host_index_config(environ).index_url
    if configured:
        return configured
    try:
        from pip._internal.models.index import PyPI  # pip's default, as pip itself has it
    except ImportError:
        return ""
    return str(PyPI.simple_url)


def index_hosts(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The hosts pip and uv download from on this host: those of the configured indexes, and
    pip's own default index and file host when no index replaces it (asked of pip, never
    written here). An LLM's shell command may name these and no other host."""
    config = host_index_config(environ)
    hosts = {urlsplit(u).hostname for u in (config.index_url, *config.extra_index_urls) if u}
    if not config.index_url:
        try:
            from pip._internal.models.index import PyPI  # pip's default, as pip itself has it
        except ImportError:
            pass
        else:
            hosts |= {urlsplit(PyPI.url).hostname, PyPI.file_storage_domain}
    return frozenset(h.lower() for h in hosts if h)
