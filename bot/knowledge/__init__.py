"""The experience base: units, seed knowledge, stores, retrieval, learning.

Contract (docs/architecture.md, "Experience base")::

    store = open_store(settings.knowledge)
    retriever = Retriever(store, settings.knowledge, embedder=None, reranker=None)
    cands = retriever.retrieve(log_text, context={"python": "3.11", "os": "debian"})
    retriever.record_outcome(unit_id, "success" | "failure" | "neutral")
    learn_unit(store, log_text, atoms, provenance) -> unit id
"""

from bot.knowledge.embeddings import OpenAIEmbedder
from bot.knowledge.learning import learn_unit
from bot.knowledge.rerank import LLMReranker
from bot.knowledge.retrieval import Candidate, Retriever
from bot.knowledge.store import Store, open_store
from bot.knowledge.units import Telemetry, Unit, load_units_file, seed_units

__all__ = [
    "Candidate",
    "LLMReranker",
    "OpenAIEmbedder",
    "Retriever",
    "Store",
    "Telemetry",
    "Unit",
    "learn_unit",
    "load_units_file",
    "open_store",
    "seed_units",
]
