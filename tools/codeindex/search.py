"""Searching a code index: a query's plan, each retriever's scores per slot, fused and ranked.

`Searching` is a part of `CodeIndex` (index.py), which holds the structures it reads: the BM25 rows
of the units' text and of their names, the unit and doc-sentence vectors, and the multilingual
channel. The retrievers' scores are fused by fuse.py; a reranker, when configured, reorders the head.
"""

from __future__ import annotations

import re
from collections.abc import MutableSequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from xihe.tools.codeindex import blas
from xihe.tools.codeindex.bm25 import Bm25Index
from xihe.tools.codeindex.bridge import CjkBridge
from xihe.tools.codeindex.embed import Embedder, Reranker
from xihe.tools.codeindex.fields import embed_text
from xihe.tools.codeindex.fuse import fuse, top_slots
from xihe.tools.codeindex.multilingual import MultilingualVectors
from xihe.tools.codeindex.prior import is_test_path
from xihe.tools.codeindex.query import QueryPlan, plan
from xihe.tools.codeindex.qvec import QueryVectors
from xihe.tools.codeindex.tokens import Tokenizer, has_cjk, split_identifier
from xihe.tools.codeindex.units import CodeUnit

if TYPE_CHECKING:  # only types: a query on a saved index never imports pydantic
    from xihe.config.code import CodeConfig

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Scored:
    """One search result: the unit and its scores (fused, and each retriever's raw score)."""

    unit: CodeUnit
    score: float
    bm25: float = 0.0
    cosine: float = 0.0


@dataclass(frozen=True)
class SearchResult:
    """Ranked results plus whether anything cleared the relevance floors."""

    hits: list[Scored]
    best_bm25: float
    best_cosine: float
    relevant: bool


