"""Vectors are kept as float16 and saved as int8 with a power-of-two scale per row (quant.py); an index
ranks the same built in memory and loaded from disk, and its products are the float32 products of
those values."""

from __future__ import annotations

import numpy as np

from tests.codeindex.conftest import MAILER_JAVA, ORDERS_PY
from xihe.tools.codeindex import blas, quant
from xihe.tools.codeindex.service import index_dir, index_repo, open_index


def test_saved_vectors_are_8_bit_and_load_to_the_same_scores(make_repo, cfg, embedder) -> None:
    root = make_repo({"shop/orders.py": ORDERS_PY, "mail/Mailer.java": MAILER_JAVA})
    built, _ = index_repo(root, cfg, embedder=embedder)
    saved = index_dir(root, cfg)
    for name, rows in (("vectors", built.vectors), ("sent_vectors", built.sent_vectors)):
        on_disk = np.load(saved / f"{name}.npy")
        assert on_disk.dtype == np.int8 and on_disk.shape == (len(rows), rows.shape[1] + 1)
        assert np.array_equal(quant.unpack(on_disk), rows)  # exactly what is kept
    loaded = open_index(root, cfg, embedder)
    assert built.vectors.dtype == built.sent_vectors.dtype == np.float16  # half the memory
    assert loaded is not None and loaded.vectors.dtype == loaded.sent_vectors.dtype == np.float16
    for question in ("cancel an order that was not paid", "send mail through smtp"):
        a, b = built.vector_scores(question), loaded.vector_scores(question)
        assert a is not None and b is not None and np.array_equal(a, b)


def test_a_product_over_float16_rows_is_the_float32_product_block_by_block(monkeypatch) -> None:
    rng = np.random.default_rng(7)
    rows = rng.standard_normal((1000, 64)).astype(np.float16)
    q = rng.standard_normal(64).astype(np.float32)
    whole = rows.astype(np.float32) @ q
    monkeypatch.setattr(blas, "BLOCK", 300)  # blocks of 300, the last one short
    got = blas.rows_dot(rows, q)
    assert got.dtype == np.float32 and np.allclose(got, whole, rtol=1e-6, atol=1e-5)
    assert np.array_equal(blas.rows_dot(rows[:0], q), np.zeros(0, np.float32))


def test_widening_is_exact_for_every_float16_value() -> None:
    every = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    finite = every[np.isfinite(every)].reshape(-1, 8)  # zeros, subnormals, normals, both signs
    widened = blas._widen(finite.view(np.int16), np.empty(finite.shape, np.int32))
    assert np.array_equal(widened.astype(np.float64) * 2.0**112, finite.astype(np.float64))


def test_the_product_is_bit_for_bit_the_float32_product() -> None:
    rng = np.random.default_rng(11)
    rows = (rng.standard_normal((3000, 512)) / 22).astype(np.float16)
    rows[0, :4] = [0.0, -0.0, 3e-7, -5e-6]  # zeros and subnormals
    q = (rng.standard_normal(512) / 22).astype(np.float32)
    assert np.array_equal(blas.rows_dot(rows, q), rows.astype(np.float32) @ q)


def test_quantized_rows_pack_and_unpack_to_themselves() -> None:
    rng = np.random.default_rng(5)
    rows = rng.standard_normal((500, 256)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rows[0], rows[1] = 0.0, rows[1] * 40  # a zero row (an empty text) and a large one
    kept = quant.quantize(rows)
    assert kept.dtype == np.float16 and np.abs(kept.astype(np.float32) - rows).max() < 2e-3 * 40
    packed = quant.pack(kept)
    assert packed.dtype == np.int8 and packed.shape == (500, 257)
    assert np.array_equal(quant.unpack(packed), kept) and not kept[0].any()
    assert np.array_equal(quant.quantize(kept), kept)  # rounding again changes nothing
