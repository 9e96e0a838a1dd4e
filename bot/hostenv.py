"""The environment of every subprocess the bot starts on the host (SECURITY.md S12).

The bot's own environment holds the GitHub token, the LLM key and whatever else the job exported.
A host subprocess (uv, git, the engine's CLI, debootstrap) gets only the variables on this
allow-list: what it needs to find programs, reach the network through the operator's proxy and
CA, find the operator's package index, and talk to the engine. Nothing else passes, so a
subprocess that misbehaves -- or a repository that makes one misbehave -- has no secret to read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# Exact names. Lower-case proxy names are what curl-style tools read.
_ALLOWED = frozenset(
    {
        # finding programs, locale, temporary files
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LANGUAGE",
        "LC_ALL",
        "LC_CTYPE",
        "TZ",
        "TMPDIR",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_RUNTIME_DIR",
        # the operator's proxy
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "all_proxy",
        # the operator's CA
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "PIP_CERT",
        "UV_NATIVE_TLS",
        "UV_SYSTEM_CERTS",
        "GIT_SSL_CAINFO",
        "GIT_SSL_CAPATH",
        # the operator's package index and uv's cache
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "PIP_TRUSTED_HOST",
        "UV_INDEX_URL",
        "UV_EXTRA_INDEX_URL",
        "UV_INDEX",
        "UV_DEFAULT_INDEX",
        "UV_CACHE_DIR",
        "UV_INSECURE_HOST",
        "UV_HTTP_TIMEOUT",
        "UV_CONCURRENT_DOWNLOADS",
        "UV_OFFLINE",
        # the container engine
        "DOCKER_HOST",
        "DOCKER_CONTEXT",
        "DOCKER_CONFIG",
        "DOCKER_TLS_VERIFY",
        "DOCKER_CERT_PATH",
        "DOCKER_API_VERSION",
        "DOCKER_BUILDKIT",
        "BUILDKIT_PROGRESS",
        "CONTAINER_HOST",
        "CONTAINER_CONNECTION",
        "CONTAINERS_CONF",
        "CONTAINERS_STORAGE_CONF",
        "CONTAINERS_REGISTRIES_CONF",
    }
)


def host_env(extra: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed part of ``environ`` (default: this process's), plus ``extra``, which the
    caller sets on purpose (for example ``DOCKER_BUILDKIT``)."""
    source = os.environ if environ is None else environ
    env = {k: v for k, v in source.items() if k in _ALLOWED}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(extra or {})
    return env


def allowed(name: str) -> bool:
    return name in _ALLOWED
