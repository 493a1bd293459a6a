"""Real `xihe chat` processes killed at the edges of a confirmed write (a whitelisted shell command that
appends a line to a journal file), then restarted: count the lines.

1. Killed right after the `/confirm` UPDATE, before the resume: the confirmed action runs exactly once,
   on restart (the orphan sweep at start-up) or on the next message of the conversation.
2. Killed after the write ran but before its outcome was recorded: without a `check:` the write is
   never rerun silently; the user is told it may or may not have happened and only a fresh `/confirm`
   runs it again. With a `check:` the check decides: happened → done without a rerun, not happened → run.

The crash windows are hit exactly through `XIHE_TEST_CRASH_AT` (agent/crashpoint.py), which exits the
process like SIGKILL at the named point.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.child_env import pythonpath
from tests.conftest import write_config
from xihe.agent.db import make_engine
from xihe.agent.pending import PendingStore
from xihe.agent.task_store import TaskStore
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say

PYTHON = os.path.realpath(sys.executable)
APPEND = "import sys; open(sys.argv[1], 'a').write(sys.argv[2] + chr(10))"
CHECK = (
    "import os, sys; p = sys.argv[1]; "
    "sys.exit(0 if os.path.exists(p) and sys.argv[2] + chr(10) in open(p).readlines() else 1)"
)


def shell_yaml(journal: Path, *, with_check: bool) -> str:
    entry: dict[str, object] = {
        "name": "append_line",
        "description": "append a line to the journal",
        "argv": [PYTHON, "-c", APPEND, str(journal), "{line}"],
        "args": {"line": {"type": "string", "pattern": "^[a-z]+$", "description": "the line"}},
        "risk": "write",
    }
    if with_check:
        entry["check"] = [PYTHON, "-c", CHECK, str(journal), "{line}"]
    return yaml.safe_dump({"sandbox": "none", "entries": [entry]})


class Bot:
    """A config directory, a database and a way to run `xihe chat` against them."""

    def __init__(self, tmp_path: Path, llm: ScriptedLLM, *, with_check: bool = False) -> None:
        self.tmp = tmp_path
        self.journal = tmp_path / "journal.txt"
        self.cfg = write_config(tmp_path / "cfg", llm_url=llm.base_url)
        (self.cfg / "shell.yaml").write_text(shell_yaml(self.journal, with_check=with_check))
        self.db = f"sqlite:///{tmp_path / 'xihe.db'}"
        self.env = {**os.environ, "XIHE_DATABASE_URL": self.db, "PYTHONPATH": pythonpath()}
        self.cli = [sys.executable, "-m", "xihe.agent.cli.main", "--config", str(self.cfg)]

    def start(self, crash_at: str | None = None) -> subprocess.Popen[str]:
        env = {**self.env, **({"XIHE_TEST_CRASH_AT": crash_at} if crash_at else {})}
        return subprocess.Popen(
            [*self.cli, "chat", "--user", "alice"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=self.tmp,
        )

    def chat(self, *lines: str, crash_at: str | None = None) -> tuple[int, str]:
        """Feed lines to a fresh `xihe chat`, close its input, return (exit status, output)."""
        proc = self.start(crash_at)
        out, _ = proc.communicate("".join(f"{line}\n" for line in lines), timeout=120)
        return proc.returncode, out

    def lines(self) -> list[str]:
        return self.journal.read_text().splitlines() if self.journal.exists() else []

    def tasks(self) -> TaskStore:
        return TaskStore(make_engine(self.db))

    def pending(self) -> PendingStore:
        return PendingStore(make_engine(self.db))


def crash_after_confirm(bot: Bot, llm: ScriptedLLM) -> None:
    llm.add(call("run_shell_command", command="append_line", args={"line": "hello"}), say("appended"))
    code, out = bot.chat("append hello to the journal", "/confirm", crash_at="after_confirm_update")
    assert code == 137, out  # killed between the confirm UPDATE and the resume
    assert "/confirm 1" in out
    assert bot.tasks().get(1).status == "awaiting_confirmation"
    assert bot.pending().get(1).status == "confirmed"  # type: ignore[union-attr]
    assert bot.lines() == []


def test_confirmed_but_not_resumed_runs_exactly_once_at_restart(tmp_path: Path, llm: ScriptedLLM) -> None:
    bot = Bot(tmp_path, llm)
    crash_after_confirm(bot, llm)

    code, out = bot.chat()  # start-up: the orphan sweep finds the confirmed task
    assert code == 0, out
    assert "[xihe → cli:alice] appended" in out  # the orphan job resumed it and told its conversation
    assert bot.lines() == ["hello"]
    assert bot.pending().get(1).status == "executed"  # type: ignore[union-attr]

    code, out = bot.chat("/confirm")  # nothing is left: the next /confirm runs nothing again
    assert "Nothing is waiting" in out and "resumed" not in out
    assert bot.lines() == ["hello"]
    assert len(llm.requests) == 2
    llm.assert_consumed()


def test_confirmed_but_not_resumed_runs_on_the_next_message(tmp_path: Path, llm: ScriptedLLM) -> None:
    bot = Bot(tmp_path, llm)
    other = bot.start()  # a second terminal on the same conversation, started before the crash
    try:
        for _ in range(600):  # its start-up sweep is over once the database exists
            if (tmp_path / "xihe.db").exists():
                break
            time.sleep(0.05)
        crash_after_confirm(bot, llm)
        out, _ = other.communicate("/confirm\n/confirm\n", timeout=120)
    finally:
        other.kill()
    first, second = [line for line in out.splitlines() if line.startswith("xihe> ")]
    assert first == "xihe> appended"  # the user's next message resumed the confirmed task
    assert "Nothing is waiting" in second
    assert bot.lines() == ["hello"]
    assert bot.tasks().get(1).status == "done"
    llm.assert_consumed()


def test_an_interrupted_write_without_a_check_is_uncertain_and_never_rerun_silently(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    bot = Bot(tmp_path, llm)
    llm.add(call("run_shell_command", command="append_line", args={"line": "hello"}))
    code, out = bot.chat("append hello to the journal", "/confirm", crash_at="after_tool_effect")
    assert code == 137, out
    assert bot.lines() == ["hello"]  # the write happened; its outcome was never recorded

    code, out = bot.chat()  # start-up sweep: the step is uncertain, nothing runs
    assert code == 0, out
    assert "[xihe → cli:alice] " in out  # the orphan job resumed it and told its conversation
    assert "may or may not have happened" in out and "NOT run again" in out and "/confirm 2" in out
    assert bot.lines() == ["hello"]
    first, fresh = bot.pending().get(1), bot.pending().get(2)
    assert first is not None and first.status == "executed"
    assert fresh is not None and fresh.status == "pending"
    assert (fresh.tool, fresh.args_digest) == (first.tool, first.args_digest)  # bound to the same call

    for _ in range(2):  # neither another restart nor an explicit resume reruns it
        code, out = bot.chat()
        assert "[xihe → " not in out
        resumed = subprocess.run(
            [*bot.cli, "task", "resume", "1"], capture_output=True, text=True, env=bot.env, timeout=120
        )
        assert "may or may not have happened" in resumed.stdout and "/confirm 2" in resumed.stdout
        assert bot.lines() == ["hello"]
    assert [p.id for p in bot.pending().open_for(statuses=("pending", "confirmed"))] == [2]  # no third

    llm.add(say("appended again"))
    code, out = bot.chat("/confirm 2")  # the user checked and asks for it again: runs once more
    assert "xihe> appended again" in out
    assert bot.lines() == ["hello", "hello"]
    rows = [(s.status, s.error or "") for s in bot.tasks().steps(1) if s.step_key == "tool:1:0"]
    assert [status for status, _ in rows] == ["running", "failed", "failed", "running", "done"]
    assert rows[1][1].startswith("interrupted") and rows[2][1].startswith("uncertain:")
    assert "has no check: command" in rows[2][1]
    llm.assert_consumed()


@pytest.mark.parametrize(
    ("crash_at", "runs"), [("after_tool_effect", ["hello"]), ("before_tool_effect", ["hello"])]
)
def test_a_check_command_decides_whether_an_interrupted_write_runs_again(
    tmp_path: Path, llm: ScriptedLLM, crash_at: str, runs: list[str]
) -> None:
    bot = Bot(tmp_path, llm, with_check=True)
    llm.add(call("run_shell_command", command="append_line", args={"line": "hello"}), say("appended"))
    code, out = bot.chat("append hello to the journal", "/confirm", crash_at=crash_at)
    assert code == 137, out
    assert bot.lines() == ([] if crash_at == "before_tool_effect" else ["hello"])

    code, out = bot.chat()
    assert "[xihe → cli:alice] appended" in out  # the orphan job resumed it and told its conversation
    assert bot.lines() == runs  # exactly once either way
    rows = [s for s in bot.tasks().steps(1) if s.step_key == "tool:1:0"]
    assert [r.status for r in rows] == ["running", "failed", "running", "done"]
    if crash_at == "after_tool_effect":  # the check said it happened: recorded, not rerun
        assert "its check says it already happened" in (rows[-1].output_text or "")
    assert bot.pending().open_for(statuses=("pending",)) == []  # no new confirmation was needed
    llm.assert_consumed()
