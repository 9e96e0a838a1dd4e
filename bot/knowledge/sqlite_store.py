"""The default store: one SQLite file, which a workflow can persist with a cache.

Concurrency: WAL journal, a generous busy timeout, autocommit for single statements (each is
atomic) and ``BEGIN IMMEDIATE`` for multi-statement changes, so several processes can update
telemetry at once without losing a count.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot.errors import KnowledgeError
from bot.knowledge.store import Store

SCHEMA = """
CREATE TABLE IF NOT EXISTS units (id TEXT PRIMARY KEY, doc TEXT NOT NULL, embedding TEXT);
CREATE TABLE IF NOT EXISTS telemetry (
    unit_id TEXT PRIMARY KEY,
    hits INTEGER NOT NULL DEFAULT 0, successes INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0, offered INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL DEFAULT 0, text_value TEXT);
INSERT OR IGNORE INTO meta (key, value) VALUES ('generation', 0);
INSERT OR IGNORE INTO meta (key, value, text_value) VALUES ('seed', 0, '');
"""


class SQLiteStore(Store):
    kind = "sqlite"
    placeholder = "?"

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(self.path), timeout=60, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA busy_timeout = 60000")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.executescript("BEGIN IMMEDIATE;" + SCHEMA + "COMMIT;")
        except (OSError, sqlite3.Error) as exc:
            raise KnowledgeError(
                f"cannot open the knowledge store {self.path}: {exc}",
                "Set knowledge.path to a writable file, or knowledge.url to a PostgreSQL URL.",
            ) from exc

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        try:
            cur = self._conn.execute(sql, tuple(params))
            return cur.fetchall()
        except sqlite3.Error as exc:
            raise KnowledgeError(f"knowledge store {self.path}: {exc}", "") from exc

    def _exec_many(self, statements: list[tuple[str, Sequence[Any]]]) -> None:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for sql, params in statements:
                    self._conn.execute(sql, tuple(params))
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise KnowledgeError(f"knowledge store {self.path}: {exc}", "") from exc

    def close(self) -> None:
        self._conn.close()

    def describe(self) -> str:
        return f"sqlite:{self.path}"
