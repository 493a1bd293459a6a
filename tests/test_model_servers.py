"""The loop against each server family as the strict fake plays it, through the real `openai` client.

Each test names the failure it guards against; on the code before profiles they failed so:
DeepSeek refused the request after /confirm (reasoning_content missing), a "too long" answer outside
OpenAI's shape ended the task with HTTP 400, <think> text reached the user and the next request,
and a tool call written as text was shown verbatim while nothing ran.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import MakeApp
from xihe.agent.app import App
from xihe.agent.gate import identify
from xihe.agent.hooks import Hooks
from xihe.agent.inbound import Inbound
from xihe.agent.loop import Agent
from xihe.integrations.fakes.llm_server import ScriptedLLM, Step, call, calls, raw, say

PROFILES = ["openai", "deepseek", "qwen", "vllm", "ollama"]
THOUGHT = "secret chain of thought 思考过程"


@pytest.fixture(params=PROFILES)
def profile(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def llm(profile: str) -> Iterator[ScriptedLLM]:
    """The fake in this family's mode (overrides the plain one of conftest for make_app)."""
    with ScriptedLLM(mode=profile) as server:
        yield server


def ask(app: App, text: str, user: str = "alice", conv: str = "c1") -> str:  # type: ignore[no-untyped-def]
    return app.session.handle(Inbound(user, conv, text))


def effects(tmp_path: Path) -> list[dict]:
    path = tmp_path / "effects.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def thinking(step: Step) -> Step:
    return Step(**{**step.__dict__, "reasoning": THOUGHT})


def configured(make_app: MakeApp, profile: str, script: list[Step], **llm: object) -> App:
    return make_app(script, overrides={"llm": {"profile": profile, **llm}})


def test_a_confirmed_write_continues_after_the_yes(
    make_app: MakeApp, llm: ScriptedLLM, profile: str, tmp_path: Path
) -> None:
    """DeepSeek: the request after /confirm carries the tool-call turn's reasoning_content back;
    qwen/vllm/ollama: the call written as text is the call that waits for the yes."""
    app = configured(make_app, profile, [thinking(call("write_note", note="hello")), say("Wrote the note.")])
    assert "/confirm 1" in ask(app, "write hello")
    assert ask(app, "/confirm 1") == "Wrote the note."
    assert [e["note"] for e in effects(tmp_path)] == ["hello"]
    after = llm.messages[1]
    turn = next(m for m in after if m.get("tool_calls"))
    if profile == "deepseek":
        assert turn["reasoning_content"] == THOUGHT
    else:
        assert "reasoning_content" not in turn
    llm.assert_consumed()


def test_reasoning_of_an_earlier_user_turn_is_not_sent_back(
    make_app: MakeApp, llm: ScriptedLLM, profile: str
) -> None:
    """An answer check starts a new user turn: DeepSeek refuses the earlier turn's reasoning_content."""
    app = configured(make_app, profile, [thinking(call("echo", text="a")), say("done"), say("checked")])
    agent = Agent(app.deps, app.registry, app.agent.llm, Hooks(reply_checks=(_OnceUnhappy(),)))
    assert agent.start(identify("alice", app.deps.settings.access), "c1", "go").reply == "checked"
    last = llm.messages[-1]
    assert last[-1]["content"].startswith("[Answer check]")
    assert all("reasoning_content" not in m for m in last)
    llm.assert_consumed()


class _OnceUnhappy:
    def __init__(self) -> None:
        self.n = 0

    def complaint(self, task: object, reply: str) -> str | None:
        self.n += 1
        return "say it differently" if self.n == 1 else None

    def mark(self, task: object, reply: str) -> str:
        return reply


def test_thinking_never_reaches_the_user_or_the_next_request(
    make_app: MakeApp, llm: ScriptedLLM, profile: str
) -> None:
    """qwen/ollama put <think>…</think> at the start of content; it is reasoning, not the answer."""
    app = configured(make_app, profile, [thinking(call("echo", text="a")), thinking(say("It said a."))])
    reply = ask(app, "echo a")
    assert reply == "It said a."
    assert app.deps.tasks.get(1).reply == "It said a."
    llm.add(say("second"))
    ask(app, "and again?")
    contents = [m.get("content") or "" for request in llm.messages[1:] for m in request]
    assert not [c for c in contents if "<think>" in c or THOUGHT in c]
    assert all("reasoning_content" not in m for m in llm.messages[-1])  # a new user turn
    llm.assert_consumed()


def test_parallel_calls_all_run_and_are_answered_in_order(
    make_app: MakeApp, llm: ScriptedLLM, profile: str
) -> None:
    app = configured(
        make_app, profile, [calls(("echo", {"text": "a"}), ("echo", {"text": "b"})), say("a and b")]
    )
    assert ask(app, "echo both") == "a and b"
    tools = [m for m in llm.messages[1] if m["role"] == "tool"]
    assert [json.loads(m["content"].split("\n", 1)[1])["echo"] for m in tools] == ["a", "b"]
    llm.assert_consumed()


def test_a_malformed_call_never_runs(
    make_app: MakeApp, llm: ScriptedLLM, profile: str, tmp_path: Path
) -> None:
    app = configured(make_app, profile, [raw("write_note", '{"note": "half'), say("I could not.")])
    assert ask(app, "write") == "I could not."
    assert effects(tmp_path) == [] and not app.deps.pending.open_for(user_id="alice")
    told = [m for m in llm.messages[1] if m["role"] == "tool"][-1]["content"]
    assert "not valid JSON" in told
    llm.assert_consumed()


def test_json_text_is_not_a_call_where_the_family_never_writes_calls_as_text(
    make_app: MakeApp, llm: ScriptedLLM, profile: str
) -> None:
    if profile not in ("openai", "deepseek"):
        pytest.skip("these families write tool calls as text")
    text = '{"name": "echo", "arguments": {"text": "x"}}'
    app = configured(make_app, profile, [say(text)])
    assert ask(app, "show me a call") == text
    assert not [s for s in app.deps.tasks.steps(1) if s.step_key.startswith("tool")]
