"""Row files saved as a base and a delta: a one-file update's save writes the rows that changed, not the index.

A full save writes every row file whole (the base). A later save hard-links each base, unchanged,
from the index directory being replaced into the new one and writes only the rows since the bases,
every file's in one `delta.npys` (`Delta`: BM25's changed and new rows, `bm25.py`; the query-word
table's new words, `qvec.py`). One file, because making a file costs more than writing it: 0.57 ms
of CPU a new inode on the 2-core VMs measured, ~12 of them a save (7 ms of a 60 ms update). When a
file's rows pass `SHARE` of its base, or the slots were renumbered (compaction), or the saved base
is not the one remembered (another process saved), that file is written whole again: the delta's
compaction. A base is never written to after it is made, and the directory is swapped in whole
(`store.py`), so a save that dies midway leaves the previous index as it was.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SHARE = 0.1  # a delta above this share of its base's rows is folded into a new base
FILE = "delta.npys"


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


def unchanged(current: Path | None, name: str, base: Base | None) -> bool:
    """Whether `current/name` is still the remembered `base`."""
    if current is None or base is None:
        return False
    try:
        st = (current / name).stat()
    except OSError:
        return False
    return (st.st_ino, st.st_size) == (base.inode, base.size)


def link(current: Path | None, target: Path, name: str, base: Base | None) -> bool:
    """Hard-link `current/name` into `target` when it is still the remembered `base`; False otherwise."""
    if current is None or not unchanged(current, name, base):
        return False
    try:
        os.link(current / name, target / name)
    except OSError:
        return False
    return True


class Delta:
    """The deltas of one save by name, written as one file: a record of their names, then one `.npy`
    record each (`np.savez`'s zip archive cost several times more). A text (new vocabulary) is kept
    as its UTF-8 bytes."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def put(self, name: str, array: np.ndarray) -> None:
        self.arrays[name] = array

    def put_text(self, name: str, text: str) -> None:
        self.put(name, np.frombuffer(text.encode("utf-8"), np.uint8))

    def write(self, directory: Path) -> None:
        """`directory/delta.npys`, when there is any delta."""
        if self.arrays:
            save_named(directory / FILE, self.arrays)


def read_delta(directory: Path) -> dict[str, np.ndarray]:
    """The arrays `Delta.write` wrote to `directory`, by name (none when it wrote no file)."""
    try:
        return load_named(directory / FILE)
    except FileNotFoundError:
        return {}


def save_named(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Named arrays in one file: a `.npy` record of their names, then one record each. A third of
    `np.savez`'s time (its zip archive checksums every byte), and read back in 40% of `np.load`'s."""
    with open(path, "wb") as fh:
        np.save(fh, np.asarray(list(arrays), dtype=str))
        for a in arrays.values():
            np.save(fh, a)


def load_named(path: Path) -> dict[str, np.ndarray]:
    """The arrays `save_named` wrote, by name."""
    with open(path, "rb") as fh:
        names = np.load(fh)
        return {str(n): np.load(fh) for n in names}


def text_of(array: np.ndarray) -> str:
    """A text `Delta.put_text` kept."""
    return array.tobytes().decode("utf-8")


def save_rows(
    current: Path | None,
    target: Path,
    name: str,
    rows: np.ndarray,
    bases: dict[str, Base],
    dtype: type,
    delta: Delta,
    convert: Callable[[np.ndarray], np.ndarray] | None = None,
) -> None:
    """Save `rows` (append-only between compactions) under `target` as `<name>.npy`, or as the linked
    base plus the rows after it in `delta`; `bases` keeps each name's base. `convert` turns the rows
    written into what is saved (quant.pack), else they are saved as `dtype`."""

    def saved(part: np.ndarray) -> np.ndarray:
        return convert(part) if convert is not None else np.asarray(part, dtype=dtype)

    base = bases.get(name)
    grown = base is not None and base.rows <= len(rows)
    if (
        grown
        and base is not None
        and small(base, len(rows) - base.rows)
        and link(current, target, f"{name}.npy", base)
    ):
        if len(rows) > base.rows:
            delta.put(name, saved(rows[base.rows :]))
        return
    path = target / f"{name}.npy"
    if grown and base is not None and current is not None and unchanged(current, f"{name}.npy", base):
        # the rows are appended only (until a compaction, which forgets the bases): the saved base's
        # rows are copied as they are, only those since it converted (quant.pack of all the rows
        # was most of the save that folds a delta)
        kept = np.load(current / f"{name}.npy", mmap_mode="r")
        np.save(path, np.concatenate([kept, saved(rows[base.rows :])]))
    else:
        np.save(path, saved(rows))
    bases[name] = remember(path, len(rows))


def load_rows(directory: Path, name: str, bases: dict[str, Base], delta: dict[str, np.ndarray]) -> np.ndarray:
    """The rows `save_rows` wrote: the base, then its rows in `delta` (`read_delta`) when there are any."""
    path = directory / f"{name}.npy"
    rows = np.load(path)
    bases[name] = remember(path, len(rows))
    more = delta.get(name)
    if more is not None:
        rows = np.concatenate([rows, more]) if len(rows) else more
    return rows
