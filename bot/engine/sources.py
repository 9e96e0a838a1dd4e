"""Where base images come from: the local store, then a registry, then offline stand-ins.

``images.source`` chooses: ``auto`` (registry when one answers, else stand-ins), ``registry``
(only pulls) or ``standins`` (only what ``setupbot images bootstrap`` built). The local store is
always looked at first. ``images.registry`` names a mirror or pull-through cache
(``mirror.example:5000`` -> ``mirror.example:5000/library/python:3.13-slim``); empty means the
engine's own default registry, which the engine reports itself (``docker info``), so no
registry host is written here.

Generated Dockerfiles always name the official image. An image that came from a registry is
pinned by its manifest digest (``python:3.13-slim@sha256:...``); a stand-in has no digest, and
the plan and the report say so.
"""

from __future__ import annotations

import json
import logging
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.errors import ConfigError, ImageUnavailableError

if TYPE_CHECKING:
    from bot.engine.core import Engine

log = logging.getLogger(__name__)

SOURCES = ("auto", "registry", "standins")
# The Python tags the official image publishes and that are supported upstream.
REGISTRY_PYTHONS = ["3.9", "3.10", "3.11", "3.12", "3.13", "3.14"]
PROBE_TIMEOUT = 3.0
BOOTSTRAP_HINT = (
    "Run `setupbot images bootstrap` to build offline stand-ins, or point "
    "images.registry at a registry or pull-through cache that answers."
)

# One probe per registry per process: the answer does not change within a run, and the
# "no registry answers" notice is said once.
_PROBED: dict[str, bool] = {}
_SAID: set[str] = set()


@dataclass(frozen=True)
class ResolvedImage:
    name: str  # the official name a Dockerfile uses, e.g. "python:3.13-slim"
    origin: str  # "local" | "registry" | "standin"
    digest: str  # "sha256:..." for registry images, "" for stand-ins and local builds

    @property
    def pinned(self) -> str:
        """The reference a generated Dockerfile names."""
        return f"{self.name}@{self.digest}" if self.digest else self.name

    def describe(self) -> str:
        if self.digest:
            return f"{self.name}@{self.digest} (from a registry)"
        if self.origin == "standin":
            return f"{self.name} (an offline stand-in: no registry digest)"
        return f"{self.name} (local image without a registry digest)"


def split_reference(ref: str) -> tuple[str, str, str]:
    """``[host/]repo[:tag][@digest]`` -> (name without digest, repository path, digest)."""
    digest = ""
    if "@" in ref:
        ref, digest = ref.split("@", 1)
    last = ref.rsplit("/", 1)[-1]
    repo = ref.rsplit(":", 1)[0] if ":" in last else ref
    return ref, repo, digest


def _official_path(repo: str) -> str:
    """``python`` -> ``library/python``; ``bitnami/redis`` stays. A host part is dropped."""
    first = repo.split("/", 1)[0]
    if "/" in repo and ("." in first or ":" in first or first == "localhost"):
        repo = repo.split("/", 1)[1]
    return repo if "/" in repo else f"library/{repo}"


