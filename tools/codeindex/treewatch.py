"""Whether a git work tree changed since the last look, without running git: Linux inotify (ctypes).

The search socket (`searchserver.py`) checks a repository's freshness before every answer; `git
status` costs 30-80 ms of a loaded machine's wall time, a read of this watch's queue microseconds.
Every directory of the tree is watched (new ones as they appear), and of `.git` the directory
itself (HEAD, the index, packed-refs) and `refs/`. `changed()` is True when any event arrived since
the previous call, on the first call, and always when the watch cannot be kept (not Linux, no
inotify, the per-user watch limit reached, the queue overflowed once): then the caller runs `git
status` as before. Events that arrive after a call are seen by the next one, as an edit made after a
local search's `git status` is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
from pathlib import Path

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_Q_OVERFLOW, IN_ISDIR = 0x400, 0x800, 0x4000, 0x40000000
IN_ONLYDIR, IN_NONBLOCK, IN_CLOEXEC = 0x1000000, 0o4000, 0o2000000
MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE) | (
    IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
)
EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1, libc.inotify_add_watch  # noqa: B018 (present: Linux)
    except (OSError, AttributeError):
        return None
    return libc


class TreeWatch:
    """Events under one work tree since the last `changed()`."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._libc = _libc()
        self._fd: int | None = None
        self._dirs: dict[int, Path] = {}
        self._first = True
        if self._libc is None or not (self.root / ".git").is_dir():
            return  # a git worktree's .git is a file: its HEAD lives elsewhere; git decides then
        fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            return
        self._fd = fd
        if not self._add_tree(self.root):
            self.close()

    @property
    def watching(self) -> bool:
        """Whether events are being watched (False: every `changed()` is True)."""
        return self._fd is not None

    def _add(self, directory: Path) -> bool:
        assert self._libc is not None and self._fd is not None
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(directory), MASK)
        if wd < 0:
            return ctypes.get_errno() == 2  # ENOENT: gone already (its removal was an event); else a limit
        self._dirs[wd] = directory
        return True

    def _add_tree(self, top: Path) -> bool:
        git = self.root / ".git"
        for here, subdirs, _files in os.walk(top):
            path = Path(here)
            if path == git:
                subdirs[:] = ["refs"] if "refs" in subdirs else []
            if not self._add(path):
                return False
        return True

    def changed(self) -> bool:
        """True when anything changed since the previous call (or the watch cannot tell)."""
        if self._fd is None:
            return True
        seen, self._first = self._first, False
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return seen
            except OSError:
                self.close()
                return True
            seen = seen or bool(data)
            if not self._events(data):
                self.close()
                return True

    def _events(self, data: bytes) -> bool:
        """Follow new directories; False when the watch was lost (overflow, a limit)."""
        at = 0
        while at + EVENT.size <= len(data):
            wd, mask, _cookie, length = EVENT.unpack_from(data, at)
            name = data[at + EVENT.size : at + EVENT.size + length].rstrip(b"\0")
            at += EVENT.size + length
            if mask & IN_Q_OVERFLOW:
                return False
            parent = self._dirs.get(wd)
            if parent is None or not (mask & IN_ISDIR and mask & (IN_CREATE | IN_MOVED_TO)):
                continue
            if parent != self.root / ".git" and not self._add_tree(parent / os.fsdecode(name)):
                return False
        return True

    def close(self) -> None:
        """Stop watching (every later `changed()` is True)."""
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None
        self._dirs.clear()
