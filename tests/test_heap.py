"""agent/heap.py: the serve's malloc arenas capped unless the operator set MALLOC_ARENA_MAX, and the
heap's free memory given back (glibc; a no-op elsewhere)."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

from xihe.agent import heap


def _glibc() -> bool:
    try:
        return hasattr(ctypes.CDLL(None), "malloc_trim")
    except OSError:
        return False


@pytest.mark.skipif(not _glibc(), reason="glibc only")
def test_arenas_are_capped_unless_the_operator_chose() -> None:
    code = "from xihe.agent.heap import limit_arenas, give_back; print(limit_arenas(), give_back() in (True, False))"
    env = {k: v for k, v in __import__("os").environ.items() if k != "MALLOC_ARENA_MAX"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["True", "True"]
    chosen = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env | {"MALLOC_ARENA_MAX": "4"},
    )
    assert chosen.stdout.split() == ["False", "True"]


def test_without_the_c_library_calls_nothing_happens(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoTrim:
        def __init__(self, _name: object) -> None:
            pass

    monkeypatch.setattr(heap.ctypes, "CDLL", NoTrim)
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert heap.give_back() is False
    assert heap.limit_arenas() is False