class ImageSource:
    def __init__(
        self, engine: Engine, *, probe_timeout: float = PROBE_TIMEOUT, say: Callable[[str], None] | None = None
    ) -> None:
        self.engine = engine
        images = engine.settings.images
        self.mode = images.source
        if self.mode not in SOURCES:
            raise ConfigError(f"images.source must be one of {', '.join(SOURCES)}, not {self.mode!r}")
        self.registry = images.registry.strip().rstrip("/")
        self.probe_timeout = probe_timeout
        self.say = say or log.warning

    # ------------------------------------------------------------------ the registry
    def registry_ref(self, name: str) -> str:
        """What to pull for the official ``name``: itself, or its path on the mirror."""
        if not self.registry:
            return name
        ref, repo, digest = split_reference(name)
        tag = ref[len(repo) :]
        out = f"{self.registry}/{_official_path(repo)}{tag}"
        return f"{out}@{digest}" if digest else out

    def _endpoints(self) -> list[str]:
        if self.registry:
            host = self.registry.split("/", 1)[0]
            return [f"https://{host}/v2/", f"http://{host}/v2/"]
        # The engine's default registry and any mirrors its daemon is configured with.
        r = self.engine.run_cli(
            ["info", "--format", "{{json .RegistryConfig}} {{json .IndexServerAddress}}"], check=False, timeout=30
        )
        urls: list[str] = []
        try:
            config_json, index_json = r.stdout.strip().rsplit(" ", 1)
            config = json.loads(config_json) or {}
            for mirror in config.get("Mirrors") or []:
                urls.append(mirror.rstrip("/") + "/v2/")
            index = json.loads(index_json) or ""
        except (ValueError, AttributeError):
            index = ""
        if index:
            host = index.split("://", 1)[-1].split("/", 1)[0]
            urls.append(f"https://{host}/v2/")
        return urls

    def registry_answers(self) -> bool:
        if self.mode == "standins":
            return False
        key = self.registry or "(engine default)"
        if key not in _PROBED:
            _PROBED[key] = any(_answers(url, self.probe_timeout) for url in self._endpoints())
        if not _PROBED[key] and self.mode == "auto" and key not in _SAID:
            _SAID.add(key)
            who = f"the registry {self.registry} does not answer" if self.registry else "no image registry answers"
            self.say(f"{who} (probed for {self.probe_timeout:.0f}s): using offline stand-ins (images.source: auto)")
        return _PROBED[key]

    # ------------------------------------------------------------------ what is offered
    def local_pythons(self) -> list[str]:
        from bot.engine.images import local_pythons  # images -> core -> sources: a cycle at import

        return local_pythons(self.engine)

    def offered_pythons(self) -> list[str]:
        """Every Python the source offers: what the store has, plus the official tags when a
        registry answers. Nothing at all is an ImageUnavailableError that names the fix."""
        found = set(self.local_pythons())
        if self.mode != "standins" and self.registry_answers():
            found.update(self.registry_pythons())
        if not found:
            raise self._unavailable("no python:X.Y-slim image is in the local store")
        return sorted(found, key=lambda v: tuple(int(p) for p in v.split(".")))

    def registry_pythons(self) -> list[str]:
        """A configured registry is asked which python:X.Y-slim tags it holds (a mirror may hold
        a few); the official registry, or a registry that does not list tags, offers the
        official supported tags."""
        if not self.registry:
            return list(REGISTRY_PYTHONS)
        host = self.registry.split("/", 1)[0]
        path = _official_path("python")
        for scheme in ("https", "http"):
            tags = _list_tags(f"{scheme}://{host}/v2/{path}/tags/list", self.probe_timeout)
            if tags is not None:
                return sorted(
                    {m.group(1) for t in tags if (m := re.fullmatch(r"(\d+\.\d+)-slim", t))},
                    key=lambda v: tuple(int(p) for p in v.split(".")),
                )
        return list(REGISTRY_PYTHONS)

    # ------------------------------------------------------------------ one image
    def local(self, name: str) -> ResolvedImage | None:
        ref, repo, digest = split_reference(name)
        info = self._inspect(ref)
        if info is None:
            return None
        found = self._digest(info, repo)
        if digest and found != digest:
            return None
        labels = (info.get("Config") or {}).get("Labels") or {}
        from bot.engine.images import STANDIN_LABEL  # images -> core -> sources: a cycle at import

        if found:
            return ResolvedImage(ref, "registry", found)
        return ResolvedImage(ref, "standin" if labels.get(STANDIN_LABEL) == "1" else "local", "")

    def ensure(self, name: str) -> ResolvedImage:
        """Make ``name`` (official name, optionally ``@sha256:...``) present under its official
        name in the local store; pull it when the source allows."""
        ref, repo, digest = split_reference(name)
        have = self.local(name)
        if have is not None:
            return have
        if self.mode != "standins" and self.registry_answers():
            source = self.registry_ref(name)
            r = self.engine.run_cli(["pull", "--quiet", source], check=False, timeout=1800)
            if r.returncode == 0:
                if source != ref:
                    self.engine.tag(source, ref)
                info = self._inspect(ref) or {}
                return ResolvedImage(ref, "registry", self._digest(info, repo) or digest)
            if self.mode == "registry" or not self.engine.image_exists(ref):
                detail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]
                if self.mode == "registry":
                    raise ImageUnavailableError(
                        f"cannot pull {source}: {detail[0]}",
                        "Check images.registry and that the registry holds the image, or set "
                        "images.source: auto to fall back to offline stand-ins.",
                    )
                self.say(f"cannot pull {source} ({detail[0]}); looking for an offline stand-in")
                raise ImageUnavailableError(
                    f"image {ref} is not in the local store, the registry could not "
                    f"give it ({detail[0]}) and no offline stand-in is built",
                    BOOTSTRAP_HINT,
                )
        raise self._unavailable(f"image {ref} is not in the local store")

    def _unavailable(self, what: str) -> ImageUnavailableError:
        if self.mode == "registry":
            where = self.registry or "the engine's default registry"
            return ImageUnavailableError(
                f"{what} and {where} does not answer",
                "Check the network or images.registry, or set images.source: auto "
                "and run `setupbot images bootstrap` for offline stand-ins.",
            )
        if self.mode == "standins":
            return ImageUnavailableError(f"{what} (images.source: standins)", BOOTSTRAP_HINT)
        return ImageUnavailableError(f"{what}, no registry answers and no offline stand-in is built", BOOTSTRAP_HINT)

    def _inspect(self, ref: str) -> dict | None:
        r = self.engine.run_cli(["image", "inspect", "--format", "{{json .}}", ref], check=False)
        if r.returncode != 0:
            return None
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None

    @staticmethod
    def _digest(info: dict, repo: str) -> str:
        """The manifest digest the registry gave this image, for the repository ``repo``
        (a mirror's copy of the official repository counts)."""
        want = _official_path(repo)
        for entry in info.get("RepoDigests") or []:
            name, _, digest = entry.partition("@")
            if _official_path(name) == want and digest:
                return digest
        return ""


