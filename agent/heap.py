"""Giving the C heap's free memory back to the system after large, short-lived allocations.

Loading or updating a code index allocates and frees tens of megabytes of temporaries (file texts,
numpy copies). glibc keeps freed heap memory in the process for reuse, so a serve's resident size
kept ~13 MB it no longer used after loading the React Native index (`tests/bench/bench_serve_rss.py
--probe-trim`). `give_back()` asks glibc to return it (`malloc_trim(0)`); where the C library has no
such call (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes


def give_back() -> bool:
    """Return the heap's free pages to the system; whether anything was returned."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return bool(trim(0))
