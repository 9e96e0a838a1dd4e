"""Retrieval over the experience base (DESIGN.md, "The experience base"; SetupX + EnvPilot).

1. Exact signal matches: unit regexes run over the log. To stay fast with 10,000 units, each
   pattern's required literal words are indexed, and a regex runs only when its word occurs in
   the log (patterns without such a word always run).
2. Lexical: BM25 (rank-bm25's Okapi statistics) over signals + advice, scored sparsely through an
   inverted index so only units sharing a word with the log are touched.
3. Embeddings (optional): an OpenAI-compatible endpoint; nearest units from pgvector when the
   PostgreSQL server has it, otherwise cosine similarity in-process.
4. Reciprocal-rank fusion of those lists, then SetupX's composite
   ``score = sim × (1 + success_rate) × tier`` (× the unit's specificity weight); units whose
   signal matched exactly come first. Applicability (OS, Python range, tool) filters; k
   candidates (default 10) go to an optional reranker and ``offer`` (default 3) are returned with
   their atoms filled ({python}, {match:N}).

Outcomes: the loop reports each applied unit's outcome (``record_outcome``) once the clean
replay has judged it.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

# The regex parser that `re` itself uses (public as sre_parse before 3.11, deprecated since).
from re import _constants as sre_constants  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import numpy as np
from rank_bm25 import BM25Okapi

from bot.atoms import Atom, spec_name
from bot.knowledge.store import Store
from bot.knowledge.units import Telemetry, Unit
from bot.logtext import strip_ansi

log = logging.getLogger(__name__)

RRF_K = 60
# A unit whose signal did not match is offered only when its fused similarity reaches this. The
# fusion counts the match list too, so wording alone (lexical, no embedder) tops out at 0.5 and
# meaning alone at 0.33: only matches are offered then. On the failure logs of real bench runs
# every right first offer was a match, and every neighbour offered alone was wrong
# (bench/SUMMARY.md, retrieval). With embeddings, a unit that wording and meaning both put near
# the top (ranks 0-5 in each) clears it.
MIN_SIMILARITY = 0.6
LOG_TAIL = 60_000  # the end of a log is where the error is; bound the work on huge logs
LEXICAL_TAIL = 8_000
EMBED_TAIL = 2_000
_WORD = re.compile(r"\w+")
_PLACEHOLDER = re.compile(r"\{(?:match:\d|[a-z_]+)\}")
_TOKEN = re.compile(r"[a-z0-9]+(?:[.+-][a-z0-9]+)*")
_STOP = frozenset(
    """a an and are as at be by for from in is it its not of on or that the this to was
