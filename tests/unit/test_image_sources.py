"""Image sources without an engine: the local store, then a registry, then stand-ins.

The engine is a recorder that answers `docker image inspect`, `pull`, `tag` and `info` from a
dictionary, and the registry probe is a real HTTP server on 127.0.0.1 (or a closed port)."""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.config import load_settings
from bot.engine import sources
from bot.engine.sources import ImageSource, ResolvedImage, split_reference
from bot.errors import ImageUnavailableError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "repos"
DIGEST = "sha256:" + "ab" * 32


class FakeEngine:
    """Answers the CLI calls ImageSource makes; ``remote`` is what a pull can fetch."""

    def __init__(self, settings, local=None, remote=None):
        self.settings = settings
        self.local = dict(local or {})
        self.remote = dict(remote or {})
        self.calls: list[list[str]] = []

    def run_cli(self, args, check=True, timeout=None):
        self.calls.append(list(args))
        argv = ["docker", *args]
        if args[:2] == ["image", "inspect"]:
            info = self.local.get(args[-1])
            if info is None:
                return subprocess.CompletedProcess(argv, 1, "", "No such image")
            return subprocess.CompletedProcess(argv, 0, json.dumps(info), "")
        if args[0] == "pull":
            ref = args[-1]
            if ref not in self.remote:
                return subprocess.CompletedProcess(argv, 1, "", "manifest unknown")
            self.local[ref] = self.remote[ref]
            return subprocess.CompletedProcess(argv, 0, ref, "")
        if args[0] == "info":
            return subprocess.CompletedProcess(argv, 0, '{"Mirrors":[]} "https://index.invalid/v1/"', "")
        if args[0] == "images":
            tags = [t for t in self.local if t.startswith(args[1] + ":")]
            return subprocess.CompletedProcess(argv, 0, "\n".join(tags), "")
        raise AssertionError(f"unexpected engine call {args}")

    def image_tags(self, repository):
        return [t for t in self.local if t.startswith(repository + ":")]

    def image_exists(self, ref):
        return ref in self.local

    def tag(self, source, target):
        self.local[target] = self.local[source]


@pytest.fixture(autouse=True)
def _fresh_probes():
    sources.reset_probes()
    yield
    sources.reset_probes()


@dataclass
class RegistryDouble:
    address: str
    handler: type


