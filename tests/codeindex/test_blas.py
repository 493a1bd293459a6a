"""A query's vector products run on one BLAS thread (blas.py), whatever OPENBLAS_NUM_THREADS says."""

from __future__ import annotations

from threadpoolctl import threadpool_info

from tests.codeindex.conftest import ORDERS_PY
from xihe.tools.codeindex import blas
from xihe.tools.codeindex.service import index_repo


def _blas_threads() -> list[int]:
    return [int(i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]


def test_the_limit_holds_inside_and_is_lifted_after() -> None:
    before = _blas_threads()
    with blas.limited(1):
        assert _blas_threads() and set(_blas_threads()) == {1}
    assert _blas_threads() == before


def test_vector_scores_multiply_under_the_one_thread_limit(make_repo, cfg, embedder, monkeypatch) -> None:
    root = make_repo({"shop/orders.py": ORDERS_PY})
    idx, _ = index_repo(root, cfg, embedder=embedder)
    seen: list[list[int]] = []
    real = blas.rows_dot

    def watched(rows, q):  # type: ignore[no-untyped-def]
        seen.append(_blas_threads())
        return real(rows, q)

    monkeypatch.setattr(blas, "rows_dot", watched)
    sims = idx.vector_scores("cancel an order")
    assert sims is not None and seen and set(seen[0]) == {1}
