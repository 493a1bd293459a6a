"""Fusion and the incremental BM25 (checked against bm25s)."""

from __future__ import annotations

import bm25s
import numpy as np
import pytest

from xihe.tools.codeindex.bm25 import Bm25Index
from xihe.tools.codeindex.fuse import linear, rrf

CORPUS = [
    ["order", "state", "machine", "timeout"],
    ["send", "mail", "smtp", "message", "message"],
    ["parse", "header", "mail"],
    ["timeout", "retry", "retry", "http", "request"],
    ["order", "sync", "workflow"],
]


def test_rrf_sums_reciprocal_ranks_and_is_stable() -> None:
    fused = rrf([[1, 2, 3], [3, 1, 4]], k=60)
    ids = [i for i, _ in fused]
    assert ids[:2] == [1, 3]  # both in both lists; 1 ranks higher in sum
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62)
    assert set(ids) == {1, 2, 3, 4}


def test_rrf_weights_shift_the_order() -> None:
    assert rrf([[1], [2]], weights=[1.0, 2.0])[0][0] == 2


def test_linear_normalises_bm25_and_adds_weighted_cosine() -> None:
    fused = linear({1: 10.0, 2: 5.0}, {1: 0.1, 2: 0.9}, weight=1.0)
    assert fused[0] == (2, pytest.approx(0.5 + 0.9))
    assert fused[1] == (1, pytest.approx(1.0 + 0.1))


def test_scores_equal_bm25s_lucene() -> None:
    ours = Bm25Index()
    ours.add(CORPUS)
    ref = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    ref.index(CORPUS, show_progress=False)
    for query in (["timeout"], ["mail", "message"], ["order", "retry", "unknown"]):
        want = ref.get_scores(query)
        assert np.allclose(ours.scores(query), want, rtol=1e-5)


def test_removed_rows_stop_counting_and_new_rows_are_searchable() -> None:
    idx = Bm25Index()
    idx.add(CORPUS)
    idx.remove([0, 4])
    assert [i for i, _ in idx.top(["order"], 5)] == []
    idx.add([["order", "expiry"]])
    assert [i for i, _ in idx.top(["order"], 5)] == [5]
    # IDF now counts live rows only: the same as a fresh index over the live documents
    fresh = Bm25Index()
    live = [CORPUS[1], CORPUS[2], CORPUS[3], ["order", "expiry"]]
    fresh.add(live)
    assert idx.scores(["order", "mail"])[[1, 2, 3, 5]] == pytest.approx(fresh.scores(["order", "mail"]))


def test_compact_keeps_scores(tmp_path) -> None:
    idx = Bm25Index()
    idx.add(CORPUS)
    idx.remove([1])
    before = idx.scores(["mail", "timeout"])[[0, 2, 3, 4]]
    idx.compact(np.asarray([0, 2, 3, 4]))
    assert idx.scores(["mail", "timeout"]) == pytest.approx(before)
    idx.save(tmp_path)
    again = Bm25Index.load(tmp_path)
    assert again.scores(["mail", "timeout"]) == pytest.approx(before)
