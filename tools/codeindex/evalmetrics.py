"""Scoring a search evaluation: where a question's first right unit ranks, recall and MRR, latency percentiles."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from xihe.tools.codeindex.index import CodeIndex


def rank_of(index: CodeIndex, q: Any, mode: str) -> tuple[int | None, float]:
    """1-based rank of the first right unit in the top 10 (None if absent) and the query's seconds.

    `q` is any question with `text` and `targets` (path, qualname) pairs.
    """
    t0 = time.perf_counter()
    res = index.search(q.text, 10, mode=mode)
    dt = time.perf_counter() - t0
    for i, s in enumerate(res.hits, start=1):
        if (s.unit.path, s.unit.qualname) in q.targets:
            return i, dt
    return None, dt


def metrics(ranks: Sequence[int | None]) -> dict[str, float]:
    """Recall@1/5/10 and MRR@10 from 1-based ranks (None = not in the top 10)."""
    n = max(1, len(ranks))
    return {
        "n": len(ranks),
        "recall@1": round(sum(1 for r in ranks if r is not None and r <= 1) / n, 4),
        "recall@5": round(sum(1 for r in ranks if r is not None and r <= 5) / n, 4),
        "recall@10": round(sum(1 for r in ranks if r is not None and r <= 10) / n, 4),
        "mrr@10": round(sum(1 / r for r in ranks if r is not None) / n, 4),
    }


def percentile_ms(values: list[float], p: float) -> float:
    """The `p` quantile (0..1) of `values` in seconds, as milliseconds; 0.0 for no values."""
    s = sorted(values)
    return round(s[min(len(s) - 1, round(p * (len(s) - 1)))] * 1000, 2) if s else 0.0
