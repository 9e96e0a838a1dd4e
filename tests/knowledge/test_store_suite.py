"""One suite, two stores: SQLite and PostgreSQL behave the same behind the Store interface."""

from __future__ import annotations

import json
import multiprocessing
import re
from types import SimpleNamespace

import pytest

from bot.errors import KnowledgeError
from bot.knowledge import Retriever, Unit, learn_unit, open_store, seed_units
from bot.knowledge.units import COLD, GOLDEN


def make_unit(uid="demo-unit", pattern=r"frobnicate\.h: No such file", packages=("libfrob-dev",), **extra):
    data = {
        "id": uid,
        "category": "native",
        "signals": {"patterns": [pattern]},
        "advice": "The frob headers are missing; install libfrob-dev.",
        "atoms": [{"kind": "apt_install", "packages": list(packages)}],
        **extra,
    }
    return Unit.from_json(data)


def test_add_get_remove(empty_store):
    unit = make_unit()
    assert empty_store.add(unit) is True
    assert empty_store.add(unit) is False  # same id, no replace
    got = empty_store.get("demo-unit")
    assert got.patterns == unit.patterns and got.atoms == unit.atoms
    assert got.telemetry.hits == 0
    assert empty_store.count() == 1
    assert empty_store.remove("demo-unit") is True
    assert empty_store.get("demo-unit") is None
    assert empty_store.remove("demo-unit") is False


def test_replace_keeps_telemetry_and_bumps_generation(empty_store):
    empty_store.add(make_unit())
    empty_store.record("demo-unit", "success")
    gen = empty_store.generation()
    empty_store.add(make_unit(packages=("libfrob-dev", "pkg-config")), replace=True)
    got = empty_store.get("demo-unit")
    assert got.atoms[0].args["packages"] == ["libfrob-dev", "pkg-config"]
    assert got.telemetry.hits == 1 and got.telemetry.successes == 1
    assert empty_store.generation() > gen


def test_record_outcomes_and_unknown_unit(empty_store):
    empty_store.add(make_unit())
    empty_store.record("demo-unit", "success")
    empty_store.record("demo-unit", "failure")
    t = empty_store.record("demo-unit", "neutral")
    assert (t.hits, t.successes, t.failures) == (3, 1, 1)
    with pytest.raises(KnowledgeError, match="no unit"):
        empty_store.record("missing-unit", "success")
    with pytest.raises(KnowledgeError, match="unknown outcome"):
        empty_store.record("demo-unit", "maybe")


def _hammer(settings_dict, n, barrier):
    from types import SimpleNamespace

    store = open_store(SimpleNamespace(**settings_dict), seed=False)
    try:
        barrier.wait(60)  # every writer connected: start together
        for i in range(n):
            store.record("demo-unit", "success" if i % 2 == 0 else "failure")
            store.mark_offered(["demo-unit"])
    finally:
        store.close()


