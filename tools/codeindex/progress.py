"""Progress of a long index build: a wrapper around the files or batches being worked through."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

Progress = Callable[[Iterable[str], str, int], Iterable[str]]


def no_progress(items: Iterable[str], desc: str, total: int) -> Iterable[str]:
    """A progress wrapper that shows nothing."""
    return items


def tqdm_progress(items: Iterable[str], desc: str, total: int) -> Iterable[str]:
    """A tqdm bar on stderr (stdout stays clean for JSON)."""
    from tqdm import tqdm

    return tqdm(items, desc=desc, total=total, file=sys.stderr, unit="file", leave=False)
