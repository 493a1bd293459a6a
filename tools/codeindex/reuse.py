"""Vectors of a re-indexed file's unchanged units, kept instead of embedding them again.

Every slot has a key: a hash of everything its vectors are made from (path, kind, qualified name,
signature, doc, the doc it inherits, its text). A re-indexed file's old slots are remembered by key
when dropped; a new unit with the same key takes that slot's rows (unit vector, doc sentences,
multilingual) instead of being embedded again. Adding one function to a 200-unit file then embeds
one unit, not 200: embedding was most of an update's cost (bench_graph.py `--speed`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from xihe.tools.codeindex.units import CodeUnit

FILE = "unit_keys.npy"


def unit_key(u: CodeUnit) -> int:
    """The 64-bit key of what `u`'s vectors are made from (`u` as search sees it: inherit.searched)."""
    parts = (u.path, u.kind, u.qualname, u.signature, u.doc, u.inherited_doc, u.text)
    digest = hashlib.blake2b("\x00".join(parts).encode("utf-8", "replace"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def keys_of(units: Sequence[CodeUnit]) -> np.ndarray:
    """The keys of `units`, as the uint64 array saved with the index."""
    return np.asarray([unit_key(u) for u in units], np.uint64)


def sentence_rows(owner: np.ndarray, slots: Sequence[int | None]) -> list[tuple[int, int] | None]:
    """For each old slot (None: a new unit), its (first, end) rows in the doc-sentence matrix, whose
    `owner` column is non-decreasing."""
    at = np.asarray([-1 if s is None else s for s in slots], np.int64)
    first = np.searchsorted(owner, at, "left").tolist()
    end = np.searchsorted(owner, at, "right").tolist()
    return [None if s is None else (a, b) for s, a, b in zip(slots, first, end, strict=True)]
