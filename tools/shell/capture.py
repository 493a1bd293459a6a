"""Bounded capture of one output stream: head and tail for the result, a capped spool for the artifact.

Memory stays O(head + tail + spool cap) however much a command prints; the sha256 covers every byte.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path


class StreamCapture:
    """Keeps the first `head` and last `tail` bytes, a spool of up to `spool_cap` bytes, a count and a digest."""

    def __init__(self, head: int, tail: int, spool_cap: int) -> None:
        self.head_cap, self.tail_cap, self.spool_cap = head, tail, spool_cap
        self.head = bytearray()
        self._tail = bytearray()
        self.spool = bytearray()
        self.total = 0
        self._sha = hashlib.sha256()

    def feed(self, data: bytes) -> None:
        """Account for one chunk read from the pipe."""
        self.total += len(data)
        self._sha.update(data)
        spool_room = self.spool_cap - len(self.spool)
        if spool_room > 0:
            self.spool += data[:spool_room]
        room = self.head_cap - len(self.head)
        rest = data
        if room > 0:
            self.head += data[:room]
            rest = data[room:]
        if rest and self.tail_cap:
            self._tail += rest
            if len(self._tail) > 2 * self.tail_cap:  # trim in batches, not on every chunk
                del self._tail[: len(self._tail) - self.tail_cap]

    @property
    def truncated(self) -> bool:
        """True when bytes were dropped between head and tail."""
        return self.total > self.head_cap + self.tail_cap

    @property
    def sha256(self) -> str:
        """Hex digest of every byte seen."""
        return self._sha.hexdigest()

    def tail(self) -> bytes:
        """The last bytes after the head (at most `tail_cap`)."""
        return bytes(self._tail[-self.tail_cap :]) if self.tail_cap else b""

    def text(self) -> str:
        """Head and tail decoded, with a marker saying how much was left out."""
        if not self.truncated:
            return (bytes(self.head) + bytes(self._tail)).decode("utf-8", errors="replace")
        omitted = self.total - len(self.head) - len(self.tail())
        return (
            bytes(self.head).decode("utf-8", errors="replace")
            + f"\n[... {omitted} bytes omitted; full output in the artifact ...]\n"
            + self.tail().decode("utf-8", errors="replace")
        )


def pump(fd: int, capture: StreamCapture, on_chunk: Callable[[int], None]) -> threading.Thread:
    """Start a thread that reads `fd` to EOF into `capture`; `on_chunk(total)` lets the caller enforce a cap."""

    def run() -> None:
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                capture.feed(chunk)
                on_chunk(len(chunk))
        except OSError:
            return  # the fd was closed under us after a kill: nothing more to read

    thread = threading.Thread(target=run, name=f"shell-pump-{fd}", daemon=True)
    thread.start()
    return thread


class TempArtifacts:
    """Default artifact store: one file per output in a temp directory, each and all bounded."""

    def __init__(
        self,
        directory: str | Path | None = None,
        *,
        max_bytes: int = 16 << 20,
        max_total_bytes: int = 256 << 20,
    ) -> None:
        self._directory = Path(directory) if directory is not None else None
        self.max_bytes, self.max_total_bytes = max_bytes, max_total_bytes

    @property
    def directory(self) -> Path:
        """Where outputs go, made on first use (a runner that never saves leaves nothing behind)."""
        if self._directory is None:
            self._directory = Path(tempfile.mkdtemp(prefix="xihe-shell-artifacts-"))
        self._directory.mkdir(parents=True, exist_ok=True)
        return self._directory

    def __call__(self, data: bytes) -> str:
        """Save `data` (cut at max_bytes) and return its path; the oldest files go beyond max_total_bytes."""
        data = data[: self.max_bytes]
        digest = hashlib.sha256(data).hexdigest()
        path = self.directory / f"{digest}.out"
        path.write_bytes(data)
        files = sorted(self.directory.glob("*.out"), key=lambda p: p.stat().st_mtime)
        total = sum(p.stat().st_size for p in files)
        for old in files:
            if total <= self.max_total_bytes or old == path:
                break
            total -= old.stat().st_size
            old.unlink(missing_ok=True)
        return str(path)
