"""Import name -> distribution. The repository's own manifests win; then the packaged table
of well-known names that differ; then a registry check (does the name exist on the package index)."""

from __future__ import annotations

import json
import logging
import os
import re
import ssl
import time
import urllib.error
import urllib.request
from functools import lru_cache
from pathlib import Path

from packaging.utils import canonicalize_name

from bot.evidence.imports import NAMESPACE_ROOTS
from bot.indexes import SIMPLE_ACCEPT, default_index_url, project_page
from bot.paths import PACKAGE_DIR

log = logging.getLogger(__name__)
DATA = PACKAGE_DIR / "graph" / "data"


@lru_cache(maxsize=1)
def import_table() -> dict[str, str]:
    return json.loads((DATA / "import_map.json").read_text())


@lru_cache(maxsize=1)
def system_table() -> dict[str, dict]:
    data = json.loads((DATA / "system_packages.json").read_text())
    data.pop("_comment", None)
    return data


def known_distribution(module: str) -> str | None:
    """The table's distribution for ``module`` (a dotted name: the longest known prefix wins)."""
    parts = module.split(".")
    for k in range(len(parts), 0, -1):
        hit = import_table().get(".".join(parts[:k]))
        if hit:
            return hit
    return None


# Distributions for imports that import_map.json leaves out on purpose: as a plan-time guess from
# an import they would be wrong too often (``google`` is a namespace, ``distutils`` was the
# standard library), but after a "No module named" failure they are the fix (issue 17).
REPAIR_ONLY_DISTRIBUTIONS = {
    "editor": "python-editor",
    "socks": "PySocks",
    "distutils": "setuptools",
    "google": "protobuf",
}


def repair_distribution(module: str) -> str | None:
    """The distribution a repair installs for a missing ``module``: the import table, then the
    repair-only names. The loop's rules and the generated seed units both read this."""
    return known_distribution(module) or REPAIR_ONLY_DISTRIBUTIONS.get(module)


def import_key(full: str) -> str:
    """The name a distribution is looked up by: the top-level module, or for namespace packages
    (google.cloud.storage, backports.zoneinfo, jaraco.functools) the distinguishing prefix."""
    parts = full.split(".")
    if parts[0] not in NAMESPACE_ROOTS or len(parts) == 1:
        return parts[0]
    if import_table().get(".".join(parts[:2])):
        return ".".join(parts[:2])
    if len(parts) > 2 and (
        parts[:2] == ["google", "cloud"]
        or parts[0] == "azure"
        and parts[1] in ("storage", "mgmt", "keyvault", "ai", "data", "search", "eventhub", "servicebus", "monitor")
    ):
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def candidates_for(module: str) -> list[str]:
    """Distribution names to try for an import nobody declared, most likely first."""
    table = known_distribution(module)
    if table:
        return [table]
    if "." in module:
        return [module.replace(".", "-").replace("_", "-")]
    out = [module]
    for alt in (module.replace("_", "-"), f"python-{module}", f"py{module}"):
        if alt not in out:
            out.append(alt)
    return out


def declared_for(module: str, declared: dict[str, str]) -> str | None:
    """The declared distribution (canonical name -> spec) that provides ``module``, if any."""
    table = known_distribution(module)
    if table and canonicalize_name(table) in declared:
        return canonicalize_name(table)
    forms = {
        canonicalize_name(cand)
        for cand in (
            module,
            module.replace("_", "-"),
            f"python-{module}",
            f"py{module}",
            f"{module}-python",
            re.sub(r"^py", "", module),
        )
    }
    for c in sorted(forms):
        if c in declared:
            return c
    # a fork or a new major line published under a numbered or binary name that keeps the
    # original's module (python-constraint2 provides `constraint`, psycopg2-binary `psycopg2`):
    # what the project declares wins over guessing the original's distribution
    for dist in sorted(declared):
        base = re.sub(r"-binary$", "", dist)
        if base in forms or re.sub(r"-?\d+$", "", base) in forms:
            return dist
    # some distributions provide an import under a different stem (e.g. "pyyaml-include")
    for dist in declared:
        if table and canonicalize_name(table) == dist:
            return dist
    return None


class Registry:
    """Existence checks against the package index's simple API (a project's page is there or
    it is a 404), cached on disk. The index is the one pip uses on this host unless
    ``index_url`` (a simple API root) is given. Offline or slow: the answer is None (unknown),
    never an exception."""

    def __init__(
        self,
        cache_dir: Path | None = None,
        timeout: float = 4.0,
        enabled: bool = True,
        index_url: str | None = None,
        max_lookups: int = 40,
    ) -> None:
        self.cache_dir = (
            cache_dir or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "setupbot" / "pypi"
        )
        self.timeout = timeout
        self.enabled = enabled
        self.index_url = index_url
        self.max_lookups = max_lookups
        self.lookups = 0
        self._offline = False

    def _cache_file(self, name: str) -> Path:
        return self.cache_dir / f"{canonicalize_name(name)}.json"

    def exists(self, name: str) -> bool | None:
        cache = self._cache_file(name)
        if cache.is_file():
            try:
                data = json.loads(cache.read_text())
                if time.time() - data.get("checked", 0) < 30 * 86400:
                    return data.get("exists")
            except (OSError, ValueError):
                pass
        if not self.enabled or self._offline or self.lookups >= self.max_lookups:
            return None
        self.lookups += 1
        if self.index_url is None:
            self.index_url = default_index_url()
        if not self.index_url:
            return None
        # the index URL is taken as it is: no part of it is a template (a brace stays a brace)
        url = project_page(self.index_url, canonicalize_name(name))
        req = urllib.request.Request(url, headers={"Accept": SIMPLE_ACCEPT, "User-Agent": "setupbot"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=ssl.create_default_context()) as resp:
                exists = resp.status == 200
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                exists = False
            else:
                return None
        except (urllib.error.URLError, TimeoutError, OSError, ssl.SSLError) as exc:
            log.debug("registry unreachable (%s): treating lookups as unknown", exc)
            self._offline = True
            return None
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps({"exists": exists, "checked": time.time()}))
        except OSError:
            pass
        return exists
