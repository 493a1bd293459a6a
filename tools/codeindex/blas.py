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
