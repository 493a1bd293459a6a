"""Fusion of ranked candidate lists (keyword and vector) into one ranking."""

from __future__ import annotations

from collections.abc import Sequence


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
) -> list[tuple[int, float]]:
    """Score fusion: bm25/max(bm25) + weight * cosine (+ name_weight * names/max(names)
    + multi_weight * multilingual cosine); best first.

    Measured on the stdlib benchmark this beat RRF (which let the weaker vector list push good
    keyword hits down); each dict must hold its score for every candidate.
    """
    top = max(bm25.values(), default=0.0) or 1.0
    name_top = (max(names.values(), default=0.0) or 1.0) if names else 1.0
    keys = list(dict.fromkeys([*bm25, *cosine, *(names or {}), *(multi or {})]))
    scored = [
        (
            i,
            bm25.get(i, 0.0) / top
            + weight * cosine.get(i, 0.0)
            + (name_weight * names.get(i, 0.0) / name_top if names else 0.0)
            + (multi_weight * multi.get(i, 0.0) if multi else 0.0),
        )
        for i in keys
    ]
    return sorted(scored, key=lambda p: -p[1])
