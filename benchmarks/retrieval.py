#!/usr/bin/env python3
"""Retrieval benchmark for the experience base.

Loads the seed units plus synthetic look-alike units up to ``--units`` (default 10,000) into a
fresh store, runs every labelled log in tests/fixtures/failure-logs through ``Retriever.retrieve``
and prints precision@1, recall@3 and the retrieval latency (median and p95).

The synthetic units imitate real ones (missing headers, shared objects, modules, fixtures,
services on other ports, version pins) with invented names, so they compete for the same
words and signals as the seed units without being correct answers for the labelled logs.

    python benchmarks/retrieval.py                      # SQLite in a temp dir
    python benchmarks/retrieval.py --store postgresql://postgres@127.0.0.1:5432/db
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.knowledge import Retriever, Unit, open_store  # noqa: E402

LOGS = ROOT / "tests" / "fixtures" / "failure-logs"
SYLLABLES = ["zor", "qua", "vex", "mil", "tra", "bon", "kel", "dri", "sup", "nax", "plo", "gri",
             "fen", "wub", "yal", "cro", "thi", "mur", "ost", "ela"]


def invented_names(rng: random.Random, n: int) -> list[str]:
    names = ["".join(p) for p in itertools.product(SYLLABLES, repeat=4)]
    rng.shuffle(names)
    return names[:n]


def synthetic_unit(i: int, name: str) -> Unit:
    kind = i % 8
    if kind == 0:
        pat, atom, title = rf"{name}/{name}\.h: No such file or directory", {"kind": "apt_install", "packages": [f"lib{name}-dev"]}, f"{name} headers missing"
    elif kind == 1:
        pat, atom, title = rf"lib{name}\.so\.\d+: cannot open shared object file", {"kind": "apt_install", "packages": [f"lib{name}1"]}, f"lib{name} runtime missing"
    elif kind == 2:
        pat, atom, title = rf"No module named '{name}'", {"kind": "pip_install", "packages": [f"py{name}"]}, f"import {name} needs py{name}"
    elif kind == 3:
        pat, atom, title = rf"fixture '{name}_client' not found", {"kind": "pip_install", "packages": [f"pytest-{name}"]}, f"{name}_client fixture"
    elif kind == 4:
        port = 20000 + i % 30000
        pat, atom, title = rf"Connect call failed \('[\d.:]+', {port}\)", {"kind": "start_service", "service": name}, f"{name} service on {port}"
    elif kind == 5:
        pat, atom, title = rf"cannot import name '{name}' from '{name[:6]}'", {"kind": "pip_constraint", "constraints": [f"{name[:6]}<{1 + i % 5}"]}, f"{name} removed upstream"
    elif kind == 6:
        pat, atom, title = rf"Package {name} was not found in the pkg-config search path", {"kind": "apt_install", "packages": [f"lib{name}-dev", "pkg-config"]}, f"pkg-config cannot find {name}"
    else:
        pat, atom, title = rf"{name}-config: not found", {"kind": "apt_install", "packages": [f"lib{name}-dev"]}, f"{name}-config missing"
    return Unit.from_json({"id": f"synthetic-{i:05d}-{name}", "category": "native", "title": title,
                           "signals": {"patterns": [pat], "keywords": [name]},
                           "advice": f"Synthetic distractor: {title}; the fix installs what {name} needs.",
                           "atoms": [atom]})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--units", type=int, default=10_000, help="total units in the store (default 10000)")
    ap.add_argument("--store", default="", help="postgresql:// URL (default: a temporary SQLite file)")
    ap.add_argument("--repeat", type=int, default=3, help="passes over the logs for the latency figures")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)

    tmp = tempfile.TemporaryDirectory(prefix="setupbot-bench-")
    url, schema = args.store, ""
    if url:
        # a throw-away schema, so the benchmark never writes into a real shared store
        import psycopg

        schema = "setupbot_bench_" + uuid.uuid4().hex[:10]
        with psycopg.connect(args.store, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        url += ("&" if "?" in url else "?") + "options=" + quote(f"-csearch_path={schema},public")
    settings = SimpleNamespace(url=url, path=str(Path(tmp.name) / "knowledge.sqlite"), k=10, offer=3)
    store = open_store(settings)
    seeded = store.count()
    n_synth = max(0, args.units - seeded)
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    store.add_many([synthetic_unit(i, name) for i, name in enumerate(invented_names(rng, n_synth))])
    load_s = time.perf_counter() - t0

    retriever = Retriever(store, settings)
    t0 = time.perf_counter()
    retriever.index()
    index_s = time.perf_counter() - t0

    index = json.loads((LOGS / "index.json").read_text())
    cases = [((LOGS / name).read_text(), meta["unit"], {"python": "3.11", "os": "debian", **meta["context"]})
             for name, meta in sorted(index.items())]
    hits1 = hits3 = 0
    latencies: list[float] = []
    misses = []
    for rep in range(args.repeat):
        for text, expected, ctx in cases:
            t = time.perf_counter()
            cands = retriever.retrieve(text, ctx)
            latencies.append((time.perf_counter() - t) * 1000)
            if rep == 0:
                ids = [c.unit.id for c in cands]
                hits1 += bool(ids) and ids[0] == expected
                hits3 += expected in ids[:3]
                if not ids or ids[0] != expected:
                    misses.append((expected, ids[:3]))
    n = len(cases)
    latencies.sort()
    print(f"store:            {store.describe()}{f' (schema {schema})' if schema else ''}")
    print(f"units in store:   {store.count()} ({seeded} seed + {n_synth} synthetic; load {load_s:.1f}s, index {index_s:.1f}s)")
    print(f"labelled logs:    {n}")
    print(f"precision@1:      {hits1 / n:.3f}  (target >= 0.90)")
    print(f"recall@3:         {hits3 / n:.3f}  (target >= 0.97)")
    print(f"median latency:   {statistics.median(latencies):.2f} ms  (target < 20 ms; {len(latencies)} retrievals)")
    print(f"p95 latency:      {latencies[int(0.95 * (len(latencies) - 1))]:.2f} ms")
    for expected, got in misses[:10]:
        print(f"  miss: expected {expected}, got {got}")
    store.close()
    tmp.cleanup()
    if schema:
        import psycopg

        with psycopg.connect(args.store, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