with you your was were will can use using be has have had""".split()
)


def tokenize(text: str) -> list[str]:
    """Lower-case words; dotted/dashed names kept whole *and* split (libxml2-dev, Python.h)."""
    out: list[str] = []
    for tok in _TOKEN.findall(text.lower()):
        if len(tok) > 1 and tok not in _STOP:
            out.append(tok)
        if any(c in tok for c in ".+-"):
            out.extend(p for p in re.split(r"[.+-]", tok) if len(p) > 1 and p not in _STOP)
    return out


@dataclass(frozen=True)
class Candidate:
    unit: Unit
    score: float
    atoms: tuple[Atom, ...]
    exact: bool = False
    matched: str = ""
    similarity: float = 1.0  # the fused rank similarity, 0..1; what a candidate without a match rests on

    def describe(self) -> str:
        return f"{self.unit.id} ({self.score:.3f}{', exact' if self.exact else ''}): " + "; ".join(
            a.describe() for a in self.atoms
        )


Reranker = Callable[[str, list[Candidate]], list[Candidate]]


# -- literal anchors of a regex ---------------------------------------------------------------
def _literal_runs(parsed: Any) -> list[str]:
    """Literal text that every match must contain (top-level sequence and plain groups)."""
    runs, cur = [], []
    for op, av in parsed:
        if op is sre_constants.LITERAL:
            cur.append(chr(av))
            continue
        if op is sre_constants.SUBPATTERN:
            sub = av[-1]
            if cur:
                runs.append("".join(cur))
                cur = []
            runs.extend(_literal_runs(sub))
            continue
        if cur:
            runs.append("".join(cur))
            cur = []
    if cur:
        runs.append("".join(cur))
    return runs


def anchor_words(pattern: str) -> set[str]:
    """Whole words that any text matching ``pattern`` contains (lower-cased). Only words with a
    non-word character on both sides inside a literal run count: at a run's edge the word might
    continue in the log. Empty when nothing is certain (the regex then always runs)."""
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, sre_constants.error, RecursionError):
        return set()
    words = set()
    for run in _literal_runs(parsed):
        for m in _WORD.finditer(run):
            if m.start() > 0 and m.end() < len(run):
                words.add(m.group().lower())
    return words


class _Index:
    """In-memory indexes for one store generation."""

    def __init__(self, units: list[Unit]) -> None:
        self.units = units
        self.by_id = {u.id: i for i, u in enumerate(units)}
        # regex prefilter: each pattern is filed under its rarest required word, and runs only
        # when the log contains all of its required words; unanchored patterns always run
        self.by_word: dict[str, list[tuple[int, frozenset[str]]]] = {}
        self.always: set[int] = set()
        anchored: list[tuple[int, frozenset[str]]] = []
        freq: dict[str, int] = {}
        for i, u in enumerate(units):
            for p in u.patterns:
                words = frozenset(anchor_words(p))
                if not words:
                    self.always.add(i)
                    continue
                anchored.append((i, words))
                for w in words:
                    freq[w] = freq.get(w, 0) + 1
        for i, words in anchored:
            rarest = min(words, key=lambda w: (freq[w], -len(w), w))
            self.by_word.setdefault(rarest, []).append((i, words))
        # BM25: statistics from rank-bm25, scored through an inverted index
        corpus = [tokenize(u.search_text()) or ["_"] for u in units]
        self.bm25 = BM25Okapi(corpus) if units else None
        self.postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        if self.bm25 is not None:
            k1, b, avgdl = self.bm25.k1, self.bm25.b, self.bm25.avgdl
            acc: dict[str, tuple[list[int], list[float]]] = {}
            for i, freqs in enumerate(self.bm25.doc_freqs):
                dl = self.bm25.doc_len[i]
                for term, tf in freqs.items():
                    w = self.bm25.idf.get(term, 0.0) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
                    ids, ws = acc.setdefault(term, ([], []))
                    ids.append(i)
                    ws.append(w)
            self.postings = {
                t: (np.asarray(i, dtype=np.int32), np.asarray(w, dtype=np.float64)) for t, (i, w) in acc.items()
            }
        # embeddings for in-process cosine
        self.emb_ids = [i for i, u in enumerate(units) if u.embedding is not None]
        if self.emb_ids:
            mat = np.asarray([units[i].embedding for i in self.emb_ids], dtype=np.float64)
            norms = np.linalg.norm(mat, axis=1, keepdims=True)
            norms[norms == 0] = 1.0
            self.emb_matrix = mat / norms
        else:
            self.emb_matrix = None

    def exact(self, text: str) -> list[tuple[int, re.Match[str]]]:
        words = set(_WORD.findall(text.lower()))
        todo = set(self.always)
        for w in words:
            for i, required in self.by_word.get(w, ()):
                if i not in todo and required <= words:
                    todo.add(i)
        found = []
        for i in todo:
            m = self.units[i].match(text)
            if m:
                found.append((i, m))
        return found

    def lexical(self, text: str, limit: int) -> list[tuple[int, float]]:
        if self.bm25 is None:
            return []
        scores = np.zeros(len(self.units))
        for term in set(tokenize(text)):
            post = self.postings.get(term)
            if post is not None:
                scores[post[0]] += post[1]
        if limit < len(scores):
            top = np.argpartition(-scores, limit)[:limit]
        else:
            top = np.arange(len(scores))
        ranked = sorted(((int(i), float(scores[i])) for i in top if scores[i] > 0), key=lambda x: -x[1])
        return ranked

    def cosine(self, vector: Sequence[float], limit: int) -> list[tuple[int, float]]:
        if self.emb_matrix is None:
            return []
        q = np.asarray(vector, dtype=np.float64)
        if q.shape[0] != self.emb_matrix.shape[1]:
            return []
        q = q / (np.linalg.norm(q) or 1.0)
        sims = self.emb_matrix @ q
        order = np.argsort(-sims)[:limit]
        return [(self.emb_ids[int(j)], float(sims[j])) for j in order]


class Retriever:
    def __init__(
        self, store: Store, settings: Any = None, embedder: Any = None, reranker: Reranker | None = None
    ) -> None:
        self.store = store
        self.k = int(getattr(settings, "k", 10) or 10)
        self.offer = int(getattr(settings, "offer", 3) or 3)
        similarity = getattr(settings, "min_similarity", None)
        self.min_similarity = float(MIN_SIMILARITY if similarity is None else similarity)
        self.embedder = embedder
        self.reranker = reranker
        self._index: _Index | None = None
        self._generation: int | None = None

    # -- index management --------------------------------------------------------------------
    def index(self) -> _Index:
        gen = self.store.generation()
        if self._index is None or gen != self._generation:
            # quarantined units (taught by an LLM, not yet approved) are never offered
            units = [u for u in self.store.all() if u.category != "quarantined"]
            if self.embedder is not None:
                units = self._embed_missing(units)
            self._index = _Index(units)
            self._generation = gen  # a change made meanwhile triggers the next rebuild
        return self._index

    def _embed_missing(self, units: list[Unit]) -> list[Unit]:
        missing = [u for u in units if u.embedding is None]
        if not missing:
            return units
        try:
            vectors = self.embedder.embed([u.search_text() for u in missing])
        except Exception as exc:  # an embeddings outage must not stop retrieval
            log.warning("embeddings unavailable, lexical retrieval only: %s", exc)
            return units
        new = {u.id: v for u, v in zip(missing, vectors, strict=False)}
        self.store.set_embeddings(new)
        return [dataclasses.replace(u, embedding=tuple(new[u.id])) if u.id in new else u for u in units]

    # -- retrieval ---------------------------------------------------------------------------
    def retrieve(self, log_text: str, context: Mapping[str, Any] | None = None) -> list[Candidate]:
        """The best ``offer`` candidates for a failure output, atoms filled."""
        context = dict(context or {})
        # colour codes split a signal ("setuptools-scm \x1b[0m\x1b[91mwas unable to detect version")
        text = strip_ansi(log_text or "")[-LOG_TAIL:]
        # a neighbour by wording alone is no evidence of a fix: abstain rather than cost a trial
        candidates = [c for c in self.candidates(text, context) if c.exact or c.similarity >= self.min_similarity]
        if self.reranker is not None and candidates:
            try:
                reranked = self.reranker(text, list(candidates))
                known = {c.unit.id for c in candidates}
                candidates = [c for c in reranked if c.unit.id in known] or candidates
            except Exception as exc:  # the LLM is optional; fall back to the deterministic order
                log.warning("rerank failed, keeping the deterministic order: %s", exc)
        offered = candidates[: self.offer]
        if offered:
            self.store.mark_offered([c.unit.id for c in offered])
        return offered

    def candidates(self, text: str, context: Mapping[str, Any]) -> list[Candidate]:
        """The top k candidates after fusion, applicability and the composite score."""
        idx = self.index()
        if not idx.units:
            return []
        exact = idx.exact(text)
        # exact matches ordered by specificity (the unit's weight), then by where the signal last
        # appears (the end of a log holds the error that stopped it), then the longer match
        last = {i: _last_match_end(idx.units[i], text) for i, _ in exact}
        exact.sort(key=lambda im: (-idx.units[im[0]].weight, -last[im[0]], -len(im[1].group(0)), idx.units[im[0]].id))
        matches = {i: m for i, m in exact}
        lists: list[list[int]] = [[i for i, _ in exact], [i for i, _ in idx.lexical(text[-LEXICAL_TAIL:], 50)]]
        if self.embedder is not None:
            lists.append(self._semantic(idx, text[-EMBED_TAIL:], 50))
        fused: dict[int, float] = {}
        for ranked in lists:
            for rank, i in enumerate(ranked):
                fused[i] = fused.get(i, 0.0) + 1.0 / (RRF_K + rank + 1)
        best_possible = len(lists) / (RRF_K + 1)
        pool = sorted(fused, key=lambda i: (i not in matches, -fused[i]))
        pool = [i for i in pool if idx.units[i].applies(context)][: self.k * 3]
        telemetry = self.store.telemetry([idx.units[i].id for i in pool])
        scored = []
        for i in pool:
            unit = idx.units[i]
            t = telemetry.get(unit.id, Telemetry())
            sim = fused[i] / best_possible
            # weight ranks specific signals above generic ones when both matched; without a
            # match it can only demote (a generic fallback), never promote
            weight = unit.weight if i in matches else min(unit.weight, 1.0)
            score = sim * (1.0 + t.success_rate) * t.tier * weight
            scored.append((i in matches, score, unit, t, sim))
        scored.sort(key=lambda x: (not x[0], -x[1], x[2].id))
        out = []
        for is_exact, score, unit, t, sim in scored:
            m = matches.get(idx.by_id[unit.id])
            atoms = fill_atoms(unit, m, context)
            if any(_PLACEHOLDER.search(str(a.args)) for a in atoms):
                continue  # a templated fix without the value that fills it cannot run
            if useless_here(atoms, context):
                continue
            out.append(
                Candidate(
                    unit=dataclasses.replace(unit, telemetry=t),
                    score=round(score, 6),
                    atoms=atoms,
                    exact=is_exact,
                    matched=m.group(0) if m else "",
                    similarity=round(sim, 6),
                )
            )
            if len(out) == self.k:
                break
        return out

    def _semantic(self, idx: _Index, text: str, limit: int) -> list[int]:
        try:
            vector = self.embedder.embed([text])[0]
        except Exception as exc:
            log.warning("embeddings unavailable for this query: %s", exc)
            return []
        near = self.store.nearest(vector, limit)
        if near is not None:
            return [idx.by_id[u] for u, _ in near if u in idx.by_id]
        return [i for i, _ in idx.cosine(vector, limit)]

    # -- outcomes ----------------------------------------------------------------------------
    def record_outcome(self, unit_id: str, outcome: str) -> Telemetry:
        """An explicit verdict (from the clean replay)."""
        return self.store.record(unit_id, outcome)


def useless_here(atoms: Sequence[Atom], context: Mapping[str, Any]) -> bool:
    """A filled fix that cannot help in this repository, by what the loop read from it:
    installing from the index a distribution named like a top-level module of the checkout
    (``checkout_modules``: a published release or a stranger's, never the checkout's own code),
    or another test command where the checkout holds no test file at all (``test_files``)."""
    own = {spec_name(m) for m in context.get("checkout_modules") or () if isinstance(m, str)}
    for a in atoms:
        if a.kind == "pip_install" and own and any(spec_name(p) in own for p in a.args.get("packages", ())):
            return True
        if a.kind == "test_command" and context.get("test_files") == "none":
            return True
    return False


def _last_match_end(unit: Unit, text: str) -> int:
    end = -1
    for rx in unit.regexes:
        for m in rx.finditer(text):
            end = max(end, m.end())
    return end


def fill_atoms(unit: Unit, match: re.Match[str] | None, context: Mapping[str, Any]) -> tuple[Atom, ...]:
    # context values ({python}, {settings_module}, ...) and the signal's groups ({match:N})
    values: dict[str, str] = {
        k: str(v) for k, v in context.items() if isinstance(v, (str, int, float)) and re.fullmatch(r"[a-z_]+", k)
    }
    if match is not None:
        values["match:0"] = match.group(0)
        for n, g in enumerate(match.groups(), start=1):
            if g is not None:
                values[f"match:{n}"] = g
    return tuple(a.fill(values) for a in unit.atoms)
