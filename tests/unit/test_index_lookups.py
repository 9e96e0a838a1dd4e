"""Name and hash look-ups go to the index pip uses on this host, over its simple API: a local
index served over HTTP on 127.0.0.1 answers both when it is the configured one."""

from __future__ import annotations

import hashlib
import os

from doubles.package_index import publish, serve

from bot.graph.mapping import Registry
from bot.loop import lock as vlock


def test_the_configured_index_answers_existence_and_hashes(tmp_path, monkeypatch):
    index = tmp_path / "index"
    publish(index, "tiny", "1.0")
    publish(index, "tiny", "1.1")
    wheel = index / "simple" / "tiny" / "tiny-1.0-py3-none-any.whl"
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for var in ("UV_INDEX_URL", "UV_DEFAULT_INDEX"):
        monkeypatch.delenv(var, raising=False)
    with serve(index) as (url, requests):
        monkeypatch.setenv("PIP_INDEX_URL", url)
        registry = Registry(cache_dir=tmp_path / "cache")
        assert registry.exists("Tiny") is True
        assert registry.exists("absent-dist") is False
        assert vlock.index_hashes("tiny", "1.0") == ["sha256:" + hashlib.sha256(wheel.read_bytes()).hexdigest()]
        assert vlock.index_hashes("tiny", "2.0") == []
        assert requests[:2] == ["/simple/tiny/", "/simple/absent-dist/"]
    # the answers are kept: asked again with the index gone, the registry still knows them
    assert Registry(cache_dir=tmp_path / "cache").exists("tiny") is True
