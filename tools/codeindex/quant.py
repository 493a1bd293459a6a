"""Vectors at 8 bits: each row an int8 mantissa per value and one power-of-two scale.

An index keeps its vectors in memory as float16 (`blas.rows_dot` multiplies them exactly) and
saves them as int8 with the row's exponent: 1 byte a value instead of 2. The rounding is done once,
when a vector is made (`quantize`), so the float16 values in memory are exactly `q * 2**k`: `pack`
finds the same q and k again from them (the largest |q| is 64..127, so the exponent read back from
the row is its own), and `unpack` gives the same float16 values. An index therefore ranks the same
built in memory and loaded. `xihe eval search` on both held-out sets: every hybrid and BM25 figure
the same as with float16 vectors; the vector channel alone moved by up to 0.019 MRR@10 (APScheduler
docstrings down, React Native's up).
"""

from __future__ import annotations

import numpy as np

TOP = 127  # the largest int8 mantissa
LOWEST = -24  # float16 holds q * 2**k exactly down to here


def _exponents(rows: np.ndarray) -> np.ndarray:
    """Per row the smallest k with max|row| / 2**k <= 127 (0 for a zero or empty row)."""
    if rows.size == 0:
        return np.zeros(len(rows), np.int64)
    top = np.abs(rows).max(axis=1).astype(np.float64)
    k = np.zeros(len(rows), np.int64)
    nonzero = top > 0
    k[nonzero] = np.ceil(np.log2(top[nonzero] / TOP))
    return np.maximum(k, LOWEST)


def quantize(rows: np.ndarray) -> np.ndarray:
    """`rows` rounded to 8-bit mantissas with a power-of-two scale per row, as float16 (exact)."""
    rows = np.asarray(rows, np.float32)
    scale = np.ldexp(np.float32(1), _exponents(rows))[:, None].astype(np.float32)
    q = np.clip(np.rint(rows / scale), -TOP, TOP)
    out: np.ndarray = (q * scale).astype(np.float16)
    return out


def pack(rows: np.ndarray) -> np.ndarray:
    """Quantized float16 rows as int8: the mantissas, then the row's exponent in the last column."""
    rows = np.asarray(rows, np.float32)
    k = _exponents(rows)
    q = np.rint(rows / np.ldexp(np.float32(1), k)[:, None].astype(np.float32))
    return np.concatenate([q, k[:, None]], axis=1).astype(np.int8)


def unpack(packed: np.ndarray) -> np.ndarray:
    """The float16 rows `pack` was given."""
    q = packed[:, :-1].astype(np.float32)
    scale = np.ldexp(np.float32(1), packed[:, -1].astype(np.int64))[:, None].astype(np.float32)
    out: np.ndarray = (q * scale).astype(np.float16)
    return out
