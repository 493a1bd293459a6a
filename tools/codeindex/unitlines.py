"""The units of a saved index, read from `units.jsonl` one line at a time when a slot is asked for.

Parsing all 16k lines of a large index cost ~60% of a `xihe search` that shows ten hits. The line
starts are found with numpy over the file memory-mapped once; a unit is read (`pread`) and parsed on
first access and kept.
Iterating (a build's inheritance check, `live_units`) parses every line, as loading did before.
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Iterable, MutableSequence
from pathlib import Path
from typing import overload

import numpy as np

from xihe.tools.codeindex.units import CodeUnit

_UNREAD = object()


class UnitLines(MutableSequence[CodeUnit | None]):
    """Slots -> units, parsed lazily from the first `lines` lines of a units.jsonl (a dead slot is None)."""

    def __init__(self, path: Path, lines: int, alive: np.ndarray) -> None:
        # the file stays open (what replaces its name later is not read); a line is read with pread
        # when asked for: the pages the line scan touched are not kept mapped in the process, where
        # they counted in its resident size (7 MB for React Native)
        self._file = open(path, "rb", buffering=0)  # noqa: SIM115 (closed with this object)
        size = os.fstat(self._file.fileno()).st_size
        ends = _empty()
        if size:
            with mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                view = np.frombuffer(buf, np.uint8)
                ends = np.flatnonzero(view == 10)[:lines]
                del view  # the mapping closes only without views of it
        if len(ends) < lines:
            raise ValueError(f"{path}: {len(ends)} complete lines, meta.json says {lines}")
        self._starts = np.r_[0, ends[:-1] + 1] if lines else _empty()
        self._ends = ends
        self._items: list[object] = [_UNREAD if alive[i] else None for i in range(lines)]

    def _read(self, i: int) -> CodeUnit | None:
        item = self._items[i]
        if item is _UNREAD:
            start = int(self._starts[i])
            raw = os.pread(self._file.fileno(), int(self._ends[i]) - start, start)
            item = None if raw.strip() == b"null" else CodeUnit.from_json(json.loads(raw))
            self._items[i] = item
        return item  # type: ignore[return-value]

    @overload
    def __getitem__(self, i: int) -> CodeUnit | None: ...
    @overload
    def __getitem__(self, i: slice) -> list[CodeUnit | None]: ...
    def __getitem__(self, i: int | slice) -> CodeUnit | list[CodeUnit | None] | None:
        if isinstance(i, slice):
            return [self._read(j) for j in range(*i.indices(len(self._items)))]
        return self._read(range(len(self._items))[i])

    @overload
    def __setitem__(self, i: int, value: CodeUnit | None) -> None: ...
    @overload
    def __setitem__(self, i: slice, value: Iterable[CodeUnit | None]) -> None: ...
    def __setitem__(self, i: int | slice, value: object) -> None:
        if isinstance(i, slice):
            raise TypeError("UnitLines: slice assignment is not supported")
        self._items[i] = value

    def __delitem__(self, i: int | slice) -> None:
        raise TypeError("UnitLines: slots are never deleted (compact builds a new list)")

    def __len__(self) -> int:
        return len(self._items)

    def insert(self, index: int, value: CodeUnit | None) -> None:
        if index != len(self._items):
            raise TypeError("UnitLines: units are only appended")
        self._items.append(value)


def _empty() -> np.ndarray:
    return np.zeros(0, np.int64)
