"""`xihe chat` on a real terminal: readline editing and history, no echoed control characters."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest

from tests.cli.terminals import chat_on_a_terminal, end_input, read_until
from tests.conftest import write_config
from xihe.agent.cli.terminal import clean

UP = "\x1b[A"


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("/status 12\n", "/status 12"),
        ("\x1b[A/help\x1b[D", "/help"),  # arrow keys that reached a pipe
        ("补跑\t昨天 ", "补跑 昨天"),
        ("abc\x08\x07", "abc"),  # backspace and bell are dropped, not echoed
        ("  \n", ""),
    ],
)
def test_clean_drops_escapes_and_control_characters(typed: str, expected: str) -> None:
    assert clean(typed) == expected


def test_up_arrow_repeats_the_last_line_and_history_survives(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "config")
    env = {
        **os.environ,
        "XIHE_DATABASE_URL": f"sqlite:///{tmp_path / 'xihe.db'}",
        "XIHE_HISTORY": str(tmp_path / "history"),
        "TERM": "xterm",
    }

    def session(keys: list[str]) -> str:
        leader, proc = chat_on_a_terminal(_chat(cfg), env)
        seen, screen = bytearray(), bytearray()
        try:
            for key in keys:
                read_until(leader, b"alice> ", seen)
                screen.extend(seen)
                seen.clear()
                os.write(leader, key.encode())
            read_until(leader, b"alice> ", seen)
            screen.extend(seen)
            assert end_input(leader, proc) == 0  # Ctrl-D: end of input
        finally:
            if proc.poll() is None:
                proc.kill()
            os.close(leader)
        return screen.decode(errors="replace")

    first = session(["/tasks\r", UP + "\r"])
    assert first.count("no tasks yet") == 2, first  # the arrow brought /tasks back and it ran again
    assert "^[" not in first and "[A" not in first
    assert "/tasks" in (tmp_path / "history").read_text()

    second = session([UP + "\r"])  # a new process: the history file brings the line back
    assert "no tasks yet" in second and "[A" not in second


def test_a_late_message_prints_above_the_line_being_typed(tmp_path: Path) -> None:
    """Mail for this conversation arrives while the user types: it goes above the prompt, and the prompt
    comes back with what was typed so far (which then runs as one line)."""
    from xihe.agent.clock import utc_now
    from xihe.agent.db import open_store_engine
    from xihe.agent.mailbox import Mailbox

    cfg = write_config(tmp_path / "config")
    db = f"sqlite:///{tmp_path / 'xihe.db'}"
    env = {**os.environ, "XIHE_DATABASE_URL": db, "XIHE_HISTORY": str(tmp_path / "history"), "TERM": "xterm"}
    leader, proc = chat_on_a_terminal(_chat(cfg), env)
    seen = bytearray()
    try:
        read_until(leader, b"alice> ", seen)
        os.write(leader, b"/tas")
        read_until(leader, b"/tas", seen)
        Mailbox(open_store_engine(db), utc_now).post("cli:alice", "run 101 ended SUCCESS")
        Mailbox(open_store_engine(db), utc_now).post("cli:bob", "not for alice")
        read_until(leader, b"[xihe \xe2\x86\x92 cli:alice] run 101 ended SUCCESS\r\nalice> /tas", seen)
        os.write(leader, b"ks\r")
        read_until(leader, b"no tasks yet", seen)
        after = bytearray(seen[seen.index(b"no tasks yet") :])
        read_until(leader, b"alice> ", after)  # the next prompt: Ctrl-D now ends the input
        seen.extend(after)
        assert end_input(leader, proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    assert b"not for alice" not in seen


def _chat(cfg: Path) -> list[str]:
    return [sys.executable, "-m", "xihe.agent.cli.main", "chat", "--config", str(cfg), "--user", "alice"]


def test_the_prompt_comes_first_and_a_line_typed_at_once_waits_for_the_bot(tmp_path: Path) -> None:
    from xihe.agent.clock import utc_now
    from xihe.agent.db import open_store_engine
    from xihe.agent.mailbox import Mailbox

    cfg = write_config(tmp_path / "config")
    db = f"sqlite:///{tmp_path / 'xihe.db'}"
    Mailbox(open_store_engine(db), utc_now).post("cli:alice", "run 7 ended FAILURE")  # while closed
    env = {**os.environ, "XIHE_DATABASE_URL": db, "XIHE_HISTORY": str(tmp_path / "history"), "TERM": "xterm"}
    leader, proc = chat_on_a_terminal(_chat(cfg), env)
    seen = bytearray()
    try:
        read_until(leader, b"alice> ", seen)
        os.write(leader, b"/tasks\r")  # typed at once: answered once the bot is made
        read_until(leader, b"no tasks yet", seen)
        read_until(leader, b"alice> ", seen)
        assert end_input(leader, proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    screen = seen.decode(errors="replace")
    # the mail from before the chat opened is printed once, above a prompt
    assert screen.count("[xihe → cli:alice] run 7 ended FAILURE") == 1, screen
    # the prompt came first: the bot (and so the mail) came behind it
    assert screen.index("alice> ") < screen.index("[xihe → cli:alice]") < screen.index("no tasks yet")


def test_a_start_up_that_fails_ends_the_prompt_with_its_error(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "config")
    text = (cfg / "xihe.yaml").read_text(encoding="utf-8")
    (cfg / "xihe.yaml").write_text(text + "\nnot_a_section: 1\n", encoding="utf-8")
    env = {**os.environ, "XIHE_DATABASE_URL": f"sqlite:///{tmp_path / 'xihe.db'}", "TERM": "xterm"}
    env["XIHE_HISTORY"] = str(tmp_path / "history")
    leader, proc = chat_on_a_terminal(_chat(cfg), env)
    seen = bytearray()
    try:
        read_until(leader, b"not_a_section", seen)  # nothing typed: the error ends the prompt itself
        assert proc.wait(timeout=30) == 1
        with contextlib.suppress(OSError):
            while chunk := os.read(leader, 4096):
                seen.extend(chunk)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    screen = seen.decode(errors="replace")
    assert "xihe.yaml" in screen and "Traceback" not in screen, screen
