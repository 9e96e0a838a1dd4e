"""Store tests run the same suite against SQLite and a real PostgreSQL server.

PostgreSQL comes from SETUPBOT_TEST_PG_URL (`.ci/postgres.sh` starts a server and sets it in CI);
without it the PostgreSQL half skips with a reason. Each PostgreSQL test gets its own schema, so
tests neither see nor disturb each other's units.
"""

from __future__ import annotations

import os
import uuid
from types import SimpleNamespace
from urllib.parse import quote

import pytest

PG_URL = os.environ.get("SETUPBOT_TEST_PG_URL", "")


def pg_schema_url(base: str, schema: str) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-csearch_path={schema},public')}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_settings(request, tmp_path):
    """Knowledge settings pointing at an empty store of each kind."""
    if request.param == "sqlite":
        yield SimpleNamespace(url="", path=str(tmp_path / "knowledge.sqlite"), k=10, offer=3)
        return
    if not PG_URL:
        pytest.skip("SETUPBOT_TEST_PG_URL is not set (run `. .ci/postgres.sh` to start PostgreSQL)")
    import psycopg

    schema = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield SimpleNamespace(url=pg_schema_url(PG_URL, schema), path="", k=10, offer=3)
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def empty_store(store_settings):
    from bot.knowledge import open_store

    store = open_store(store_settings, seed=False)
    yield store
    store.close()


@pytest.fixture
def seeded_store(store_settings):
    from bot.knowledge import open_store

    store = open_store(store_settings)
    yield store
    store.close()


@pytest.fixture
def embeddings_server():
    from knowledge.embeddings_double import EmbeddingsDouble

    with EmbeddingsDouble() as server:
        yield server
