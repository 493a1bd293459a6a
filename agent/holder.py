"""Lease holders are named `host:pid`; on the same host we can tell whether one is dead."""

from __future__ import annotations

import os
import socket


def holder_name() -> str:
    """This process's lease-holder name."""
    return f"{socket.gethostname()}:{os.getpid()}"


def holder_is_dead(holder: str | None) -> bool:
    """True for a `host:pid` holder on this host whose process no longer exists."""
    host, _, pid = (holder or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
