"""The import path a test's child process gets: the caller's PYTHONPATH first, then the checkout.

A worktree's tests run with PYTHONPATH pointing at that worktree's `xihe`; a child started with
PYTHONPATH set to the checkout alone would import whichever `xihe` is installed instead.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def pythonpath() -> str:
    """The caller's PYTHONPATH, then the checkout (so `python -m tests.…` works in the child)."""
    return os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), str(REPO)) if p)
