"""The learning loop end to end: a failure the seed knowledge does not know is fixed once by the
LLM (a local double), survives clean replay and becomes a unit; a second repository with a
similar failure is then fixed from the experience base alone, with no LLM call and fewer steps.
Runs against both stores (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from doubles.llm_server import ScriptedLLMServer  # noqa: E402
from doubles.loop_world import FakeEngine, Need, World, fake_compile, fake_plan_maker  # noqa: E402

from bot.config import load_settings  # noqa: E402
from bot.knowledge import Retriever, open_store  # noqa: E402
from bot.loop.llm import LLMPlanner  # noqa: E402
from bot.loop.orchestrator import run_setup  # noqa: E402

# A shared library the seed knowledge has no unit for, provided here by a wheel. Diagnosis
# classifies it (missing shared library); no rule can guess where it comes from.
FIRST = """tests/test_render.py:3: in <module>
    import quasar
/usr/local/lib/python3.11/site-packages/quasar/__init__.py:12: in <module>
    from ._core import Engine
E   ImportError: libquasar.so.4: cannot open shared object file: No such file or directory
"""
SIMILAR = """tests/unit/test_scene.py:7: in <module>
    from quasar.scene import Scene
/usr/local/lib/python3.11/site-packages/quasar/scene.py:4: in <module>
    from quasar._core import Graph
E   ImportError: libquasar.so.4: cannot open shared object file: No such file or directory
"""
FIX = ["python", "-m", "pip", "install", "quasar-runtime-libs"]


def run_once(tmp_path, name, store, server, need_output):
    repo = tmp_path / name
    repo.mkdir()
    settings = load_settings(
        repo,
        environ={},
        overrides={
            "llm": {
                "base_url": server.base_url,
                "model": "scripted-model",
                "api_key": "sk-test",
                "timeout": 5,
                "retries": 1,
            }
        },
    )
    planner = LLMPlanner(settings.llm, secrets=settings.secrets(), sleep=lambda s: None)
    world = World([Need("pip:quasar-runtime-libs", need_output)])
    return run_setup(
        repo,
        settings,
        FakeEngine(world),
        store,
        planner,
        make_plan=fake_plan_maker(),
        compile_dockerfile=fake_compile,
        available_pythons=["3.11"],
    )


def test_fix_learned_once_is_retrieved_for_a_similar_repository(store_settings, tmp_path):
    store = open_store(store_settings)
    seed_count = store.count()
    reply = json.dumps(
        {"action": "pip_install", "packages": FIX[4:], "why": "libquasar ships in the quasar-runtime-libs wheel"}
    )
    with ScriptedLLMServer([reply]) as server:
        first = run_once(tmp_path, "app-one", store, server, FIRST)
        first_calls = len(server.requests)
    assert first.status == "success", first.remaining
    assert first_calls == 1
    learned = [s.detail["unit"] for s in first.trajectory.steps if s.action == "learn"]
    assert len(learned) == 1 and store.count() == seed_count + 1
    unit = store.get(learned[0])
    assert unit.provenance[0]["repo"] == "app-one"
    if store.shared:
        # taught by an LLM into a shared store: quarantined, never offered, until approved
        assert unit.category == "quarantined"
        assert not any(c.unit.id == learned[0] for c in Retriever(store, store_settings).retrieve(SIMILAR, {}))
        assert store.approve(learned[0]) and not store.approve(learned[0])
        assert store.get(learned[0]).category == "learned"
    else:
        assert unit.category == "learned"

    with ScriptedLLMServer([]) as server:  # the model is not needed the second time
        second = run_once(tmp_path, "app-two", store, server, SIMILAR)
        assert server.requests == []
    assert second.status == "success", second.remaining
    assert [r.candidate.source for r in second.repairs] == ["knowledge"]
    assert second.repairs[0].candidate.unit_id == learned[0]
    assert len(second.trajectory.steps) < len(first.trajectory.steps), (
        len(first.trajectory.steps),
        len(second.trajectory.steps),
    )
    assert store.get(learned[0]).telemetry.successes >= 2
    store.close()


def test_a_unit_the_llm_taught_a_shared_store_waits_for_approval(tmp_path, capsys):
    """P2: what an LLM taught is never run for another repository unseen. The SQLite store here
    plays a shared one (the PostgreSQL store is shared by definition)."""
    from bot.cli import main

    path = tmp_path / "shared.sqlite"
    settings = SimpleNamespace(url="", path=str(path), k=10, offer=3)
    store = open_store(settings)
    store.shared = True
    reply = json.dumps({"action": "pip_install", "packages": ["quasar-runtime-libs"], "why": "the wheel ships it"})
    with ScriptedLLMServer([reply]) as server:
        first = run_once(tmp_path, "app-one", store, server, FIRST)
    assert first.status == "success", first.remaining
    uid = next(s.detail["unit"] for s in first.trajectory.steps if s.action == "learn")
    assert store.get(uid).category == "quarantined"
    # the second repository does not get it: it asks the LLM again (which has nothing to say)
    with ScriptedLLMServer([json.dumps({"action": "finish", "why": "no idea"})]) as server:
        second = run_once(tmp_path, "app-two", store, server, SIMILAR)
        assert len(server.requests) == 1
    assert second.status == "unresolved" and not second.repairs
    store.close()

    assert main(["knowledge", "--store", str(path), "list", "--category", "quarantined"]) == 0
    assert uid in capsys.readouterr().out
    assert main(["knowledge", "--store", str(path), "approve", uid]) == 0
    assert main(["knowledge", "--store", str(path), "approve", uid]) != 0  # not quarantined any more
    store = open_store(settings)
    assert store.get(uid).category == "learned" and "approved_at" in store.get(uid).provenance[-1]
    with ScriptedLLMServer([]) as server:
        third = run_once(tmp_path, "app-three", store, server, SIMILAR)
        assert server.requests == []
    assert third.status == "success" and third.repairs[0].candidate.unit_id == uid
    store.close()
