"""Fusion of ranked candidate lists (keyword, vector, name field, multilingual) into one ranking."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from xihe.tools.codeindex import inherit

if TYPE_CHECKING:  # only types: a query on a saved index never imports pydantic
    from xihe.config.code import RetrievalConfig


def rrf(
    lists: Sequence[Sequence[int]], k: int = 60, weights: Sequence[float] | None = None
) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: score(d) = sum_i w_i / (k + rank_i(d)), ranks from 1; best first.

    Ties keep the order of first appearance (earlier list, better rank), so results are stable.
    """
    weights = weights or [1.0] * len(lists)
    scores: dict[int, float] = {}
    for items, w in zip(lists, weights, strict=True):
        for rank, item in enumerate(items, start=1):
            scores[item] = scores.get(item, 0.0) + w / (k + rank)
    order = {item: i for i, item in enumerate(dict.fromkeys(x for items in lists for x in items))}
    return sorted(scores.items(), key=lambda p: (-p[1], order[p[0]]))


def linear(
    bm25: dict[int, float],
    cosine: dict[int, float],
    weight: float = 1.0,
    names: dict[int, float] | None = None,
    name_weight: float = 0.0,
    multi: dict[int, float] | None = None,
    multi_weight: float = 0.0,
    graph: dict[int, float] | None = None,
    graph_weight: float = 0.0,
) -> list[tuple[int, float]]:
    """Score fusion: bm25/max(bm25) + weight * cosine (+ name_weight * names/max(names)
    + multi_weight * multilingual cosine + graph_weight * graph/max(graph)); best first.

    Measured on the stdlib benchmark this beat RRF (which let the weaker vector list push good
    keyword hits down); each dict must hold its score for every candidate.
    """
    top = max(bm25.values(), default=0.0) or 1.0
    name_top = (max(names.values(), default=0.0) or 1.0) if names else 1.0
    graph_top = (max(graph.values(), default=0.0) or 1.0) if graph else 1.0
    keys = list(dict.fromkeys([*bm25, *cosine, *(names or {}), *(multi or {})]))
    scored = [
        (
            i,
            bm25.get(i, 0.0) / top
            + weight * cosine.get(i, 0.0)
            + (name_weight * names.get(i, 0.0) / name_top if names else 0.0)
            + (multi_weight * multi.get(i, 0.0) if multi else 0.0)
            + (graph_weight * graph.get(i, 0.0) / graph_top if graph else 0.0),
        )
        for i in keys
    ]
    return sorted(scored, key=lambda p: -p[1])


def fuse(
    bm_all: np.ndarray | None,
    vec_all: np.ndarray | None,
    names_all: np.ndarray | None,
    r: RetrievalConfig,
    mode: str = "hybrid",
    is_test: Callable[[int], bool] | None = None,
    multi: np.ndarray | None = None,
    multi_weight: float = 0.0,
    inherits: Callable[[int], bool] | None = None,
    graph_all: np.ndarray | None = None,
) -> list[tuple[int, float]]:
    """One ranking from every slot's keyword, vector, name-field and multilingual scores, best first.

    Candidates are the top `r.candidates` of each list; linear fusion scores them as
    bm25/max + vector_weight * cosine + name_weight * names/max + multi_weight * multilingual cosine
    + graph_weight * graph/max (the graph field: callee and caller names; it scores candidates, it
    brings none of its own), less `r.test_penalty` for a slot `is_test` says is test code (prior.py) and `inherit.PENALTY` for
    one searched by an inherited doc (`inherits`).
    """
    bm = top_slots(bm_all, r.candidates, positive=True) if bm_all is not None else []
    vec = top_slots(vec_all, r.candidates) if vec_all is not None else []
    if mode == "bm25":
        return bm
    if mode == "vector":
        return vec
    if r.fusion == "rrf" or bm_all is None or vec_all is None:
        return rrf([[i for i, _ in bm], [i for i, _ in vec]], r.rrf_k, [r.bm25_weight, r.vector_weight])
    nm = top_slots(names_all, r.candidates, positive=True) if names_all is not None else []
    use_multi = multi is not None and multi_weight > 0
    ml = top_slots(multi, r.candidates) if multi is not None and use_multi else []
    cands = list(
        dict.fromkeys([i for i, _ in bm] + [i for i, _ in vec] + [i for i, _ in nm] + [i for i, _ in ml])
    )
    names = {i: float(names_all[i]) for i in cands} if names_all is not None else None
    ranked = linear(
        {i: float(bm_all[i]) for i in cands},
        {i: float(vec_all[i]) for i in cands},
        r.vector_weight,
        names,
        r.name_weight,
        {i: float(multi[i]) for i in cands} if multi is not None and use_multi else None,
        multi_weight,
        {i: float(graph_all[i]) for i in cands} if graph_all is not None and r.graph_weight > 0 else None,
        r.graph_weight,
    )
    test = is_test if is_test is not None and r.test_penalty else None
    if test is None and inherits is None:
        return ranked
    ranked = [
        (
            i,
            s
            - (r.test_penalty if test and test(i) else 0.0)
            - (inherit.PENALTY if inherits and inherits(i) else 0.0),
        )
        for i, s in ranked
    ]
    return sorted(ranked, key=lambda p: -p[1])


def top_slots(scores: np.ndarray, n: int, positive: bool = False) -> list[tuple[int, float]]:
    """The best `n` (slot, score) pairs, best first; finite (and positive) scores only."""
    if not len(scores):
        return []
    n = min(n, len(scores))
    cand = np.argpartition(-scores, n - 1)[:n]
    cand = cand[np.argsort(-scores[cand], kind="stable")]
    return [
        (int(i), float(scores[i])) for i in cand if np.isfinite(scores[i]) and (scores[i] > 0 or not positive)
    ]