@pytest.fixture
def registry_double():
    """A /v2/ endpoint that answers like a registry (401 with the API version header)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        tags = None

        def do_GET(self):
            if self.path == "/v2/library/python/tags/list" and Handler.tags is not None:
                body = json.dumps({"name": "library/python", "tags": Handler.tags}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(401 if self.path == "/v2/" else 404)
            self.send_header("Docker-Distribution-Api-Version", "registry/2.0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield RegistryDouble(f"127.0.0.1:{server.server_address[1]}", Handler)
    server.shutdown()


def closed_port() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"127.0.0.1:{port}"


def settings_with(**images):
    return load_settings(None, environ={}, overrides={"images": images})


STANDIN = {"Id": "sha256:1", "RepoDigests": [], "Config": {"Labels": {"setupbot.standin": "1"}}}


def pulled(repo: str) -> dict:
    return {"Id": "sha256:2", "RepoDigests": [f"{repo}@{DIGEST}"], "Config": {"Labels": {}}}


# ------------------------------------------------------------------ references
def test_split_reference_and_mirror_paths():
    assert split_reference("python:3.13-slim") == ("python:3.13-slim", "python", "")
    assert split_reference(f"python:3.13-slim@{DIGEST}") == ("python:3.13-slim", "python", DIGEST)
    assert split_reference("127.0.0.1:5000/library/python:3.13") == (
        "127.0.0.1:5000/library/python:3.13",
        "127.0.0.1:5000/library/python",
        "",
    )
    engine = FakeEngine(settings_with(registry="mirror.example:5000"))
    src = ImageSource(engine)
    assert src.registry_ref("python:3.13-slim") == "mirror.example:5000/library/python:3.13-slim"
    assert src.registry_ref("bitnami/redis:7") == "mirror.example:5000/bitnami/redis:7"
    assert ImageSource(FakeEngine(settings_with())).registry_ref("python:3.13-slim") == "python:3.13-slim"


def test_pinned_reference_names_the_official_image_with_its_digest():
    assert ResolvedImage("python:3.13-slim", "registry", DIGEST).pinned == f"python:3.13-slim@{DIGEST}"
    assert ResolvedImage("python:3.13-slim", "standin", "").pinned == "python:3.13-slim"
    assert "no registry digest" in ResolvedImage("python:3.13-slim", "standin", "").describe()


# ------------------------------------------------------------------ local store first
def test_local_stand_in_is_used_without_probing_and_has_no_digest():
    engine = FakeEngine(settings_with(registry=closed_port()), local={"python:3.13-slim": STANDIN})
    got = ImageSource(engine).ensure("python:3.13-slim")
    assert got == ResolvedImage("python:3.13-slim", "standin", "")
    assert not any(c[0] == "pull" for c in engine.calls)


def test_a_mirror_pull_is_tagged_with_the_official_name_and_pinned(registry_double):
    mirror_ref = f"{registry_double.address}/library/python:3.13-slim"
    engine = FakeEngine(
        settings_with(registry=registry_double.address),
        remote={mirror_ref: pulled(f"{registry_double.address}/library/python")},
    )
    got = ImageSource(engine).ensure("python:3.13-slim")
    assert got == ResolvedImage("python:3.13-slim", "registry", DIGEST)
    assert ["pull", "--quiet", mirror_ref] in engine.calls
    assert "python:3.13-slim" in engine.local


def test_registry_offers_the_official_tags_and_the_store_adds_its_own(registry_double):
    engine = FakeEngine(settings_with(registry=registry_double.address), local={"python:3.8-slim": STANDIN})
    assert ImageSource(engine).offered_pythons() == ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14"]


def test_a_mirror_that_lists_its_tags_offers_only_those(registry_double):
    registry_double.handler.tags = ["3.13-slim", "3.11-slim", "3.13", "latest"]
    engine = FakeEngine(settings_with(registry=registry_double.address))
    assert ImageSource(engine).offered_pythons() == ["3.11", "3.13"]


def test_standins_source_never_probes(registry_double):
    engine = FakeEngine(
        settings_with(registry=registry_double.address, source="standins"), local={"python:3.11-slim": STANDIN}
    )
    assert ImageSource(engine).offered_pythons() == ["3.11"]


# ------------------------------------------------------------------ nothing answers
def test_auto_says_once_that_no_registry_answers_and_uses_stand_ins():
    said: list[str] = []
    engine = FakeEngine(settings_with(registry=closed_port()), local={"python:3.11-slim": STANDIN})
    for _ in range(3):
        assert ImageSource(engine, probe_timeout=1, say=said.append).offered_pythons() == ["3.11"]
    assert len(said) == 1 and "does not answer" in said[0] and "stand-ins" in said[0]


def test_empty_store_and_no_registry_is_a_clear_error_naming_the_bootstrap():
    engine = FakeEngine(settings_with(registry=closed_port()))
    src = ImageSource(engine, probe_timeout=1, say=lambda _: None)
    with pytest.raises(ImageUnavailableError) as exc:
        src.offered_pythons()
    assert "setupbot images bootstrap" in exc.value.render()
    with pytest.raises(ImageUnavailableError) as exc:
        src.ensure("python:3.13-slim")
    assert "setupbot images bootstrap" in exc.value.fix


def test_registry_source_without_an_answering_registry_names_the_setting():
    engine = FakeEngine(settings_with(registry=closed_port(), source="registry"))
    with pytest.raises(ImageUnavailableError) as exc:
        ImageSource(engine, probe_timeout=1).ensure("python:3.13-slim")
    assert "does not answer" in exc.value.what and "images.registry" in exc.value.fix


def test_a_pinned_digest_that_differs_from_the_local_image_is_not_taken_from_the_store():
    engine = FakeEngine(settings_with(source="standins"), local={"python:3.13-slim": pulled("python")})
    src = ImageSource(engine)
    assert src.ensure(f"python:3.13-slim@{DIGEST}").digest == DIGEST
    with pytest.raises(ImageUnavailableError):
        src.ensure("python:3.13-slim@sha256:" + "cd" * 32)


# ------------------------------------------------------------------ the plan
def test_make_plan_with_no_python_offered_is_a_clear_error_not_an_index_error():
    from bot.compile.plan import make_plan

    with pytest.raises(ImageUnavailableError) as exc:
        make_plan(FIXTURES / "plan-setup-py-only", load_settings(None, environ={}), available_pythons=[], resolve=False)
    assert "setupbot images bootstrap" in exc.value.fix


def test_a_registry_digest_pins_the_generated_from_line_and_reaches_plan_json():
    from bot.compile.plan import make_plan

    plan = make_plan(
        FIXTURES / "plan-setup-py-only", load_settings(None, environ={}), available_pythons=["3.13"], resolve=False
    )
    assert plan.to_json()["base_image_digest"] is None
    plan.graph.runtime.attrs.update(base_digest=DIGEST, base_origin="registry")
    first = next(line for line in plan.dockerfile.text.splitlines() if line.startswith("FROM"))
    assert first == f"FROM python:3.13-slim@{DIGEST} AS env"
    assert plan.to_json()["base_image_digest"] == DIGEST


def test_report_says_a_stand_in_has_no_digest_and_shows_a_registry_digest():
    from bot.report import render_report
    from bot.report.model import from_pipeline

    base = {"python": "3.13", "base_image": "python:3.13-slim", "test_command": ["pytest"]}
    standin = render_report(from_pipeline({**base, "base_image_origin": "standin"}))
    assert "offline stand-in" in standin and "no registry digest" in standin
    registry = render_report(from_pipeline({**base, "base_image_origin": "registry", "base_image_digest": DIGEST}))
    assert DIGEST in registry


def test_auto_with_an_answering_registry_that_lacks_the_image_says_so(registry_double):
    said: list[str] = []
    engine = FakeEngine(settings_with(registry=registry_double.address))
    with pytest.raises(ImageUnavailableError) as exc:
        ImageSource(engine, say=said.append).ensure("python:3.12-slim")
    assert "could not give it" in exc.value.what and "manifest unknown" in exc.value.what
    assert "setupbot images bootstrap" in exc.value.fix
    assert said and "cannot pull" in said[0]
