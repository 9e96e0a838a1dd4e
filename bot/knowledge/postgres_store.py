"""The shared store: a PostgreSQL database (psycopg 3) for an organisation whose repositories
should all learn from each other's runs.

Every statement runs in autocommit (one statement = one atomic change; ``hits = hits + 1`` takes
the row lock), multi-statement changes in one transaction. When the server has the pgvector
extension, unit embeddings are mirrored into a ``vector`` column and nearest units are found in
the database; otherwise the retriever computes cosine similarity itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import psycopg

from bot.errors import KnowledgeError
from bot.knowledge.store import Store

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS units (id TEXT PRIMARY KEY, doc TEXT NOT NULL, embedding TEXT)",
    """CREATE TABLE IF NOT EXISTS telemetry (
        unit_id TEXT PRIMARY KEY,
        hits BIGINT NOT NULL DEFAULT 0, successes BIGINT NOT NULL DEFAULT 0,
        failures BIGINT NOT NULL DEFAULT 0, offered BIGINT NOT NULL DEFAULT 0)""",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL DEFAULT 0, text_value TEXT)",
    "INSERT INTO meta (key, value) VALUES ('generation', 0) ON CONFLICT DO NOTHING",
    "INSERT INTO meta (key, value, text_value) VALUES ('seed', 0, '') ON CONFLICT DO NOTHING",
]
# Serialises schema creation when several runs open a fresh database at once.
_SCHEMA_LOCK = 0x5E7B07


class PostgresStore(Store):
    kind = "postgres"
    placeholder = "%s"

    shared = True  # many repositories' runs read it: LLM-taught units are quarantined

    def __init__(self, url: str) -> None:
        self._safe_url = url.split("@")[-1]
        try:
            self._conn = psycopg.connect(url, autocommit=True, connect_timeout=15)
        except psycopg.Error as exc:
            raise KnowledgeError(
                f"cannot connect to the knowledge database at {self._safe_url}: {exc}",
                "Check knowledge.url and that the server accepts connections.",
            ) from exc
        with self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for stmt in SCHEMA:
                self._conn.execute(stmt)
        self.has_pgvector = self._setup_pgvector()

    def _setup_pgvector(self) -> bool:
        try:
            with self._conn.transaction():
                self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                installed = self._conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
                if not installed:
                    self._conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                self._conn.execute("CREATE TABLE IF NOT EXISTS unit_vectors (unit_id TEXT PRIMARY KEY, vec vector)")
            return True
        except psycopg.Error:
            # No extension on this server (or no right to create it): in-process cosine instead.
            return False

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        try:
            cur = self._conn.execute(sql, tuple(params))
            return cur.fetchall() if cur.description else []
        except psycopg.Error as exc:
            raise KnowledgeError(f"knowledge database {self._safe_url}: {exc}", "") from exc

    def _exec_many(self, statements: list[tuple[str, Sequence[Any]]]) -> None:
        try:
            with self._conn.transaction():
                with self._conn.cursor() as cur:
                    for sql, params in statements:
                        cur.execute(sql, tuple(params))
        except psycopg.Error as exc:
            raise KnowledgeError(f"knowledge database {self._safe_url}: {exc}", "") from exc

    def set_embeddings(self, vectors: dict[str, Sequence[float]]) -> None:
        super().set_embeddings(vectors)
        if self.has_pgvector and vectors:
            self._exec_many(
                [
                    (
                        "INSERT INTO unit_vectors (unit_id, vec) VALUES (%s, %s::vector) "
                        "ON CONFLICT (unit_id) DO UPDATE SET vec = excluded.vec",
                        (uid, json.dumps([float(x) for x in v])),
                    )
                    for uid, v in vectors.items()
                ]
            )

    def remove(self, unit_id: str) -> bool:
        removed = super().remove(unit_id)
        if removed and self.has_pgvector:
            self._exec("DELETE FROM unit_vectors WHERE unit_id = %s", (unit_id,))
        return removed

    def nearest(self, vector: Sequence[float], k: int) -> list[tuple[str, float]] | None:
        if not self.has_pgvector:
            return None
        q = json.dumps([float(x) for x in vector])
        rows = self._exec(
            "SELECT unit_id, 1 - (vec <=> %s::vector) FROM unit_vectors "
            "WHERE vector_dims(vec) = %s ORDER BY vec <=> %s::vector LIMIT %s",
            (q, len(vector), q, k),
        )
        return [(r[0], float(r[1])) for r in rows]

    def close(self) -> None:
        self._conn.close()

    def describe(self) -> str:
        return f"postgres:{self._safe_url}" + (" (pgvector)" if self.has_pgvector else "")
