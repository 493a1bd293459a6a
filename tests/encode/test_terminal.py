"""The hostile corpus in the terminal: what `xihe chat` and `xihe task show` print.

A task goal (user text), a task's error (an outside service's words) and the model's answer (which
repeats a tool's output) carry terminal escape sequences, bells, carriage returns and bidi
overrides; the screen must get none of them, and the words must still be there.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tests.conftest import write_config
from tests.encode.corpus import HOSTILE
from xihe.agent.app import build_app
from xihe.agent.cli.main import main
from xihe.agent.cli.terminal import shown
from xihe.agent.tasks import TaskStatus
from xihe.integrations.fakes.llm_server import ScriptedLLM, say

TERMINAL = [
    "\x1b]0;pwned title\x07 \x1b]8;;http://evil.example\x1b\\点这里\x1b]8;;\x1b\\",
    "ok\rFAKE: all green \x1b[2J\x1b[H cleared \x1b[31mred\x1b[0m \x9b31m c1",
    *(text for _id, text, _w in HOSTILE),
]
FORBIDDEN = ("\x1b", "\x07", "\x9b", "\x9d", "\r", "\u202e", "\x00")


@pytest.mark.parametrize("text", TERMINAL, ids=[f"t{i}" for i in range(len(TERMINAL))])
def test_shown_prints_no_escape_control_or_bidi_character(text: str) -> None:
    out = shown(text)
    assert not any(ch in out for ch in FORBIDDEN), repr(out)


def test_xihe_chat_and_task_show_print_outside_text_inert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], llm: ScriptedLLM
) -> None:
    llm.add(say(f"the log says: {TERMINAL[1]}"))  # the model repeats what a tool returned
    cfg = write_config(tmp_path / "config", llm_url=llm.base_url)
    db = f"sqlite:///{tmp_path / 'xihe.db'}"
    monkeypatch.setenv("XIHE_DATABASE_URL", db)
    app = build_app(cfg, database_url=db, holder="t")
    goal = TERMINAL[0]
    task = app.deps.tasks.create(
        kind="chat", owner="alice", conversation="cli:alice", goal=goal, now=app.deps.clock()
    )
    app.deps.tasks.update(
        task.id,
        app.deps.clock(),
        status=TaskStatus.FAILED,
        error=f"DS said: {TERMINAL[1]} [点此](http://evil.example)",
    )
    monkeypatch.setattr("sys.stdin", io.StringIO(f"/tasks\n/task {task.id}\nwhat does the log say\n"))
    assert main(["--config", str(cfg), "chat", "--user", "alice"]) == 0
    assert main(["--config", str(cfg), "task", "show", str(task.id)]) == 0
    out = capsys.readouterr().out
    assert not any(ch in out for ch in FORBIDDEN), repr(out)
    assert out.count("点这里") == 3  # the goal in /tasks, /task and task show
    assert out.count("FAKE: all green") == 3 and out.count("［点此］(http://evil.example)") == 2  # the error
