"""What one replica's workers take next: two lanes, one turn at a time per conversation.

A channel's messages wait here in memory (their durable copy is the inbox row, leased to this replica):

- `command`: explicit commands (`/status`, `/confirm`, …) first in, first out, for the command workers;
  they never wait behind model work of other conversations.
- `chat`: free text for the model pool, fair per user: users take turns (round robin), so one user's
  ten questions do not starve another's first.

Within a lane a conversation runs one turn at a time: a message whose conversation has a turn
running in its lane waits and others pass it; it runs when that turn is `done`. A command does not
wait for its conversation's model turn: commands were already safe beside a turn (two replicas could
always run two messages of one conversation), and a `/status` must not sit behind a 20 s model call. Each lane holds at most `capacity` messages; `push` says when it is full
(the message then waits in the inbox). Thread-safe; the workers block in `take`.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Literal

Lane = Literal["command", "chat"]
LANES: tuple[Lane, ...] = ("command", "chat")


@dataclass(frozen=True)
class Waiting:
    """A message waiting for a worker: its inbox key, who sent it, where it is answered, and when it came."""

    key: str
    user: str
    conversation: str
    lane: Lane
    since: float  # monotonic seconds when it was queued (the wait-time metric)


class Lanes:
    """The two lanes of one replica's channel (see the module docstring)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._ready = {lane: threading.Condition(self._lock) for lane in LANES}
        self._commands: deque[Waiting] = deque()
        self._chat: dict[str, deque[Waiting]] = {}  # by user
        self._turns: deque[str] = deque()  # users with chat waiting, whose turn is next first
        self._chat_count = 0
        self._busy: dict[Lane, set[str]] = {
            lane: set() for lane in LANES
        }  # conversations with a turn running
        self._closed = False

    def push(self, w: Waiting) -> int | None:
        """Queue `w`; how many of its lane go before it, or None when the lane is full."""
        with self._lock:
            if self.depth(w.lane) >= self.capacity:
                return None
            if w.lane == "command":
                ahead = len(self._commands)
                self._commands.append(w)
            else:
                mine = self._chat.setdefault(w.user, deque())
                if not mine:
                    self._turns.append(w.user)
                # round robin: before its k-th message each other user runs up to k + 1 of theirs
                ahead = len(mine) + sum(
                    min(len(q), len(mine) + 1) for u, q in self._chat.items() if u != w.user
                )
                mine.append(w)
                self._chat_count += 1
            self._ready[w.lane].notify()
            return ahead

    def take(self, lane: Lane, timeout: float) -> Waiting | None:
        """The next message of `lane` whose conversation is free (now marked busy); None after `timeout`."""
        with self._lock:
            while not self._closed:
                w = self._next_command() if lane == "command" else self._next_chat()
                if w is not None:
                    self._busy[lane].add(w.conversation)
                    return w
                if not self._ready[lane].wait(timeout):
                    return None
            return None

    def done(self, w: Waiting) -> None:
        """`w`'s turn ended: its conversation's next message may run."""
        with self._lock:
            self._busy[w.lane].discard(w.conversation)
            self._ready[w.lane].notify()

    def depth(self, lane: Lane) -> int:
        """How many messages wait in `lane`."""
        return len(self._commands) if lane == "command" else self._chat_count

    def room(self, lane: Lane | None = None) -> int:
        """How many more messages `lane` takes (both lanes when None): what to pull from the inbox."""
        with self._lock:
            return sum(max(0, self.capacity - self.depth(each)) for each in LANES if lane in (None, each))

    def in_flight(self) -> int:
        """Turns running (a conversation may have a command beside its model turn)."""
        return sum(len(busy) for busy in self._busy.values())

    def close(self) -> None:
        """Wake every worker; `take` returns None from now on (the messages stay in the inbox)."""
        with self._lock:
            self._closed = True
            for ready in self._ready.values():
                ready.notify_all()

    def _next_command(self) -> Waiting | None:
        for i, w in enumerate(self._commands):
            if w.conversation not in self._busy["command"]:
                del self._commands[i]
                return w
        return None

    def _next_chat(self) -> Waiting | None:
        for _ in range(len(self._turns)):
            user = self._turns[0]
            self._turns.rotate(-1)  # this user goes to the back whether or not it runs now
            mine = self._chat[user]
            for i, w in enumerate(mine):
                if w.conversation not in self._busy["chat"]:
                    del mine[i]
                    self._chat_count -= 1
                    if not mine:
                        del self._chat[user]
                        self._turns.remove(user)
                    return w
        return None
