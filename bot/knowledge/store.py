"""Experience stores behind one interface: an embedded SQLite file (default) or a shared
PostgreSQL database (``knowledge.url``), so every repository's runs in an organisation can teach
every other.

Units live as JSON documents; telemetry lives in its own table so that rewriting a unit (a merge,
a seed update) never loses counts, and every telemetry change is one atomic UPDATE
(``hits = hits + 1``) so concurrent workflow runs lose no count.

A store's ``generation`` changes whenever a unit is added, replaced or removed; the retriever
rebuilds its in-memory indexes only then.
"""

from __future__ import annotations

import json
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bot.errors import KnowledgeError
from bot.knowledge.units import Telemetry, Unit, seed_digest, seed_units

OUTCOMES = ("success", "failure", "neutral")
log = logging.getLogger(__name__)


class Store(ABC):
    """The interface both stores implement. Placeholders are written ``?`` and translated."""

    kind = "abstract"
    placeholder = "?"
    shared = False  # a store other operators' runs read (PostgreSQL) quarantines LLM-taught units

    # -- plumbing each backend provides ------------------------------------------------------
    @abstractmethod
    def _exec(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Run one statement atomically; return the rows (empty for DML)."""

    @abstractmethod
    def _exec_many(self, statements: list[tuple[str, Sequence[Any]]]) -> None:
        """Run several statements in one transaction."""

    @abstractmethod
    def close(self) -> None: ...

    def _sql(self, sql: str) -> str:
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)

    # -- units -------------------------------------------------------------------------------
    @staticmethod
    def _row(unit: Unit) -> tuple[str, str, str | None]:
        """(id, doc, embedding) as stored: telemetry lives in its own table."""
        emb = json.dumps(list(unit.embedding)) if unit.embedding is not None else None
        return unit.id, json.dumps(unit.to_json(with_telemetry=False), sort_keys=True), emb

    def add(self, unit: Unit, *, replace: bool = False) -> bool:
        """Store a validated unit. Returns False when the id exists and ``replace`` is false."""
        verb = (
            (
                "ON CONFLICT (id) DO UPDATE SET doc = excluded.doc, "
                "embedding = COALESCE(excluded.embedding, units.embedding)"
            )
            if replace
            else "ON CONFLICT (id) DO NOTHING"
        )
        rows = self._exec(
            self._sql(f"INSERT INTO units (id, doc, embedding) VALUES (?, ?, ?) {verb} RETURNING id"), self._row(unit)
        )
        if not rows:
            return False
        t = unit.telemetry
        self._exec_many(
            [
                (
                    self._sql(
                        "INSERT INTO telemetry (unit_id, hits, successes, failures, offered) VALUES (?, ?, ?, ?, ?) "
                        "ON CONFLICT (unit_id) DO NOTHING"
                    ),
                    (unit.id, t.hits, t.successes, t.failures, t.offered),
                ),
                (self._sql("UPDATE meta SET value = value + 1 WHERE key = 'generation'"), ()),
            ]
        )
        return True

    def add_many(self, units: Iterable[Unit], *, replace: bool = False) -> int:
        """Bulk insert in one transaction (import, seeding, benchmarks)."""
        units = list(units)
        if not units:
            return 0
        verb = "ON CONFLICT (id) DO UPDATE SET doc = excluded.doc" if replace else "ON CONFLICT (id) DO NOTHING"
        stmts: list[tuple[str, Sequence[Any]]] = []
        for u in units:
            stmts.append((self._sql(f"INSERT INTO units (id, doc, embedding) VALUES (?, ?, ?) {verb}"), self._row(u)))
            t = u.telemetry
            stmts.append(
                (
                    self._sql(
                        "INSERT INTO telemetry (unit_id, hits, successes, failures, offered) "
                        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (unit_id) DO NOTHING"
                    ),
                    (u.id, t.hits, t.successes, t.failures, t.offered),
                )
            )
        stmts.append((self._sql("UPDATE meta SET value = value + 1 WHERE key = 'generation'"), ()))
        before = self.count()
        self._exec_many(stmts)
        return self.count() - before if not replace else len(units)

    def remove(self, unit_id: str) -> bool:
        rows = self._exec(self._sql("DELETE FROM units WHERE id = ? RETURNING id"), (unit_id,))
        if rows:
            self._exec_many(
                [
                    (self._sql("DELETE FROM telemetry WHERE unit_id = ?"), (unit_id,)),
                    (self._sql("UPDATE meta SET value = value + 1 WHERE key = 'generation'"), ()),
                ]
            )
        return bool(rows)

    def _unit_from_row(self, doc: Any, emb: Any, hits, successes, failures, offered) -> Unit:
        data = doc if isinstance(doc, dict) else json.loads(doc)
        data["telemetry"] = {
            "hits": hits or 0,
            "successes": successes or 0,
            "failures": failures or 0,
            "offered": offered or 0,
        }
        if emb:
            data["embedding"] = emb if isinstance(emb, list) else json.loads(emb)
        # validated when it was stored; re-checking 10,000 documents on every index build is
        # what made loading slow
        return Unit.from_json(data, validate=False)

    _SELECT = (
        "SELECT u.doc, u.embedding, t.hits, t.successes, t.failures, t.offered "
        "FROM units u LEFT JOIN telemetry t ON t.unit_id = u.id"
    )

    def get(self, unit_id: str) -> Unit | None:
        rows = self._exec(self._sql(self._SELECT + " WHERE u.id = ?"), (unit_id,))
        return self._unit_from_row(*rows[0]) if rows else None

    def all(self) -> list[Unit]:
        units = []
        for row in self._exec(self._SELECT + " ORDER BY u.id"):
            try:
                units.append(self._unit_from_row(*row))
            except (KnowledgeError, KeyError, TypeError, ValueError) as exc:
                # a document edited behind the store's back: skip it, keep the rest usable
                log.warning("knowledge store: skipping an unreadable unit: %s", exc)
        return units

    def count(self) -> int:
        return int(self._exec("SELECT COUNT(*) FROM units")[0][0])

    def generation(self) -> int:
        return int(self._exec("SELECT value FROM meta WHERE key = 'generation'")[0][0])

    # -- telemetry ---------------------------------------------------------------------------
    def record(self, unit_id: str, outcome: str) -> Telemetry:
        """Count one judged use of a unit; a single atomic UPDATE, safe under concurrent writers."""
        if outcome not in OUTCOMES:
            raise KnowledgeError(f"unknown outcome {outcome!r}", f"Use one of {', '.join(OUTCOMES)}.")
        s, f = int(outcome == "success"), int(outcome == "failure")
        update = self._sql(
            "UPDATE telemetry SET hits = hits + 1, successes = successes + ?, "
            "failures = failures + ? WHERE unit_id = ? RETURNING hits, successes, failures, offered"
        )
        rows = self._exec(update, (s, f, unit_id))
        if not rows and self._exec(self._sql("SELECT 1 FROM units WHERE id = ?"), (unit_id,)):
            # a unit whose telemetry row was never written (a writer stopped between the two
            # inserts of add): start its counts now
            self._exec(
                self._sql("INSERT INTO telemetry (unit_id) VALUES (?) ON CONFLICT (unit_id) DO NOTHING"), (unit_id,)
            )
            rows = self._exec(update, (s, f, unit_id))
        if not rows:
            raise KnowledgeError(f"no unit {unit_id!r} in the store", "List units with `setupbot knowledge list`.")
        return Telemetry(*rows[0])

    def mark_offered(self, unit_ids: Sequence[str]) -> None:
        if unit_ids:
            self._exec_many(
                [(self._sql("UPDATE telemetry SET offered = offered + 1 WHERE unit_id = ?"), (u,)) for u in unit_ids]
            )

    def telemetry(self, unit_ids: Sequence[str]) -> dict[str, Telemetry]:
        if not unit_ids:
            return {}
        marks = ", ".join([self.placeholder] * len(unit_ids))
        rows = self._exec(
            f"SELECT unit_id, hits, successes, failures, offered FROM telemetry WHERE unit_id IN ({marks})",
            list(unit_ids),
        )
        return {r[0]: Telemetry(*r[1:]) for r in rows}

    # -- embeddings --------------------------------------------------------------------------
    def set_embeddings(self, vectors: dict[str, Sequence[float]]) -> None:
        self._exec_many(
            [
                (self._sql("UPDATE units SET embedding = ? WHERE id = ?"), (json.dumps(list(v)), uid))
                for uid, v in vectors.items()
            ]
        )

    def nearest(self, vector: Sequence[float], k: int) -> list[tuple[str, float]] | None:
        """Nearest units by cosine similarity in the database, or None when the store cannot
        (the retriever then computes cosine in-process)."""
        return None

    # -- seeding -----------------------------------------------------------------------------
    def approve(self, unit_id: str, by: str = "") -> bool:
        """Release a quarantined unit to retrieval; False when it is not quarantined."""
        import dataclasses

        unit = self.get(unit_id)
        if unit is None or unit.category != "quarantined":
            return False
        note = {"approved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "approved_by": by or "operator"}
        self.add(
            dataclasses.replace(unit, category="learned", provenance=tuple(unit.provenance) + (note,)), replace=True
        )
        return True

    def ensure_seeded(self) -> int:
        """Load or refresh the packaged seed units when they changed; telemetry is kept."""
        digest = seed_digest()
        rows = self._exec("SELECT text_value FROM meta WHERE key = 'seed'")
        if rows and rows[0][0] == digest:
            return 0
        units = seed_units()
        self.add_many(units, replace=True)
        self._exec(self._sql("UPDATE meta SET text_value = ? WHERE key = 'seed'"), (digest,))
        return len(units)

    def stats(self) -> dict[str, Any]:
        units = self.all()
        by_cat: dict[str, int] = {}
        tiers: dict[str, int] = {"golden": 0, "normal": 0, "cold": 0}
        for u in units:
            by_cat[u.category] = by_cat.get(u.category, 0) + 1
            tiers[u.telemetry.tier_name] += 1
        return {
            "store": self.describe(),
            "units": len(units),
            "by_category": by_cat,
            "tiers": tiers,
            "hits": sum(u.telemetry.hits for u in units),
            "successes": sum(u.telemetry.successes for u in units),
            "failures": sum(u.telemetry.failures for u in units),
            "with_embedding": sum(1 for u in units if u.embedding is not None),
        }

    def describe(self) -> str:
        return self.kind

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def default_sqlite_path() -> Path:
    return Path.home() / ".cache" / "setupbot" / "knowledge.sqlite"


def open_store(knowledge_settings: Any = None, *, seed: bool = True) -> Store:
    """SQLite by default (``knowledge.path`` or ~/.cache/setupbot/knowledge.sqlite), PostgreSQL
    when ``knowledge.url`` is a postgres URL. Seeded with the packaged units unless ``seed`` is
    false."""
    url = getattr(knowledge_settings, "url", "") or ""
    path = getattr(knowledge_settings, "path", "") or ""
    if url:
        if not url.startswith(("postgresql://", "postgres://")):
            raise KnowledgeError(
                f"knowledge.url {url.split('@')[-1]!r} is not a PostgreSQL URL",
                "Use postgresql://user:password@host:port/db, or leave it empty for SQLite.",
            )
        from bot.knowledge.postgres_store import (
            PostgresStore,
        )  # builds on Store (a cycle at import); psycopg loads only for a shared store

        store: Store = PostgresStore(url)
    else:
        from bot.knowledge.sqlite_store import SQLiteStore  # builds on Store: a cycle at import

        store = SQLiteStore(Path(path).expanduser() if path else default_sqlite_path())
    if seed:
        store.ensure_seeded()
    return store
