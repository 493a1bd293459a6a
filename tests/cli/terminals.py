"""`xihe chat` processes driven line by line, for tests that watch several terminals at once."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.child_env import pythonpath


class Terminal:
    """One `xihe chat --user USER` process: type lines into it, wait for what it prints."""

    def __init__(self, config: Path, user: str, env: dict[str, str], cwd: Path | None = None) -> None:
        self.user = user
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "xihe.agent.cli.main", "chat", "--config", str(config), "--user", user],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **env, "PYTHONPATH": pythonpath()},
            cwd=cwd,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def screen(self) -> str:
        return "\n".join(self.lines)

    def type(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def wait_for(
        self, needle: str, *, after: int = 0, timeout: float = 120, tick: Callable[[], None] = lambda: None
    ) -> int:
        """The index of the first line from `after` on that contains `needle` (calling `tick` while waiting)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, line in enumerate(self.lines[after:], start=after):
                if needle in line:
                    return i
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            tick()
            time.sleep(0.1)
        raise AssertionError(f"{self.user}'s terminal never showed {needle!r}:\n{self.screen[-4000:]}")

    def ask_approval(self, command: str, approver: Terminal) -> str:
        """Type a production write and /confirm it, then have `approver` /approve it; its action id."""
        self.type(command)
        asked = self.wait_for("`/confirm ")
        action = self.lines[asked].split("`/confirm ")[1].split("`")[0]
        self.type(f"/confirm {action}")
        self.wait_for("审批", after=asked + 1)
        approver.type(f"/approve {action}")
        return action

    def close(self) -> str:
        """End the chat (end of input) and return everything it printed."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._reader.join(timeout=10)
        return self.screen


def read_until(fd: int, needle: bytes, seen: bytearray, timeout: float = 30) -> None:
    """Read the pseudo-terminal `fd` into `seen` until it holds `needle` (AssertionError otherwise)."""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"never saw {needle!r}; screen so far:\n{seen.decode(errors='replace')}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                raise AssertionError(
                    f"chat ended before {needle!r}:\n{seen.decode(errors='replace')}"
                ) from None
            seen.extend(chunk)


def chat_on_a_terminal(
    cmd: list[str], env: dict[str, str], cwd: Path | None = None
) -> tuple[int, subprocess.Popen[bytes]]:
    """`cmd` (an `xihe chat`) started on a pseudo-terminal: (the terminal's other end, the process)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdin=follower, stdout=follower, stderr=follower, close_fds=True
    )
    os.close(follower)
    return leader, proc


def end_input(leader: int, proc: subprocess.Popen[bytes], timeout: float = 30) -> int:
    """Type Ctrl-D into the chat on `leader` until it ends; its exit status.

    A Ctrl-D typed the instant a prompt is drawn can be lost: it may reach the terminal before
    readline has switched it out of line mode for that prompt (seen under load in about one run in
    two; a line typed ahead is kept, the end-of-input key is not). No person types that fast, so the
    key is typed again each second until the process ends."""
    deadline = time.monotonic() + timeout
    while True:
        os.write(leader, b"\x04")
        try:
            return proc.wait(timeout=min(1.0, max(0.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
