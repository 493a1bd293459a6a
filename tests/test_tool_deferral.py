"""Tools deferred when their schemas would crowd a small window, and loaded by the model on demand.

Through the real loop and the real `openai` client against the strict fake: with a window too small
for every schema, a request carries the core tools (none of the test plugin's), the ones the task
already used, and `load_tools`, which lists the rest; a `load_tools` call is a durable, audited step,
and the next request carries what it loaded.
"""

from __future__ import annotations

from tests.conftest import MakeApp
from xihe.agent.app import App
from xihe.agent.inbound import Inbound
from xihe.agent.tasks import StepStatus
from xihe.agent.tool_schemas import LOAD_TOOLS, compact, short_description
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say

SMALL = {"context_tokens": 1400, "reply_tokens": 200}  # the plugin's schemas take over half of it


def names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def ask(app: App, text: str) -> str:
    return app.session.handle(Inbound("alice", "c1", text))


def test_with_room_every_tool_is_carried_and_nothing_is_deferred(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app([say("hi")])
    assert ask(app, "hello") == "hi"
    carried = names(llm.requests[0])
    assert "echo" in carried and "big_output" in carried and LOAD_TOOLS not in carried


def test_a_small_window_defers_tools_and_load_tools_brings_them_in(
    make_app: MakeApp, llm: ScriptedLLM
) -> None:
    app = make_app(
        [call(LOAD_TOOLS, names=["echo"]), call("echo", text="pong"), say("echo said pong")],
        overrides={"llm": SMALL},
    )
    assert ask(app, "echo pong for me") == "echo said pong"
    first, second, third = llm.requests
    assert "echo" not in names(first) and LOAD_TOOLS in names(first)
    loader = next(t for t in first["tools"] if t["function"]["name"] == LOAD_TOOLS)["function"]
    assert "- echo: Echo text back." in loader["description"]  # each deferred tool, in one line
    assert "echo" in loader["parameters"]["properties"]["names"]["items"]["enum"]
    assert "echo" in names(second) and "echo" in names(third)  # loaded, and kept once used
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": second["messages"][-2]["tool_calls"][0]["id"],
        "content": "[Tool Result: load_tools]\nLoaded echo: call them now.",
    }
    task = app.deps.tasks.recent(conversation="c1", limit=1)[0]
    steps = {s.tool_name: s for s in app.deps.tasks.latest(task.id).values()}
    assert steps[LOAD_TOOLS].status == StepStatus.DONE and steps["echo"].status == StepStatus.DONE
    audited = app.deps.audit.search(task_id=task.id, tool=LOAD_TOOLS)
    assert [(e["kind"], e["outcome"]) for e in audited] == [("tool_call", "ok")]
    llm.assert_consumed()


def test_loading_names_that_do_not_exist_is_refused_with_the_reason(
    make_app: MakeApp, llm: ScriptedLLM
) -> None:
    app = make_app([call(LOAD_TOOLS, names=["rm_rf"]), say("no such tool")], overrides={"llm": SMALL})
    assert ask(app, "load something") == "no such tool"
    assert llm.requests[1]["messages"][-1]["content"].endswith(
        "Nothing loaded: name tools from the list (rm_rf)."
    )
    assert "rm_rf" not in names(llm.requests[1])


def test_the_compact_form_keeps_names_types_enums_and_listings() -> None:
    schema = {
        "type": "function",
        "function": {
            "name": "t",
            "description": "Do a thing. With many more words about it, e.g. this.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "enum": ["a", "b"],
                        "description": "which:\n- a: First. More.\n- b: x",
                    },
                    "n": {
                        "anyOf": [{"type": "integer"}, {"type": "null"}],
                        "default": None,
                        "description": "N. Long.",
                    },
                },
                "required": ["command"],
            },
        },
    }
    small = compact(schema)["function"]
    assert small["description"] == "Do a thing."
    props = small["parameters"]["properties"]
    assert props["command"] == {
        "type": "string",
        "enum": ["a", "b"],
        "description": "which:\n- a: First. More.\n- b: x",
    }
    assert props["n"] == {"type": "integer", "description": "N."}
    assert small["parameters"]["required"] == ["command"]
    assert short_description("see step key, e.g. tool:3:0. Then more.") == "see step key, e.g. tool:3:0."