def test_eight_concurrent_writers_lose_no_count(store_settings):
    store = open_store(store_settings, seed=False)
    store.add(make_unit())
    n, procs = 40, 8
    ctx = multiprocessing.get_context("fork")  # each child opens its own connection
    barrier = ctx.Barrier(procs)
    workers = [ctx.Process(target=_hammer, args=(vars(store_settings), n, barrier)) for _ in range(procs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert all(w.exitcode == 0 for w in workers)
    t = store.get("demo-unit").telemetry
    assert t.hits == n * procs
    assert t.successes == n * procs // 2 and t.failures == n * procs // 2
    assert t.offered == n * procs
    store.close()


def test_seeding_is_idempotent_and_keeps_telemetry(store_settings):
    store = open_store(store_settings)
    n = store.count()
    assert n == len(seed_units()) >= 100
    store.record("native-libpq-header", "success")
    assert store.ensure_seeded() == 0  # unchanged seed: nothing rewritten
    store.close()
    again = open_store(store_settings)
    assert again.count() == n
    assert again.get("native-libpq-header").telemetry.successes == 1
    again.close()


def test_export_import_roundtrip(store_settings, tmp_path):
    src = open_store(store_settings, seed=False)
    src.add(make_unit())
    src.record("demo-unit", "success")
    exported = [u.to_json() for u in src.all()]
    src.close()
    from types import SimpleNamespace

    dst = open_store(SimpleNamespace(url="", path=str(tmp_path / "copy.sqlite")), seed=False)
    assert dst.add_many(Unit.from_json(d) for d in exported) == 1
    got = dst.get("demo-unit")
    assert got.telemetry.successes == 1 and got.to_json() == exported[0]
    dst.close()


def test_retrieval_tiers_golden_and_cold(empty_store):
    # Two units that match the same log equally; telemetry decides the order.
    empty_store.add(make_unit("unit-a", r"frobnicate\.h: No such file"))
    empty_store.add(make_unit("unit-b", r"frobnicate\.h: No such file", packages=("libfrob2-dev",)))
    log = "src/x.c:3:10: fatal error: frobnicate.h: No such file or directory"
    retriever = Retriever(empty_store)
    for _ in range(6):
        empty_store.record("unit-b", "success")
    for _ in range(6):
        empty_store.record("unit-a", "failure")
    cands = retriever.retrieve(log)
    assert [c.unit.id for c in cands] == ["unit-b", "unit-a"]
    assert cands[0].unit.telemetry.tier == GOLDEN and cands[1].unit.telemetry.tier == COLD
    assert cands[0].score > 2 * cands[1].score


def test_learning_then_similar_log_retrieves_learned_unit(seeded_store):
    r = Retriever(seeded_store)
    first_log = """Collecting quasar-ext==1.4.2
  error: subprocess-exited-with-error
      quasar/_ext.c:12:10: error: QuasarLib runtime 4.2.1 missing at /opt/quasar/lib/libquasar.so.4 (code 17)
  note: This error originates from a subprocess, and is likely not a problem with pip.
"""
    before = r.retrieve(first_log, {"python": "3.11"})
    assert not any(c.exact for c in before)  # nothing in the seed knows this failure
    fix = [{"kind": "apt_install", "packages": ["libquasar4"]}]
    uid = learn_unit(seeded_store, first_log, fix, {"repo": "org/quasar-app", "source": "llm"})
    unit = seeded_store.get(uid)
    assert unit.category == "learned" and unit.provenance[0]["repo"] == "org/quasar-app"
    assert unit.telemetry.successes == 1
    similar = """Collecting quasar-ext==1.5.0
      quasar/_ext.c:14:10: error: QuasarLib runtime 4.3.0 missing at /usr/local/quasar/lib/libquasar.so.4 (code 21)
"""
    after = r.retrieve(similar, {"python": "3.13"})
    assert after[0].unit.id == uid and after[0].exact
    assert [a.to_json() for a in after[0].atoms] == fix
    # the same repair learned again from another repository merges into that unit
    again = learn_unit(seeded_store, similar, fix, {"repo": "org/other"})
    assert again == uid
    merged = seeded_store.get(uid)
    assert [p["repo"] for p in merged.provenance] == ["org/quasar-app", "org/other"]
    assert seeded_store.count() == len(seed_units()) + 1


def test_learned_module_name_is_templated(seeded_store):
    log = "E   ModuleNotFoundError: No module named 'quuxlib_core'"
    uid = learn_unit(seeded_store, log, [{"kind": "pip_install", "packages": ["quuxlib_core"]}], {"repo": "x/y"})
    unit = seeded_store.get(uid)
    assert unit.atoms[0].args["packages"] == ["{match:1}"]
    assert unit.match("ModuleNotFoundError: No module named 'otherlib'")


def test_learned_unit_that_keeps_failing_sinks_to_cold(seeded_store):
    log = "RuntimeError: widget registry 7 unavailable at /srv/widgets/registry.db"
    uid = learn_unit(seeded_store, log, [{"kind": "set_env", "name": "WIDGETS_OFFLINE", "value": "1"}], {"repo": "a/b"})
    for _ in range(12):
        seeded_store.record(uid, "failure")
    t = seeded_store.get(uid).telemetry
    assert t.tier == COLD


def test_embeddings_are_stored_and_used(store_settings, embeddings_server):
    from bot.knowledge import OpenAIEmbedder

    store = open_store(store_settings, seed=False)
    store.add(
        make_unit(
            "unit-db", r"zzzz-never-matches-1", packages=("postgresql-client",), title="database server unreachable"
        )
    )
    store.add(make_unit("unit-img", r"zzzz-never-matches-2", packages=("libjpeg-dev",), title="image codec headers"))
    embedder = OpenAIEmbedder(embeddings_server.url, "test-embed")
    # neither signal matches and the wording shares little: the nearest by meaning alone is
    # ranked first, and offered only when min_similarity lets a neighbour by meaning alone in
    r = Retriever(store, embedder=embedder)
    assert r.candidates("could not reach the database server", {})[0].unit.id == "unit-db"
    assert r.retrieve("could not reach the database server") == []
    r = Retriever(store, SimpleNamespace(k=10, offer=3, min_similarity=0.3), embedder=embedder)
    cands = r.retrieve("could not reach the database server")
    assert cands[0].unit.id == "unit-db"
    assert store.stats()["with_embedding"] == 2
    assert embeddings_server.requests >= 2  # the units once, then the query
    n = embeddings_server.requests
    Retriever(store, embedder=embedder).retrieve("database server")
    assert embeddings_server.requests == n + 1  # units are not embedded again
    if getattr(store, "has_pgvector", False):
        near = store.nearest(embedder.embed(["database server"])[0], 1)
        assert near[0][0] == "unit-db"
    store.close()


def test_invalid_unit_refused_with_reason():
    with pytest.raises(KnowledgeError, match=re.escape("invalid atom")):
        make_unit(packages=("libfoo-dev; rm -rf /",))


def test_export_is_json_serialisable(seeded_store):
    text = json.dumps([u.to_json() for u in seeded_store.all()])
    assert len(json.loads(text)) == seeded_store.count()


def test_a_corrupt_document_is_skipped_not_fatal(empty_store):
    empty_store.add(make_unit())
    empty_store._exec(empty_store._sql("INSERT INTO units (id, doc) VALUES (?, ?)"), ("broken-unit", "{not json"))
    assert [u.id for u in empty_store.all()] == ["demo-unit"]
