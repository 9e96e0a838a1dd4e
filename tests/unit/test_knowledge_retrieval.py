"""Retrieval details on a small store: k and offer, rerank hook, embeddings fallback, latency path."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bot.errors import KnowledgeError
from bot.knowledge import OpenAIEmbedder, Retriever, Unit, open_store


def unit(uid, pattern, pkg, title=""):
    return Unit.from_json(
        {
            "id": uid,
            "category": "native",
            "title": title,
            "signals": {"patterns": [pattern]},
            "advice": f"Install {pkg} to provide what the build is missing.",
            "atoms": [{"kind": "apt_install", "packages": [pkg]}],
        }
    )


@pytest.fixture
def store(tmp_path):
    s = open_store(SimpleNamespace(url="", path=str(tmp_path / "k.sqlite")), seed=False)
    for i in range(20):
        s.add(unit(f"unit-{i:02d}", rf"widget{i}\.h: No such file", f"libwidget{i}-dev", f"widget {i} headers"))
    yield s
    s.close()


def test_offer_and_k_settings(store):
    # min_similarity 0 offers neighbours by wording too, so the offer cap is what limits
    r = Retriever(store, SimpleNamespace(k=5, offer=2, min_similarity=0))
    cands = r.retrieve("fatal error: widget3.h: No such file or directory")
    assert len(cands) == 2 and cands[0].unit.id == "unit-03" and cands[0].exact
    # by default only the match is offered: a neighbour by wording alone is no evidence of a fix
    assert [
        c.unit.id
        for c in Retriever(store, SimpleNamespace(k=5, offer=2)).retrieve(
            "fatal error: widget3.h: No such file or directory"
        )
    ] == ["unit-03"]
    assert len(r.candidates("fatal error: widget3.h: No such file or directory", {})) == 5
    assert store.get("unit-03").telemetry.offered == 2  # once per retrieve


def test_colour_codes_do_not_split_a_signal(store):
    # the legacy builder colours a step's stderr mid-line
    cands = Retriever(store).retrieve("fatal error: widget3.h\x1b[0m\x1b[91m: No such file or directory")
    assert cands[0].unit.id == "unit-03" and cands[0].exact


def test_lexical_only_when_no_signal_matches(store):
    """Wording alone ranks the neighbour, at a similarity of at most 0.5 (the match list is
    empty): not offered under the default min_similarity (0.6), offered when lowered."""
    log = "the widget7 headers are not installed"
    near = Retriever(store).candidates(log, {})
    assert near[0].unit.id == "unit-07" and not near[0].exact and 0 < near[0].similarity <= 0.5
    assert Retriever(store).retrieve(log) == []
    cands = Retriever(store, SimpleNamespace(k=10, offer=3, min_similarity=0.4)).retrieve(log)
    assert cands[0].unit.id == "unit-07" and not cands[0].exact


def test_reranker_hook_reorders_and_failures_fall_back(store):
    def reverse(log, cands):
        return list(reversed(cands))

    log = "fatal error: widget3.h: No such file or directory; widget 5 headers"
    plain = Retriever(store).candidates(log, {})
    everything = SimpleNamespace(k=10, offer=3, min_similarity=0)  # neighbours too, for the reranker
    reranked = Retriever(store, reranker=reverse, settings=everything).retrieve(log)
    assert reranked[0].unit.id == plain[-1].unit.id

    def broken(log, cands):
        raise RuntimeError("LLM timed out")

    assert Retriever(store, reranker=broken).retrieve(log)[0].unit.id == "unit-03"


def test_embedding_outage_keeps_lexical_retrieval(store):
    from knowledge.embeddings_double import EmbeddingsDouble

    with EmbeddingsDouble(fail=True) as server:
        r = Retriever(store, embedder=OpenAIEmbedder(server.url, "m"))
        cands = r.retrieve("fatal error: widget9.h: No such file or directory")
        assert cands[0].unit.id == "unit-09"
        assert server.requests >= 1
        with pytest.raises(KnowledgeError, match="embeddings request"):
            OpenAIEmbedder(server.url, "m").embed(["x"])


def test_embedder_from_settings():
    s = SimpleNamespace(
        knowledge=SimpleNamespace(embeddings_model=""), llm=SimpleNamespace(base_url="http://x", api_key="", timeout=5)
    )
    assert OpenAIEmbedder.from_settings(s) is None
    s.knowledge.embeddings_model = "text-embed"
    assert OpenAIEmbedder.from_settings(s).url == "http://x/embeddings"


def test_new_units_are_seen_without_a_new_retriever(store):
    r = Retriever(store)
    assert not any(c.exact for c in r.retrieve("gizmo.h: No such file or directory"))
    store.add(unit("unit-gizmo", r"gizmo\.h: No such file", "libgizmo-dev"))
    assert r.retrieve("gizmo.h: No such file or directory")[0].unit.id == "unit-gizmo"


def test_regex_prefilter_never_hides_a_matching_unit(tmp_path):
    """The word index only skips regexes that cannot match: on every labelled log the units found
    through it are exactly the units whose patterns match when all are tried."""
    import json
    from pathlib import Path

    logs = Path(__file__).resolve().parents[1] / "fixtures" / "failure-logs"
    store = open_store(SimpleNamespace(url="", path=str(tmp_path / "k.sqlite")))
    idx = Retriever(store).index()
    for name in json.loads((logs / "index.json").read_text()):
        text = (logs / name).read_text()
        fast = {idx.units[i].id for i, _ in idx.exact(text)}
        brute = {u.id for u in idx.units if u.match(text)}
        assert fast == brute, name
    store.close()


def test_record_repairs_a_missing_telemetry_row(tmp_path):
    s = open_store(SimpleNamespace(url="", path=str(tmp_path / "k.sqlite")), seed=False)
    s.add(unit("lonely", r"lonely\.h: No such file", "liblonely-dev"))
    s._exec("DELETE FROM telemetry WHERE unit_id = ?", ("lonely",))
    assert s.record("lonely", "success").successes == 1
    s.close()


def test_llm_reranker_against_a_local_chat_double(store):
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from doubles.llm_server import ScriptedLLMServer

    from bot.knowledge.rerank import LLMReranker

    log = "fatal error: widget3.h: No such file or directory; widget5 widget7 headers; token ghp_SECRETSECRET123"
    reply = json.dumps({"order": ["unit-07", "unit-99-not-offered", "unit-05"]})
    from bot.redact import global_redactor

    global_redactor().add("ghp_SECRETSECRET123")
    with ScriptedLLMServer([reply, "no json here", {"status": 500}]) as server:
        rr = LLMReranker(server.base_url, "scripted-model")
        r = Retriever(store, SimpleNamespace(k=10, offer=3, min_similarity=0), reranker=rr)
        ids = [c.unit.id for c in r.retrieve(log)]
        assert ids[:2] == ["unit-07", "unit-05"]  # the model's order, unknown id dropped
        assert "ghp_SECRETSECRET123" not in json.dumps(server.requests)
        assert "UNTRUSTED FAILURE OUTPUT" in server.requests[0]["messages"][1]["content"]
        # a reply without JSON, then a server error: the deterministic order stands
        assert r.retrieve(log)[0].unit.id == "unit-03"
        assert r.retrieve(log)[0].unit.id == "unit-03"
    assert rr.calls == 3


def test_huge_and_binary_logs_are_bounded(store):
    import time

    noise = "  Downloading something-1.0.tar.gz (1.2 MB)\n" * 150_000 + "\x00\xff garbage \x1b[31m\n" * 1000
    log = noise + "fatal error: widget4.h: No such file or directory\n"
    assert len(log) > 5_000_000
    t = time.perf_counter()
    cands = Retriever(store).retrieve(log)
    assert time.perf_counter() - t < 5
    assert cands[0].unit.id == "unit-04"
    assert Retriever(store).retrieve("") == []