class Searching:
    """The search half of `CodeIndex` (index.py builds and updates what it reads)."""

    cfg: CodeConfig
    embedder: Embedder | None
    tokenizer: Tokenizer
    bridge: CjkBridge
    reranker: Reranker | None
    units: MutableSequence[CodeUnit | None]
    bm25: Bm25Index
    names: Bm25Index
    neighbours: Bm25Index
    vectors: np.ndarray
    sent_vectors: np.ndarray
    sent_owner: np.ndarray
    _sent_groups: tuple[np.ndarray, np.ndarray] | None
    query_vectors: QueryVectors | None
    multi: MultilingualVectors | None

    def query_plan(self, query: str) -> QueryPlan:
        """The weighted terms and embedding text this index searches for `query`."""
        return self._query(query)

    def _query(self, query: str) -> QueryPlan:
        vocab = self.bm25.vocab
        r = self.cfg.retrieval
        return plan(query, self.tokenizer, self.bridge, vocab.__contains__, r, self.bm25.postings)

    def is_test(self, slot: int) -> bool:
        """Whether the unit in `slot` is test code (prior.py)."""
        u = self.units[slot]
        return u is not None and is_test_path(u.path)

    def inherits(self, slot: int) -> bool:
        """Whether the unit in `slot` is searched by a doc inherited from the method it overrides."""
        u = self.units[slot]
        return u is not None and bool(u.inherited_doc)

    def _groups(self) -> tuple[np.ndarray, np.ndarray]:
        """(first row of each owner's run, that owner's slot): max-pooling by np.maximum.reduceat."""
        if self._sent_groups is None:
            o = self.sent_owner
            starts = np.flatnonzero(np.r_[True, o[1:] != o[:-1]]) if len(o) else np.zeros(0, np.int64)
            self._sent_groups = (starts, o[starts])
        return self._sent_groups

    def vector_scores(self, text: str) -> np.ndarray | None:
        """Cosine of every slot with the text's embedding (-inf for dead slots); None without vectors."""
        if self.embedder is None or not self.vectors.size:
            return None
        q = self.query_vectors.vector(text) if self.query_vectors is not None else None
        if q is None:
            q = self.embedder.embed([text])[0]
        with blas.limited(1):  # memory-bound: more threads only wait for each other under load
            sims = blas.rows_dot(self.vectors, q)
            best = blas.rows_dot(self.sent_vectors, q) if len(self.sent_owner) else None
        if best is not None:
            starts, slots = self._groups()
            best = np.maximum.reduceat(best, starts)
            sims[slots] = np.maximum(sims[slots], best)
        sims[~self.bm25.alive] = -np.inf
        return sims

    def multilingual_scores(self, query: str) -> tuple[np.ndarray | None, float]:
        """The multilingual channel's cosine per slot for `query` and its weight for the query's language."""
        r = self.cfg.retrieval
        weight = r.multilingual_weight_zh if has_cjk(query) else r.multilingual_weight
        if self.multi is None or weight <= 0 or not len(self.units):
            return None, 0.0
        return self.multi.scores(query, self.bm25.alive), weight

    def search(self, query: str, k: int = 10, mode: str = "hybrid") -> SearchResult:
        """Rank units for `query`; mode is hybrid, bm25 or vector."""
        # one BLAS thread for the whole query: limiting and lifting it around each product cost more
        # than the products (OpenBLAS wakes its threads on every change)
        with blas.limited(1):
            return self._search(query, k, mode)

    def _search(self, query: str, k: int, mode: str) -> SearchResult:
        r = self.cfg.retrieval
        q = self._query(query)
        toks, text = q.terms, q.text
        bm_all = self.bm25.scores(toks) if mode in {"hybrid", "bm25"} else None
        vec_all = self.vector_scores(text) if mode in {"hybrid", "vector"} else None
        names_all = self.names.scores(toks) if mode == "hybrid" and r.name_weight > 0 else None
        # the graph field scores English questions only: a Chinese question's bridged terms are broad,
        # and its neighbours' names matched them by chance (dev Chinese MRR@10 fell on both sets)
        graph_on = mode == "hybrid" and r.graph_weight > 0 and not has_cjk(query)
        graph_all = self.neighbours.scores(toks) if graph_on else None
        multi, multi_weight = self.multilingual_scores(query) if mode == "hybrid" else (None, 0.0)
        prior = None if q.tests else self.is_test
        ranked = fuse(
            bm_all, vec_all, names_all, r, mode, prior, multi, multi_weight, self.inherits, graph_all
        )
        bm = top_slots(bm_all, 1, positive=True) if bm_all is not None else []
        vec = top_slots(vec_all, 1) if vec_all is not None else []
        bm_s = {i: float(bm_all[i]) for i, _ in ranked[:k]} if bm_all is not None else {}
        vec_s = {i: float(vec_all[i]) for i, _ in ranked[:k]} if vec_all is not None else {}
        if self.reranker is not None and self.cfg.rerank.enabled and ranked:
            head = ranked[: self.cfg.rerank.top_n]
            docs = [embed_text(u, "") for u in (self.units[i] for i, _ in head) if u is not None]
            order = self.reranker.rerank(query, docs)
            ranked = [(head[i][0], s) for i, s in order] + ranked[len(head) :]
        hits = []
        for slot, score in ranked[:k]:
            unit = self.units[slot]
            if unit is not None:
                hits.append(Scored(unit, float(score), bm_s.get(slot, 0.0), vec_s.get(slot, 0.0)))
        best_bm = bm[0][1] if bm else 0.0
        best_cos = vec[0][1] if vec else 0.0
        # the floor is for unweighted terms: a question whose terms weigh more must not clear it by that
        scale = max(1.0, max(toks.values(), default=1.0))
        relevant = bool(hits) and (best_bm / scale >= r.min_bm25_score or best_cos >= r.min_vector_score)
        symbol = query.strip().rsplit(".", 1)[-1]
        if _IDENT.fullmatch(symbol) and len(split_identifier(symbol)) > 1:
            # a compound identifier asks for that symbol: its parts matching elsewhere is not a hit
            relevant = bool(hits) and symbol.lower().strip("_") in self.bm25.vocab
        return SearchResult(hits, best_bm, best_cos, relevant)
