"""Explicit commands are parsed without the model and work when no model is configured."""

from __future__ import annotations

import pytest

from tests.conftest import MakeApp
from xihe.agent.commands import CommandSyntaxError, parse
from xihe.agent.inbound import Inbound
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say


@pytest.mark.parametrize(
    ("text", "name", "args"),
    [
        ("/help", "help", ()),
        ("  /confirm 12 ", "confirm", ("12",)),
        ("确认执行", "confirm", ()),
        ("/RUN order_sync 2026-12-01", "run", ("order_sync", "2026-12-01")),
        ('/sh git log -n 3 "src/a b.py"', "sh", ("git", "log", "-n", "3", "src/a b.py")),
    ],
)
def test_parse(text: str, name: str, args: tuple[str, ...]) -> None:
    cmd = parse(text)
    assert cmd is not None and cmd.name == name and cmd.args == args


@pytest.mark.parametrize("text", ["hello", "/ not a command", "please 确认执行 later", "//x", "/1"])
def test_free_text_is_not_a_command(text: str) -> None:
    assert parse(text) is None


def test_unbalanced_quotes_are_a_clear_error() -> None:
    with pytest.raises(CommandSyntaxError, match="cannot read the arguments of /sh"):
        parse('/sh echo "oops')


def test_commands_never_call_the_model(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app()
    for text in ("/help", "/tasks", "/confirm", "/cancel", "/task 1", "/nope"):
        app.session.handle(Inbound("alice", "c1", text))
    assert llm.requests == []


def test_commands_work_without_a_model(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app(with_llm=False)
    assert "What you may do here:" in app.session.handle(Inbound("alice", "c1", "/help"))
    assert "No model is configured" in app.session.handle(Inbound("alice", "c1", "what is up?"))
    assert "Unknown command /nope" in app.session.handle(Inbound("alice", "c1", "/nope"))


def test_help_lists_only_what_the_caller_may_use(make_app: MakeApp) -> None:
    app = make_app()
    alice = app.session.handle(Inbound("alice", "c", "/help"))
    carol = app.session.handle(Inbound("carol", "c", "/help"))
    stranger = app.session.handle(Inbound("mallory", "c", "/help"))
    assert "write_note" in alice and "echo" in alice
    assert "read_artifact" in carol and "write_note" not in carol and "echo" not in carol
    assert "You may not use any tools." in stranger
    assert "read_artifact" not in stranger
    assert "/approve" in carol and "/approve" not in alice and "/approve" not in stranger  # approvers only


def test_task_report_shows_the_failed_step_and_its_input(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app([call("always_fail", reason="disk full"), call("echo", text="after"), say("gave up")])
    app.session.handle(Inbound("alice", "c1", "try it"))
    report = app.session.handle(Inbound("alice", "c1", "/task 1"))
    assert "tool:1:0 #1 failed  always_fail" in report and "input: reason: disk full" in report
    assert "error: upstream said no: disk full" in report
    assert "belongs to someone else" in app.session.handle(Inbound("bob", "c2", "/task 1"))
