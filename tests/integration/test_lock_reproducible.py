"""A new upstream release does not change a locked image (issue 16).

A local package index (a directory served over HTTP on 127.0.0.1) publishes tinypkg 1.0; the
environment is built, frozen and locked. Then the index gains tinypkg 1.1. The unlocked
Dockerfile now installs 1.1 (the control: the index really serves the new release), while the
locked one still installs exactly the set that was proven.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import threading
import zipfile
from pathlib import Path

import pytest

from bot.compile import compile_dockerfile
from bot.compile.plan import make_plan
from bot.config import load_settings
from bot.graph.lock import apply_lock, parse_lock
from bot.graph.mapping import Registry
from bot.graph.model import Node
from bot.graph.resolve import uv_compile
from bot.graph.specs import install_specs
from bot.loop.lock import installed_set, lock_environment


def build_wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel, written by hand (what a build backend would produce)."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f'__version__ = "{version}"\n',
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: setupbot-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(zipfile.ZipInfo(path, (2024, 1, 1, 0, 0, 0)), text)
    return wheel


def publish(index: Path, name: str, version: str) -> None:
    """Add a release and rewrite the PEP 503 page, each link with its #sha256= fragment."""
    folder = index / "simple" / name
    folder.mkdir(parents=True, exist_ok=True)
    build_wheel(folder, name, version)
    links = "".join(
        f'<a href="{w.name}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{w.name}</a>\n'
        for w in sorted(folder.glob("*.whl"))
    )
    (folder / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    (index / "simple" / "index.html").write_text(f'<a href="{name}/">{name}</a>\n')


@pytest.fixture
def local_index(tmp_path):
    index = tmp_path / "index"
    publish(index, "tinypkg", "1.0")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(index))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield index, f"http://127.0.0.1:{server.server_address[1]}/simple"
    server.shutdown()
    server.server_close()


@pytest.mark.extended
def test_a_newer_upstream_release_does_not_change_the_locked_image(tmp_path, local_index, host_engine):
    index, url = local_index
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "requirements.txt").write_text("tinypkg>=1.0\n")
    (repo / "tests" / "test_tiny.py").write_text("import tinypkg\n\ndef test_v():\n    assert tinypkg.__version__\n")
    settings = load_settings(repo)
    g = make_plan(repo, settings, available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False)).graph
    # the image's pip reads the same index; pytest is not on it and not needed to compare sets
    g.nodes["tool:pytest"].action = None
    for var, value in (("PIP_INDEX_URL", url), ("PIP_TRUSTED_HOST", "127.0.0.1")):
        g.add(
            Node(f"config:env:{var}", "CONFIG", var, "SATISFIED", action="env", attrs={"kind": "env", "value": value})
        )
    assert uv_compile(install_specs(g), "3.11", index_url=url).pins == {"tinypkg": "1.0"}

    replay_tag = f"setupbot-loop-{host_engine.run_id}:replay-1"
    built = host_engine.build(repo, compile_dockerfile(g).text, replay_tag, no_cache=True)
    assert built.ok, built.log[-3000:]

    out = lock_environment(host_engine, repo, g, replay_tag=replay_tag, output_dir=".devcontainer", index_url=url)
    assert out.status == "locked", out.reason
    lock = parse_lock((repo / ".devcontainer" / "requirements.lock").read_text())
    assert lock.pins == {"tinypkg": "1.0"} and lock.hashed
    wheel_1_0 = index / "simple" / "tinypkg" / "tinypkg-1.0-py3-none-any.whl"
    assert lock.entries[0].hashes == ["sha256:" + hashlib.sha256(wheel_1_0.read_bytes()).hexdigest()]
    first = installed_set(host_engine, out.tag)

    publish(index, "tinypkg", "1.1")

    # control: the ranges now give the new release
    unlocked_tag = f"setupbot-loop-{host_engine.run_id}:unlocked"
    built = host_engine.build(repo, compile_dockerfile(g).text, unlocked_tag, no_cache=True)
    assert built.ok, built.log[-3000:]
    assert installed_set(host_engine, unlocked_tag).dists["tinypkg"] == "1.1"

    # the lock: the same set as before the release
    apply_lock(g, out.lock, out.file, source="frozen from the clean replay", apt_versions=out.apt_versions)
    again_tag = f"setupbot-loop-{host_engine.run_id}:locked-again"
    built = host_engine.build(repo, compile_dockerfile(g).text, again_tag, no_cache=True)
    assert built.ok, built.log[-3000:]
    again = installed_set(host_engine, again_tag)
    assert again.dists["tinypkg"] == "1.0"
    assert again.dists == first.dists
