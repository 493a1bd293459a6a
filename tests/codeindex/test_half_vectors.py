"""Vectors are saved as float16; an index ranks the same built in memory and loaded from disk."""

from __future__ import annotations

import numpy as np

from tests.codeindex.conftest import MAILER_JAVA, ORDERS_PY
from xihe.tools.codeindex.service import index_dir, index_repo, open_index


def test_saved_vectors_are_half_precision_and_load_to_the_same_scores(make_repo, cfg, embedder) -> None:
    root = make_repo({"shop/orders.py": ORDERS_PY, "mail/Mailer.java": MAILER_JAVA})
    built, _ = index_repo(root, cfg, embedder=embedder)
    saved = index_dir(root, cfg)
    assert np.load(saved / "vectors.npy").dtype == np.float16
    assert np.load(saved / "sent_vectors.npy").dtype == np.float16
    loaded = open_index(root, cfg, embedder)
    assert loaded is not None and loaded.vectors.dtype == np.float32
    for question in ("cancel an order that was not paid", "send mail through smtp"):
        a, b = built.vector_scores(question), loaded.vector_scores(question)
        assert a is not None and b is not None and np.array_equal(a, b)


def test_an_index_saved_with_float32_vectors_still_loads(make_repo, cfg, embedder) -> None:
    root = make_repo({"shop/orders.py": ORDERS_PY})
    built, _ = index_repo(root, cfg, embedder=embedder)
    saved = index_dir(root, cfg)
    np.save(saved / "vectors.npy", built.vectors.astype(np.float32))  # the previous version's format
    loaded = open_index(root, cfg, embedder)
    assert loaded is not None
    assert loaded.search("cancel an order that was not paid", 1).hits[0].unit.path == "shop/orders.py"
