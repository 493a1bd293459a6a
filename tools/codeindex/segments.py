"""Row files saved as a base and a delta: a one-file update's save writes the rows that changed, not the index.

A full save writes every row file whole (the base). A later save hard-links each base, unchanged,
from the index directory being replaced into the new one and writes only the rows since the base as
`<name>.delta.npy` (BM25: the changed and new rows, `<name>.delta.npys`, `bm25.py`). When those rows pass `SHARE` of the
base, or the slots were renumbered (compaction), or the saved base is not the one remembered (another
process saved), the file is written whole again: the delta's compaction. A base is never written to
after it is made, and the directory is swapped in whole (`store.py`), so a save that dies midway
leaves the previous index as it was.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SHARE = 0.1  # a delta above this share of its base's rows is folded into a new base


@dataclass(frozen=True)
class Base:
    """A base file as saved: its rows, and the inode and size that tell it is still the same file."""

    rows: int
    inode: int
    size: int


def remember(path: Path, rows: int) -> Base:
    """The `Base` of the file just written (or read) at `path`."""
    st = path.stat()
    return Base(rows, st.st_ino, st.st_size)


def small(base: Base | None, delta_rows: int) -> bool:
    """Whether a delta of `delta_rows` rows may stay beside `base` (not folded into a new base)."""
    return base is not None and delta_rows <= SHARE * max(base.rows, 1)


def link(current: Path | None, target: Path, name: str, base: Base | None) -> bool:
    """Hard-link `current/name` into `target` when it is still the remembered `base`; False otherwise."""
    if current is None or base is None:
        return False
    src = current / name
    try:
        st = src.stat()
        if (st.st_ino, st.st_size) != (base.inode, base.size):
            return False
        os.link(src, target / name)
    except OSError:
        return False
    return True


def save_rows(
    current: Path | None,
    target: Path,
    name: str,
    rows: np.ndarray,
    bases: dict[str, Base],
    dtype: type,
    convert: Callable[[np.ndarray], np.ndarray] | None = None,
) -> None:
    """Save `rows` (append-only between compactions) under `target` as `<name>.npy`, or as the linked
    base plus `<name>.delta.npy` of the rows after it; `bases` keeps each name's base. `convert`
    turns the rows written into what is saved (quant.pack), else they are saved as `dtype`."""

    def saved(part: np.ndarray) -> np.ndarray:
        return convert(part) if convert is not None else np.asarray(part, dtype=dtype)

    base = bases.get(name)
    fits = base is not None and base.rows <= len(rows) and small(base, len(rows) - base.rows)
    if fits and base is not None and link(current, target, f"{name}.npy", base):
        if len(rows) > base.rows:
            np.save(target / f"{name}.delta.npy", saved(rows[base.rows :]))
        return
    path = target / f"{name}.npy"
    np.save(path, saved(rows))
    bases[name] = remember(path, len(rows))


def load_rows(directory: Path, name: str, bases: dict[str, Base]) -> np.ndarray:
    """The rows `save_rows` wrote: the base, then its delta when there is one."""
    path = directory / f"{name}.npy"
    rows = np.load(path)
    bases[name] = remember(path, len(rows))
    delta = directory / f"{name}.delta.npy"
    if delta.exists():
        more = np.load(delta)
        rows = np.concatenate([rows, more]) if len(rows) else more
    return rows


def save_arrays(path: Path, arrays: list[np.ndarray]) -> None:
    """Several arrays in one file, one `.npy` record after another (`load_arrays` reads them in order):
    a BM25 delta is written at every save, and `np.savez`'s zip archive cost several times more."""
    with open(path, "wb") as fh:
        for a in arrays:
            np.save(fh, a)


def load_arrays(path: Path, count: int) -> list[np.ndarray]:
    """The first `count` arrays `save_arrays` wrote to `path`."""
    with open(path, "rb") as fh:
        return [np.load(fh) for _ in range(count)]
