"""The symbol graph's file beside the index: `graph.jsonl`, one line per file's facts, append-only.

Each line is `[path, facts]` (refs.FileFacts as a list) or `[path, null]` for a file gone; a later
line for a path replaces an earlier one. A save hard-links the saved file into the new index
directory and appends the lines of the files re-indexed since (as units.jsonl does), so an update
writes only what changed; `meta.json` records the valid lines and bytes (lines a crashed save
appended are ignored). Once superseded lines are more than half of the file it is rewritten whole.
Nothing is read until the graph is asked for: a search never loads it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from xihe.tools.codeindex.refs import FileFacts

FILE = "graph.jsonl"
_LINE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)  # one line's JSON


class GraphFacts:
    """Every indexed file's facts: the saved file, read on first use, plus the changes since."""

    def __init__(self, directory: Path | None = None, on_disk: tuple[int, int] | None = None) -> None:
        self.directory = directory  # where the saved file is (None: nothing saved yet)
        self.on_disk = on_disk  # (lines, bytes) of it that meta.json vouches for
        self.pending: dict[str, str] = {}  # path -> its JSON line, not yet saved
        self.gone: set[str] = set()  # the pending paths whose line says the file is gone
        self._loaded: dict[str, FileFacts] | None = None

    def set(self, path: str, facts: FileFacts | None) -> None:
        """Record a re-indexed file's facts (None: the file is gone)."""
        payload = facts.to_json() if facts is not None else None
        self.pending[path] = _LINE.encode([path, payload])
        if facts is None:
            self.gone.add(path)
        else:
            self.gone.discard(path)
        if self._loaded is not None:
            if facts is None:
                self._loaded.pop(path, None)
            else:
                self._loaded[path] = facts

    def _read(self) -> tuple[dict[str, FileFacts], int]:
        """The saved facts by path, and how many lines the saved file has."""
        out: dict[str, FileFacts] = {}
        if self.directory is None or self.on_disk is None:
            return out, 0
        lines, size = self.on_disk
        with open(self.directory / FILE, "rb") as fh:
            data = fh.read(size)
        n = 0
        for raw in data.splitlines()[:lines]:
            path, payload = json.loads(raw)
            n += 1
            if payload is None:
                out.pop(path, None)
            else:
                out[path] = FileFacts.from_json(payload)
        return out, n

    def all(self) -> dict[str, FileFacts]:
        """Every file's facts, the unsaved changes applied."""
        if self._loaded is None:
            loaded, _ = self._read()
            for raw in self.pending.values():
                path, payload = json.loads(raw)
                if payload is None:
                    loaded.pop(path, None)
                else:
                    loaded[path] = FileFacts.from_json(payload)
            self._loaded = loaded
        return self._loaded

    def save(self, target: Path, live_files: int) -> tuple[int, int]:
        """Write graph.jsonl into the new index directory `target`; (lines, bytes) written."""
        out = target / FILE
        start = 0
        saved = self.directory / FILE if self.directory is not None else None
        if self.on_disk is not None and saved is not None and saved.exists():
            lines = self.on_disk[0] + len(self.pending)
            if lines <= 2 * live_files + 64:  # still mostly live: append
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
                for line in self.pending.values():
                    fh.write(line.encode("utf-8") + b"\n")
                result = (self.on_disk[0] + len(self.pending), fh.tell())
        elif self.on_disk is None and self._loaded is None:  # nothing saved: the pending lines are all
            live = [line for path, line in self.pending.items() if path not in self.gone]
            with open(out, "wb") as fh:
                fh.write("".join(f"{line}\n" for line in live).encode("utf-8"))
                result = (len(live), fh.tell())
        else:
            facts = self.all()
            with open(out, "wb") as fh:
                for path, f in facts.items():
                    line = _LINE.encode([path, f.to_json()])
                    fh.write(line.encode("utf-8") + b"\n")
                result = (len(facts), fh.tell())
        self.pending, self.gone = {}, set()
        self.on_disk = result
        return result

    def moved(self, directory: Path) -> None:
        """The index directory was swapped in at `directory`: the saved file is there now."""
        self.directory = directory
