"""`/cancel task N` while the task's model turn is in flight (commands run beside free text).

The model fake cancels the task from inside its answer, exactly between the request and the reply the
walk waits for: the walk must run none of the tools the model then asks for, and the cancel (its
status and words) must stand instead of being overwritten by the walk's end.
"""

from __future__ import annotations

from typing import Any

from tests.conftest import MakeApp
from xihe.agent.app import App
from xihe.agent.inbound import Inbound
from xihe.agent.tasks import TaskStatus
from xihe.integrations.fakes.llm_server import ScriptedLLM, Step, call, say


def cancel_then(app: list[App], step: Step, user: str = "alice") -> Any:
    """A responder: the owner cancels task 1 while the model 'thinks', then the model answers `step`."""

    def respond(body: dict[str, Any]) -> Step:
        app[0].session.handle(Inbound(user, "c2", "/cancel task 1"))
        return step

    return respond


def test_tool_calls_answered_after_a_cancel_never_run(make_app: MakeApp, llm: ScriptedLLM) -> None:
    box: list[App] = []
    box.append(make_app())
    llm.responder = cancel_then(box, call("echo", text="should not run"))
    reply = box[0].session.handle(Inbound("alice", "c1", "echo something"))
    task = box[0].deps.tasks.get(1)
    assert task.status == TaskStatus.CANCELLED
    assert reply == task.reply  # the cancel's words, not a tool result or a failure
    assert [s for s in box[0].deps.tasks.latest(1).values() if s.tool_name == "echo"] == []


def test_a_final_answer_after_a_cancel_does_not_overwrite_it(make_app: MakeApp, llm: ScriptedLLM) -> None:
    box: list[App] = []
    box.append(make_app())
    llm.responder = cancel_then(box, say("All done."))
    box[0].session.handle(Inbound("alice", "c1", "say done"))
    task = box[0].deps.tasks.get(1)
    assert task.status == TaskStatus.CANCELLED and task.reply != "All done."
    audited = box[0].deps.audit.search(task_id=1, kind="task")
    assert "done" not in [e["outcome"] for e in audited]


def test_someone_elses_cancel_is_refused_and_the_walk_goes_on(make_app: MakeApp, llm: ScriptedLLM) -> None:
    box: list[App] = []
    box.append(make_app())
    llm.responder = cancel_then(box, say("All done."), user="bob")
    assert box[0].session.handle(Inbound("alice", "c1", "say done")) == "All done."
    assert box[0].deps.tasks.get(1).status == TaskStatus.DONE
