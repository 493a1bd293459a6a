"""Fusion of ranked candidate lists (keyword and vector) into one ranking."""

from __future__ import annotations

from collections.abc import Sequence


def rrf(lists: Sequence[Sequence[int]], k: int = 60, weights: Sequence[float] | None = None) -> list[tuple[int, float]]:
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
