"""Fusion weights learned on the dev split of the held-out sets (and then reported on the test split).

The objective is the mean, over sets and over the hand-written groups (English, Chinese), of dev
MRR@10, among the grid points whose docstring-query MRR@10 is, in every set, no more than
DOCSTRING_SLACK below that of the current settings: hand-written questions may improve, docstring
queries may not regress (a gain in one repository does not pay for a loss in another). The graph
field's weight, then the multilingual channel's weights (one for English questions, one for questions with Chinese) are
learned after the others, each on a grid of its own, from the point chosen.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from xihe.config.code import RetrievalConfig
from xihe.tools.codeindex.fuse import fuse
from xihe.tools.codeindex.index import CodeIndex
from xihe.tools.codeindex.query import QueryPlan
from xihe.tools.codeindex.question import GROUPS, Question
from xihe.tools.codeindex.tokens import has_cjk

DOCSTRING_SLACK = 0.005
HAND_WRITTEN = ("manual", "manual-zh")
GRID: dict[str, tuple[float, ...]] = {
    "vector_weight": (0.5, 1.0, 1.5, 2.0, 3.0),
    "name_weight": (0.0, 0.1, 0.25, 0.5),
    "identifier_weight": (1.0, 1.5, 2.0),
    "bridge_weight": (0.5, 1.0, 1.5),
    "test_penalty": (0.0, 0.3, 0.6, 1.0),
}
GRAPH_GRID: dict[str, tuple[float, ...]] = {"graph_weight": (0.0, 0.05, 0.1, 0.15, 0.25)}
MULTI_GRID: dict[str, tuple[float, ...]] = {
    "multilingual_weight": (0.0, 0.25, 0.5, 1.0, 1.5, 2.0),
    "multilingual_weight_zh": (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0),
}
Vectors = dict[tuple[str, str], tuple[np.ndarray | None, np.ndarray | None]]
Score = tuple[float, float, tuple[float, ...]]


class KeywordScores:
    """Each question's plan and its BM25, name-field and graph-field scores, computed once per distinct plan.

    Only the identifier and bridge weights change a question's terms, and most questions have no
    identifier and no Chinese: most grid points are scored by fusion alone.
    """

    def __init__(self) -> None:
        self._plans: dict[tuple[str, str, float, float], QueryPlan] = {}
        self._scores: dict[tuple[str, tuple[tuple[str, float], ...]], tuple[np.ndarray, ...]] = {}

    def get(
        self, name: str, idx: CodeIndex, q: Question, cfg: RetrievalConfig
    ) -> tuple[QueryPlan, np.ndarray, np.ndarray, np.ndarray]:
        """The plan of `q` under `cfg` (set on `idx`) with its BM25, name-field and graph-field scores."""
        pkey = (name, q.text, cfg.identifier_weight, cfg.bridge_weight)
        qp = self._plans.get(pkey)
        if qp is None:
            qp = self._plans[pkey] = idx.query_plan(q.text)
        skey = (name, tuple(sorted(qp.terms.items())))
        if skey not in self._scores:
            t = qp.terms
            self._scores[skey] = (idx.bm25.scores(t), idx.names.scores(t), idx.neighbours.scores(t))
        bm, names, graph = self._scores[skey]
        return qp, bm, names, graph


def _rank(ranked: list[tuple[int, float]], idx: CodeIndex, q: Question) -> int | None:
    for i, (slot, _) in enumerate(ranked[:10], start=1):
        u = idx.units[slot]
        if u is not None and (u.path, u.qualname) in q.targets:
            return i
    return None


def objective(ranks: dict[str, list[tuple[str, int | None]]], groups: Sequence[str] = GROUPS) -> float:
    """Mean over sets and `groups` of MRR@10 (`ranks`: set -> [(group, rank)])."""
    means = []
    for rows in ranks.values():
        for g in groups:
            rs = [r for grp, r in rows if grp == g]
            if rs:
                means.append(sum(1 / r for r in rs if r is not None) / len(rs))
    return float(np.mean(means)) if means else 0.0


def keeps_docstrings(per_set: Sequence[float], before: Sequence[float]) -> bool:
    """Whether every set's docstring MRR@10 stays within DOCSTRING_SLACK of what it was `before`."""
    return all(d >= b - DOCSTRING_SLACK for d, b in zip(per_set, before, strict=True))


