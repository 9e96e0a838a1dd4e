"""A new upstream release does not change a locked image (issue 16).

A local package index (a directory served over HTTP on 127.0.0.1) publishes tinypkg 1.0; the
environment is built, frozen and locked. Then the index gains tinypkg 1.1. The unlocked
Dockerfile now installs 1.1 (the control: the index really serves the new release), while the
locked one still installs exactly the set that was proven.
"""

from __future__ import annotations

import hashlib

import pytest
from doubles.package_index import publish, serve

from bot.compile import compile_dockerfile
from bot.compile.plan import make_plan
from bot.config import load_settings
from bot.graph.lock import apply_lock, parse_lock
from bot.graph.mapping import Registry
from bot.graph.model import Node
from bot.graph.resolve import uv_compile
from bot.graph.specs import install_specs
from bot.loop.lock import installed_set, lock_environment


@pytest.fixture
def local_index(tmp_path):
    index = tmp_path / "index"
    publish(index, "tinypkg", "1.0")
    with serve(index) as (url, _):
        yield index, url


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
