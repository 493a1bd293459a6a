"""A share of the interpreter for a large pool of threads that mostly wait on I/O.

The chat lane runs each model turn on its own thread (hundreds in flight), and each turn spends
seconds waiting on the model server between short stretches of Python. When a burst starts two
hundred turns at once, all of them are runnable together, and the interpreter lock goes round them
all: a command worker beside them gets one slice in two hundred, and a `/status` that needs 10 ms
of CPU waits most of a second. A `CpuShare` lets only `slots` threads of its pool run Python at
once. A thread holds a slot while it works (`taken`) and gives it up while it waits on the model or
on a tool (`waiting`), so the pool still keeps every turn in flight, and the threads outside the
pool (command workers, the HTTP server) compete with a few threads instead of hundreds.

`waiting` is a plain function: the code that waits (the model step, the executor) does not know
which pool, if any, its thread belongs to. A thread outside every pool waits as before.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

_held = threading.local()  # .share: the CpuShare whose slot this thread holds


class CpuShare:
    """At most `slots` threads inside `taken` run at once, less those inside `waiting`."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"a CPU share needs at least one slot, got {slots}")
        self.slots = slots
        self._free = threading.Semaphore(slots)

    @contextlib.contextmanager
    def taken(self) -> Iterator[None]:
        """Hold a slot for the body (waits for one); `waiting` inside gives it up for a while."""
        self._free.acquire()
        _held.share = self
        try:
            yield
        finally:
            _held.share = None
            self._free.release()


@contextlib.contextmanager
def waiting() -> Iterator[None]:
    """Give the current thread's slot up while the body waits on I/O, and take one again after."""
    share: CpuShare | None = getattr(_held, "share", None)
    if share is None:
        yield
        return
    _held.share = None
    share._free.release()
    try:
        yield
    finally:
        share._free.acquire()
        _held.share = share