def _answers(url: str, timeout: float) -> bool:
    """A registry answers /v2/ with 200 or 401 and names its API version."""
    try:
        with _opener(url).open(urllib.request.Request(url, method="GET"), timeout=timeout):
            return True
    except urllib.error.HTTPError as exc:
        return exc.code == 401 or bool(exc.headers.get("Docker-Distribution-Api-Version"))
    except (TimeoutError, urllib.error.URLError, OSError, ValueError):
        return False


def _opener(url: str) -> urllib.request.OpenerDirector:
    host = urllib.parse.urlsplit(url).hostname or ""
    handlers: list = [urllib.request.HTTPSHandler(context=ssl.create_default_context())]
    if host == "localhost" or host.startswith("127.") or host == "::1":
        handlers.append(urllib.request.ProxyHandler({}))  # a proxy cannot reach our loopback
    return urllib.request.build_opener(*handlers)


def _list_tags(url: str, timeout: float) -> list[str] | None:
    try:
        with _opener(url).open(urllib.request.Request(url), timeout=timeout) as resp:
            data = json.loads(resp.read(1_000_000) or b"{}")
    except (TimeoutError, urllib.error.URLError, OSError, ValueError):
        return None
    tags = data.get("tags") if isinstance(data, dict) else None
    return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else None


def reset_probes() -> None:
    """Forget the probe answers (tests; a long-lived process after a network change)."""
    _PROBED.clear()
    _SAID.clear()
