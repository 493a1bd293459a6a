"""Lines typed at `xihe chat` (line editing and history on a terminal, plain lines from a pipe), the
screen they share with late messages (printed above the line being typed without breaking it), and
text printed to the terminal.

The terminal is a destination of its own: a reply (or a task report) may quote outside text (a DS
error, shell output, a log line) that carries terminal escape sequences, which would recolour,
retitle or rewrite the screen. `shown` drops every escape sequence and control character (tab and
newline stay) and bidi overrides; WeCom markdown's full-width twins in a reply stay as they are.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

# `shown` lives with the spine: the code search's serve prints with it too
from xihe.agent.terminal_text import ESCAPE, shown

HISTORY_LENGTH = 1000


def history_file() -> Path:
    """`$XIHE_HISTORY`, else `~/.xihe_history`."""
    return Path(os.environ.get("XIHE_HISTORY") or Path.home() / ".xihe_history")


def clean(line: str) -> str:
    """The line without surrounding blanks, terminal escape sequences (^[[A) or control characters."""
    text = ESCAPE.sub("", line).replace("\t", " ")
    return "".join(ch for ch in text if ch.isprintable()).strip()


class Screen:
    """The chat's output: replies, and late messages printed from another thread at any moment.

    On a terminal a message that comes while the user types goes above the prompt, and the prompt
    comes back with what was typed so far; from a pipe each message is a plain line.
    """

    def __init__(self, prompt: str) -> None:
        self.prompt = prompt
        self._lock = threading.Lock()
        self._typing = False

    def show(self, text: str) -> None:
        """Print `text` as its own lines, whatever the user is typing (through `shown`: a reply may
        carry a tool's output or the model's repetition of it)."""
        text = shown(text)
        with self._lock:
            if not self._typing:
                print(text, flush=True)
                return
            sys.stdout.write(f"\r\x1b[K{text}\n{self.prompt}{_typed_so_far()}")
            sys.stdout.flush()

    def read(self) -> str:
        """One line typed at the prompt (input()'s exceptions pass through)."""
        with self._lock:
            self._typing = True
        try:
            return input(self.prompt)
        finally:
            with self._lock:
                self._typing = False


def _typed_so_far() -> str:
    try:
        import readline
    except ImportError:
        return ""
    return readline.get_line_buffer()


def prompt_lines(screen: Screen, stop: Callable[[], bool] = lambda: False) -> Iterator[str]:
    """Non-empty lines until end of input (or an interrupt once `stop()` is true).

    On a terminal: GNU readline (arrow keys, Ctrl-R, history kept across sessions in `history_file()`);
    Ctrl-C drops the line being typed. From a pipe: one line at a time, no prompt, so scripted
    sessions read cleanly.
    """
    if not sys.stdin.isatty():
        for line in sys.stdin:
            text = clean(line)
            if text:
                yield text
        return
    saved = _start_readline()
    try:
        while True:
            try:
                line = screen.read()
            except EOFError:
                print()
                return
            except KeyboardInterrupt:
                print()
                if stop():
                    return
                continue
            text = clean(line)
            if text:
                yield text
    finally:
        saved()


def _start_readline() -> Callable[[], None]:
    try:
        import readline
    except ImportError:  # not on every platform; input() still works, without editing
        return lambda: None
    path = history_file()
    with contextlib.suppress(OSError):  # no history yet
        readline.read_history_file(path)
    readline.set_history_length(HISTORY_LENGTH)

    def save() -> None:
        with contextlib.suppress(OSError):  # a read-only home loses history, not the chat
            readline.write_history_file(path)

    return save