def learn(
    sets: Sequence[tuple[str, CodeIndex, list[Question]]], base: RetrievalConfig, split: str = "dev"
) -> dict[str, Any]:
    """The GRID point (then the MULTI_GRID point) with the best objective on `split`, its score, and the
    score of `base`."""
    vectors: Vectors = {}
    keyword = KeywordScores()
    for name, idx, qs in sets:
        for q in qs:
            if q.split == split:
                multi = idx.multi.scores(q.text, idx.bm25.alive) if idx.multi is not None else None
                vectors[(name, q.text)] = (idx.vector_scores(idx.query_plan(q.text).text), multi)
    saved = [idx.cfg for _, idx, _ in sets]
    try:
        base_score = _score(sets, base, split, vectors, keyword)
        before = base_score[2]
        best_score, best = _best(sets, base, split, vectors, keyword, GRID, before, base_score)
        best_score, graph_weight = _best(
            sets, base.model_copy(update=best), split, vectors, keyword, GRAPH_GRID, before, best_score
        )
        best = best | graph_weight
        if any(idx.multi is not None for _, idx, _ in sets):
            best_score, multi_weights = _best(
                sets, base.model_copy(update=best), split, vectors, keyword, MULTI_GRID, before, best_score
            )
            best = best | multi_weights
    finally:
        for (_, idx, _), cfg_before in zip(sets, saved, strict=True):
            idx.cfg = cfg_before
    return {
        "split": split,
        "weights": best,
        "hand_written_mrr": round(best_score[0], 4),
        "docstring_mrr": round(best_score[1], 4),
        "hand_written_mrr_with_defaults": round(base_score[0], 4),
        "docstring_mrr_with_defaults": round(base_score[1], 4),
        "grid": {k: list(v) for k, v in (GRID | GRAPH_GRID | MULTI_GRID).items()},
    }


def _best(
    sets: Sequence[tuple[str, CodeIndex, list[Question]]],
    base: RetrievalConfig,
    split: str,
    vectors: Vectors,
    keyword: KeywordScores,
    grid: dict[str, tuple[float, ...]],
    before: Sequence[float],
    start: Score,
) -> tuple[Score, dict[str, float]]:
    """The `grid` point (over `base`) with the best hand-written objective that `keeps_docstrings` of
    every set (`before`); `base`'s own values (scored `start`) when no point qualifies."""
    keys = list(grid)
    results = []
    for point in itertools.product(*(grid[k] for k in keys)):
        cfg = base.model_copy(update=dict(zip(keys, point, strict=True)))
        results.append((_score(sets, cfg, split, vectors, keyword), dict(zip(keys, point, strict=True))))
    feasible = [r for r in results if keeps_docstrings(r[0][2], before)]
    feasible = feasible or [(start, {k: getattr(base, k) for k in keys})]
    # ties go to the first grid point (the grid lists each weight's smaller values first)
    return max(feasible, key=lambda p: p[0][0])


def _score(
    sets: Sequence[tuple[str, CodeIndex, list[Question]]],
    cfg: RetrievalConfig,
    split: str,
    vectors: Vectors,
    keyword: KeywordScores,
) -> Score:
    """(hand-written objective, docstring MRR@10 mean over sets, per set) on `split` with `cfg`."""
    ranks: dict[str, list[tuple[str, int | None]]] = {}
    for name, idx, qs in sets:
        idx.cfg = idx.cfg.model_copy(update={"retrieval": cfg})
        rows = ranks.setdefault(name, [])
        for q in qs:
            if q.split != split:
                continue
            qp, bm, names, graph = keyword.get(name, idx, q, cfg)
            prior = None if qp.tests else idx.is_test
            vec, multi = vectors[(name, q.text)]
            weight = cfg.multilingual_weight_zh if has_cjk(q.text) else cfg.multilingual_weight
            ranked = fuse(
                bm,
                vec,
                names if cfg.name_weight > 0 else None,
                cfg,
                "hybrid",
                prior,
                multi,
                weight,
                idx.inherits,
                None if has_cjk(q.text) else graph,
            )
            rows.append((q.group, _rank(ranked, idx, q)))
    per_set = tuple(objective({name: rows}, ("docstring",)) for name, rows in ranks.items())
    return objective(ranks, HAND_WRITTEN), objective(ranks, ("docstring",)), per_set
