"""Holding numpy's BLAS to a number of threads around a product (threadpoolctl).

A matrix-vector product over an index's rows is memory-bound: on a busy 2-core machine OpenBLAS's
threads wait for each other and the product runs 3-5x slower than on one thread, so every query's
products run on one (`OPENBLAS_NUM_THREADS` set or not). One controller per process: finding the
loaded BLAS libraries is the slow part.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

# float16 rows widened at a time: a 768 KB buffer for 512-d rows, under glibc's mmap threshold as a
# serve fixes it (1 MB, agent/heap.py), so it is reused rather than mapped and faulted in per query
BLOCK = 384
_SCALE = np.float32(2.0**112)  # float16's exponent bias (15) against float32's (127)
_FIELDS = np.array([0x8FFFE000], np.uint32).view(np.int32)[0]  # sign, exponent and mantissa bits

_controller: Any = None
_lock = threading.Lock()


def limited(threads: int = 1) -> AbstractContextManager[Any]:
    """A context during which numpy's BLAS uses at most `threads` threads."""
    global _controller
    if _controller is None:
        with _lock:
            if _controller is None:
                from threadpoolctl import ThreadpoolController

                _controller = ThreadpoolController()
    return _controller.limit(limits=threads, user_api="blas")


def rows_dot(rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """`rows @ q` in float32. An index keeps some vectors as float16, half the memory, exactly as they
    are saved. numpy's float16 cast took 1.7 ms per million values here, the product itself 0.03 ms:
    the bits are moved instead (`_widen`, 0.17 ms), and the product is exact, bit for bit the float32
    product of the same values."""
    if rows.dtype != np.float16:
        out: np.ndarray = rows @ q
        return out
    scaled = np.asarray(q, np.float32) * _SCALE  # a power of two: exact
    result = np.empty(len(rows), np.float32)
    bits = np.empty((min(BLOCK, len(rows)), rows.shape[1]), np.int32)
    half = rows.view(np.int16)
    for i in range(0, len(rows), BLOCK):
        k = min(BLOCK, len(rows) - i)
        np.dot(_widen(half[i : i + k], bits[:k]), scaled, out=result[i : i + k])
    return result


def _widen(half: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """float16 values (their bits as int16) as float32 values 2**-112 times as large, exactly, zeros
    and subnormals included: the sign-extended bits shifted so exponent and mantissa land in float32's
    places (float16's exponent field read with float32's bias, 112 less) and the sign's copies cleared
    but the top one. `bits` is int32 scratch of half's shape; the result is a view of it."""
    np.copyto(bits, half)
    np.left_shift(bits, 13, out=bits)
    np.bitwise_and(bits, _FIELDS, out=bits)
    return bits.view(np.float32)
