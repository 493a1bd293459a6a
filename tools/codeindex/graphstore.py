"""The symbol graph's file beside the index: `graph.bin`, one record per file's facts, append-only.

A record is `(path, facts)` (refs.FileFacts as a tuple, `to_json`'s order) or `(path, None)` for a
file gone, written by `marshal` and preceded by its length (4 bytes, little-endian); a later record
for a path replaces an earlier one. A save hard-links the saved file into the new index directory
and appends the records of the files re-indexed since (as units.jsonl does), so an update writes
only what changed; `meta.json` records the valid records and bytes (records a crashed save
appended are ignored). Once superseded records are more than half of the file it is rewritten
whole. Nothing is read until the graph is asked for: a search never loads it.

Why marshal, not JSON lines: the facts are strings, numbers, lists, tuples and dicts only, which
marshal writes ~4x and reads ~4x faster than the json module (ten stdlib packages: 35 -> 9 ms to
write, 96 -> 23 ms to read), and it keeps the refs as tuples, so none is made again on load. It is
Python's own format for .pyc files, read here only from the index directory xihe wrote (it is not
for data from elsewhere); the index's version in `meta.json` rebuilds an index saved otherwise.
"""

from __future__ import annotations

import marshal
import os
from pathlib import Path

from xihe.tools.codeindex.refs import FileFacts

FILE = "graph.bin"
_VERSION = 4  # marshal's format: the same on every Python 3.4+


def _record(path: str, facts: FileFacts | None) -> bytes:
    """One record: the length of the marshalled (path, facts), then it."""
    body = marshal.dumps((path, facts.to_json() if facts is not None else None), _VERSION)
    return len(body).to_bytes(4, "little") + body


def records(data: bytes, count: int) -> list[tuple[str, tuple[object, ...] | None]]:
    """The first `count` records of `data` as (path, facts as a tuple or None)."""
    out, at, view = [], 0, memoryview(data)
    for _ in range(count):
        size = int.from_bytes(view[at : at + 4], "little")
        out.append(marshal.loads(view[at + 4 : at + 4 + size]))
        at += 4 + size
    return out


class GraphFacts:
    """Every indexed file's facts: the saved file, read on first use, plus the changes since."""

    def __init__(self, directory: Path | None = None, on_disk: tuple[int, int] | None = None) -> None:
        self.directory = directory  # where the saved file is (None: nothing saved yet)
        self.on_disk = on_disk  # (records, bytes) of it that meta.json vouches for
        self.pending: dict[str, bytes] = {}  # path -> its record, not yet saved
        self.gone: set[str] = set()  # the pending paths whose record says the file is gone
        self._loaded: dict[str, FileFacts] | None = None

    def set(self, path: str, facts: FileFacts | None) -> None:
        """Record a re-indexed file's facts (None: the file is gone)."""
        self.pending[path] = _record(path, facts)
        if facts is None:
            self.gone.add(path)
        else:
            self.gone.discard(path)
        if self._loaded is not None:
            if facts is None:
                self._loaded.pop(path, None)
            else:
                self._loaded[path] = facts

    def _read(self) -> dict[str, FileFacts]:
        """The saved facts by path."""
        out: dict[str, FileFacts] = {}
        if self.directory is None or self.on_disk is None:
            return out
        count, size = self.on_disk
        with open(self.directory / FILE, "rb") as fh:
            data = fh.read(size)
        _apply(out, records(data, count))
        return out

    def all(self) -> dict[str, FileFacts]:
        """Every file's facts, the unsaved changes applied."""
        if self._loaded is None:
            loaded = self._read()
            _apply(loaded, records(b"".join(self.pending.values()), len(self.pending)))
            self._loaded = loaded
        return self._loaded

    def save(self, target: Path, live_files: int) -> tuple[int, int]:
        """Write graph.bin into the new index directory `target`; (records, bytes) written."""
        out = target / FILE
        start = 0
        saved = self.directory / FILE if self.directory is not None else None
        if self.on_disk is not None and saved is not None and saved.exists():
            count = self.on_disk[0] + len(self.pending)
            if count <= 2 * live_files + 64:  # still mostly live: append
                try:
                    os.link(saved, out)
                    start = 1
                except OSError:
                    start = 0
        if start:
            assert self.on_disk is not None
            with open(out, "r+b") as fh:
                fh.truncate(self.on_disk[1])
                fh.seek(self.on_disk[1])
                fh.write(b"".join(self.pending.values()))
                result = (self.on_disk[0] + len(self.pending), fh.tell())
        elif self.on_disk is None and self._loaded is None:  # nothing saved: the pending records are all
            live = [record for path, record in self.pending.items() if path not in self.gone]
            with open(out, "wb") as fh:
                fh.write(b"".join(live))
                result = (len(live), fh.tell())
        else:
            facts = self.all()
            with open(out, "wb") as fh:
                fh.write(b"".join(_record(path, f) for path, f in facts.items()))
                result = (len(facts), fh.tell())
        self.pending, self.gone = {}, set()
        self.on_disk = result
        return result

    def moved(self, directory: Path) -> None:
        """The index directory was swapped in at `directory`: the saved file is there now."""
        self.directory = directory


def _apply(facts: dict[str, FileFacts], found: list[tuple[str, tuple[object, ...] | None]]) -> None:
    """Apply records in order: a file's facts set, or dropped when None."""
    for path, payload in found:
        if payload is None:
            facts.pop(path, None)
        else:
            facts[path] = FileFacts.from_saved(payload)
