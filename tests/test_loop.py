"""The loop through the real `openai` client and the scripted server on loopback."""

from __future__ import annotations

import json

from tests.conftest import MakeApp
from xihe.agent.budget import counter_for
from xihe.agent.context import build, groups
from xihe.agent.inbound import Inbound
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, calls, fail, raw, say, truncated


def ask(app, text: str, user: str = "alice", conv: str = "c1") -> str:  # type: ignore[no-untyped-def]
    return app.session.handle(Inbound(user, conv, text))


def tool_messages(llm: ScriptedLLM, request: int) -> list[str]:
    return [m["content"] for m in llm.messages[request] if m["role"] == "tool"]


def test_read_tool_result_goes_back_labelled(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app([call("echo", text="ping"), say("It said ping.")])
    assert ask(app, "echo ping") == "It said ping."
    assert tool_messages(llm, 1) == ['[Tool Result: echo]\n{\n "echo": "ping"\n}']
    assert [t["function"]["name"] for t in llm.requests[0]["tools"]] == sorted(app.registry.names())
    llm.assert_consumed()


def test_malformed_and_truncated_arguments_never_execute(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app(
        [
            raw("write_note", '{"note": "half'),  # non-JSON, cut off
            truncated("write_note", '{"note": "x"}'),  # finish_reason=length: never trusted
            raw("echo", '{"text": 5}'),  # wrong type
            raw("nope", "{}"),  # unknown tool
            raw("echo", json.dumps({"text": "y" * 70000})),  # over 64 KB
            say("I could not do it."),
        ],
        overrides={"loop": {"max_arg_retries": 5}},
    )
    assert ask(app, "do things") == "I could not do it."
    shown = [tool_messages(llm, i)[-1] for i in range(1, 6)]
    assert "not valid JSON" in shown[0] and "cut off" in shown[0]
    assert "cut off (output limit)" in shown[1]
    assert "`text`: Input should be a valid string" in shown[2]
    assert "Unknown tool 'nope'" in shown[3] and "echo" in shown[3]
    assert "over the 65536-byte limit" in shown[4]
    steps = app.deps.tasks.steps(1)
    assert all(s.status != "running" for s in steps if s.step_key.startswith("tool"))  # nothing started
    assert not app.deps.pending.open_for(user_id="alice")  # the truncated write did not even ask
    llm.assert_consumed()


def test_invalid_calls_are_bounded(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app([raw("echo", "{")] * 4, overrides={"loop": {"max_arg_retries": 3}})
    reply = ask(app, "go")
    assert "kept producing tool calls that could not be executed" in reply
    assert app.deps.tasks.get(1).status == "failed"
    llm.assert_consumed()


def test_an_exact_repeat_of_a_successful_call_is_refused(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app([call("echo", text="a"), call("echo", text="a"), call("echo", text="b"), say("done")])
    assert ask(app, "go") == "done"
    assert (
        "Refused: this exact call (echo with the same arguments) already succeeded"
        in tool_messages(llm, 2)[-1]
    )
    assert '"echo": "b"' in tool_messages(llm, 3)[-1]
    llm.assert_consumed()


def test_tool_errors_go_back_to_the_model(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app([call("always_fail", reason="disk full"), say("It failed: disk full.")])
    assert ask(app, "try") == "It failed: disk full."
    assert tool_messages(llm, 1) == ["[Tool Result: always_fail]\nERROR: upstream said no: disk full"]
    failed = [s for s in app.deps.tasks.steps(1) if s.status == "failed"]
    assert failed[0].error == "upstream said no: disk full"


def test_rate_limit_then_success_is_retried(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app([fail(429, retry_after=0), fail(503), say("ok after retries")])
    assert ask(app, "hello") == "ok after retries"
    assert len(llm.requests) == 3
    llm.assert_consumed()


def test_llm_outage_gives_a_readable_reply_and_a_resumable_task(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app([fail(500)] * 4, overrides={"llm": {"max_attempts": 4}})
    reply = ask(app, "hello")
    assert "The model endpoint failed (the model endpoint answered HTTP 500)" in reply
    assert "Traceback" not in reply and "xihe task resume 1" in reply
    assert app.deps.tasks.get(1).status == "failed"
    llm.add(say("back again"))
    assert app.agent.resume(1).reply == "back again"
    llm.assert_consumed()


def test_non_retryable_errors_are_not_retried(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app([fail(401)])
    assert "HTTP 401" in ask(app, "hello")
    assert len(llm.requests) == 1


def test_long_output_is_capped_and_saved_as_an_artifact(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app([call("big_output", size=30000)], overrides={"loop": {"result_cap_chars": 8000}})
    llm.add(say("placeholder"))
    ask(app, "produce")
    shown = tool_messages(llm, 1)[0]
    body = shown.split("\n", 1)[1]
    assert shown.startswith("[Tool Result: big_output]\n")
    assert body.index("\n…[truncated: 30000 characters in all") == 8000
    art_id = body.split("the full output is artifact ")[1].split(":")[0]
    ref, content, owner = app.deps.artifacts.get(art_id)  # type: ignore[misc]
    assert ref.size == 30000 and len(content) == 30000 and owner == "alice"
    step = app.deps.tasks.latest(1)["tool:1:0"]
    assert step.output_ref == art_id and step.output_digest == ref.sha256
    # a later step reads the rest through the read tool
    llm.add(call("read_artifact", artifact_id=art_id, offset=29990, length=100), say("read it"))
    ask(app, "read the end")
    assert "characters 29990-30000 of 30000 (end)" in tool_messages(llm, 3)[-1]


def test_turn_limit_stops_the_task(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app([call("echo", text=str(i)) for i in range(3)], overrides={"loop": {"max_turns": 3}})
    assert "I stopped after 3 model turns" in ask(app, "loop forever")
    llm.assert_consumed()


def test_conversation_history_reaches_the_model(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app([say("first answer"), say("second answer")])
    ask(app, "first question")
    ask(app, "second question")
    assert [m["content"] for m in llm.messages[1][1:]] == [
        "first question",
        "first answer",
        "second question",
    ]


def test_the_budget_keeps_tool_calls_with_their_results() -> None:
    tc = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "echo", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "echo", "arguments": "{}"}},
        ],
    }
    msgs: list[dict] = [{"role": "user", "content": "goal", "_goal": True}]
    for i in range(10):
        msgs += [
            dict(tc),
            {"role": "tool", "tool_call_id": "a", "content": f"r{i}" * 200},
            {"role": "tool", "tool_call_id": "b", "content": "x" * 100},
        ]
    counter = counter_for("gpt-4")
    for limit in (300, 600, 1500, 3000):
        out = build("rules", msgs, tools=[], counter=counter, limit=limit).messages
        assert out[0]["content"] == "rules" and any(m.get("_goal") for m in out)
        for group in groups([m for m in out if m["role"] != "system"]):
            if group[0].get("tool_calls"):
                assert [m["tool_call_id"] for m in group[1:]] == ["a", "b"]
            else:
                assert group[0]["role"] != "tool"  # no orphaned result
        assert out[-1]["content"] == "x" * 100  # the latest turn stays
        assert out[-2]["content"].startswith("r9")  # its results cut as little as fits, not dropped


def test_several_calls_in_one_turn_run_in_order(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app([calls(("echo", {"text": "1"}), ("echo", {"text": "2"})), say("both")])
    assert ask(app, "two") == "both"
    assert [json.loads(c.split("\n", 1)[1])["echo"] for c in tool_messages(llm, 1)] == ["1", "2"]


def test_metrics_count_tool_calls_by_outcome_and_gate_decisions(make_app: MakeApp, llm: ScriptedLLM) -> None:
    app = make_app(
        [
            call("echo", text="a"),
            call("always_fail", reason="x"),
            raw("echo", "{"),
            call("write_note", note="n"),
        ]
    )
    ask(app, "go")
    text = app.deps.metrics.render().decode()
    assert 'xihe_tool_calls_total{outcome="done",tool="echo"} 1.0' in text
    assert 'xihe_tool_calls_total{outcome="failed",tool="always_fail"} 1.0' in text
    assert 'xihe_tool_calls_total{outcome="invalid_args",tool="echo"} 1.0' in text
    assert 'xihe_gate_decisions_total{decision="allow"} 2.0' in text
    assert 'xihe_gate_decisions_total{decision="confirm"} 1.0' in text
