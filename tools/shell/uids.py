"""Hands each running command its own uid from `run_as_uids`, so per-user limits count one command.

RLIMIT_NPROC counts the processes of a user. With one shared sandbox uid, one user's fork bomb
used up the count of everyone's commands. The pool is process-wide (a reloaded config's runner
shares it with commands still running under the previous one); two bot processes on one host
should be given separate ranges.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from xihe.agent.errors import ToolFailed
from xihe.agent.i18n import text
from xihe.tools.shell.messages import SH

_lock = threading.Lock()
_in_use: set[int] = set()


def acquire(first: int, count: int) -> int:
    """The lowest free uid in [first, first + count); ToolFailed when all are busy."""
    with _lock:
        for uid in range(first, first + count):
            if uid not in _in_use:
                _in_use.add(uid)
                return uid
    raise ToolFailed(text(SH, "uids_busy", count=count, first=first, last=first + count - 1))


def release(uid: int) -> None:
    """Give a uid back once its command and all its processes are gone."""
    with _lock:
        _in_use.discard(uid)


@contextmanager
def held(first: int, count: int) -> Iterator[int]:
    """A uid for the duration of one command."""
    uid = acquire(first, count)
    try:
        yield uid
    finally:
        release(uid)
