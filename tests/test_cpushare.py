"""`CpuShare`: at most `slots` threads of a pool run at once; a thread waiting on I/O lets another in."""

from __future__ import annotations

import threading

import pytest

from xihe.agent.cpushare import CpuShare, waiting

TIMEOUT = 10  # generous: only a broken share makes a test wait this long


def _enter(share: CpuShare, inside: threading.Event, leave: threading.Event) -> threading.Thread:
    def run() -> None:
        with share.taken():
            inside.set()
            leave.wait(TIMEOUT)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_a_thread_beyond_the_slots_waits_until_one_frees() -> None:
    share = CpuShare(1)
    first_in, first_out = threading.Event(), threading.Event()
    second_in, second_out = threading.Event(), threading.Event()
    first = _enter(share, first_in, first_out)
    assert first_in.wait(TIMEOUT)
    second = _enter(share, second_in, second_out)
    assert not second_in.wait(0.2)  # the one slot is taken
    first_out.set()
    assert second_in.wait(TIMEOUT)  # it frees when the first leaves
    second_out.set()
    first.join(TIMEOUT), second.join(TIMEOUT)


def test_waiting_gives_the_slot_to_another_thread_and_takes_one_back() -> None:
    share = CpuShare(1)
    waiting_now, resumed, done_waiting = threading.Event(), threading.Event(), threading.Event()

    def waiter() -> None:
        with share.taken():
            with waiting():  # a model call: the slot is free meanwhile
                waiting_now.set()
                done_waiting.wait(TIMEOUT)
            resumed.set()

    w = threading.Thread(target=waiter, daemon=True)
    w.start()
    assert waiting_now.wait(TIMEOUT)
    other_in, other_out = threading.Event(), threading.Event()
    other = _enter(share, other_in, other_out)
    assert other_in.wait(TIMEOUT)  # runs while the first waits
    done_waiting.set()
    assert not resumed.wait(0.2)  # the first needs a slot back before it goes on
    other_out.set()
    assert resumed.wait(TIMEOUT)
    w.join(TIMEOUT), other.join(TIMEOUT)


def test_waiting_outside_any_share_just_runs() -> None:
    ran = []
    with waiting():
        ran.append(1)
    assert ran == [1]


def test_a_share_needs_a_slot() -> None:
    with pytest.raises(ValueError, match="at least one slot, got 0"):
        CpuShare(0)
