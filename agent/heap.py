"""The C heap of a long-running serve: fewer arenas, and free memory given back after big allocations.

Loading or updating a code index allocates and frees tens of megabytes of temporaries (file texts,
numpy copies). glibc keeps freed heap memory in the process for reuse, so a serve's resident size
kept ~13 MB it no longer used after loading the React Native index (`tests/bench/bench_serve_rss.py
--probe-trim`). `give_back()` asks glibc to return it (`malloc_trim(0)`); where the C library has no
such call (musl, macOS) it does nothing.

glibc also gives threads their own heaps ("arenas", up to eight per core), each keeping its own free
memory; a serve's threads (HTTP workers, model calls, jobs) spread small allocations over many of
them. `limit_arenas()` caps them at two, as `MALLOC_ARENA_MAX=2` would (unless that variable is set):
~9 MB less after 1,000 messages with the React Native index, CPU unchanged in the same benchmark.
"""

from __future__ import annotations

import ctypes
import os

M_ARENA_MAX = -8  # glibc's mallopt parameters
M_MMAP_THRESHOLD = -3
ARENAS = 2
MMAP_THRESHOLD = 1024 * 1024


def give_back() -> bool:
    """Return the heap's free pages to the system; whether anything was returned."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return bool(trim(0))


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas and fix its mmap threshold (before threads start); False where
    unsupported or already set by the operator (MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_).

    The threshold: glibc serves a block of 128 KB or more with its own mapping, returned when freed,
    but raises the threshold to the size of each such block freed (up to 32 MB), after which blocks
    that size come from the heap and stay in the process when freed. A serve's searches and index
    updates free many blocks of megabytes (numpy temporaries); with the threshold fixed they always
    go back to the system."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    if "MALLOC_ARENA_MAX" in os.environ:  # the operator's choice, read by glibc itself
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))
