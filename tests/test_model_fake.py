"""The model fake refuses what the real APIs refuse, in each family's error shape (the real `openai` client)."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from xihe.integrations.fakes.llm_server import ScriptedLLM, say

TOOL = {"type": "function", "function": {"name": "echo", "parameters": {"type": "object", "properties": {}}}}
CALL = {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": "{}"}}


def send(
    server: ScriptedLLM, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> Any:
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    kwargs: dict[str, Any] = {"model": "m", "messages": messages}
    if tools is not None:
        kwargs["tools"] = tools
    return client.chat.completions.create(**kwargs)


BAD = {
    "unknown role": ([{"role": "robot", "content": "hi"}], None, "role"),
    "orphan tool message": ([{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "c1", "content": "r"}], None, "preceeding"),
    "unanswered call": ([{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [CALL]}, {"role": "user", "content": "q"}], None, "insufficient tool messages"),
    "answers out of order": ([{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [CALL, {**CALL, "id": "c2"}]}, {"role": "tool", "tool_call_id": "c2", "content": "r"}, {"role": "tool", "tool_call_id": "c1", "content": "r"}], None, "preceeding"),
    "null content": ([{"role": "user", "content": None}], None, "null"),
    "bad schema": ([{"role": "user", "content": "q"}], [{"type": "function", "function": {"name": "echo", "parameters": {"type": "string"}}}], "Invalid schema for function"),
    "bad name": ([{"role": "user", "content": "q"}], [{"type": "function", "function": {"name": "echo tool"}}], "function.name"),
}  # fmt: skip


@pytest.mark.parametrize("mode", ["openai", "vllm"])
@pytest.mark.parametrize("case", BAD)
def test_invalid_requests_are_refused_in_the_familys_shape(case: str, mode: str) -> None:
    messages, tools, words = BAD[case]
    with ScriptedLLM([say("never")], mode=mode) as server, pytest.raises(openai.BadRequestError) as caught:
        send(server, messages, tools)
    assert words in str(caught.value.response.json())
    body = caught.value.response.json()
    assert ("error" in body) if mode == "openai" else (body["object"] == "error" and body["code"] == 400)
    assert server.script, "a refused request consumes no scripted answer"


def test_deepseek_wants_reasoning_back_within_the_user_turn_only() -> None:
    turn = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    answer = {"role": "tool", "tool_call_id": "c1", "content": "r"}
    with ScriptedLLM([say("ok")], mode="deepseek") as server:
        with pytest.raises(openai.BadRequestError, match=r"Missing `reasoning_content` field .* index 1"):
            send(server, [{"role": "user", "content": "q"}, turn, answer], [TOOL])
        with pytest.raises(openai.BadRequestError, match="must not be sent"):
            send(server, [{"role": "user", "content": "q"}, {**turn, "reasoning_content": "r"}, answer,
                          {"role": "user", "content": "q2"}], [TOOL])  # fmt: skip
        reply = send(
            server, [{"role": "user", "content": "q"}, {**turn, "reasoning_content": "r"}, answer], [TOOL]
        )
    assert reply.choices[0].message.reasoning_content  # type: ignore[attr-defined]


def test_the_window_is_enforced_and_ollama_truncates_silently() -> None:
    long = [{"role": "system", "content": "rules"}, *[{"role": "user", "content": "word " * 300}] * 5]
    with (
        ScriptedLLM([say("ok")], mode="deepseek", window=1000) as server,
        pytest.raises(openai.BadRequestError) as caught,
    ):
        send(server, long)
    assert caught.value.body["code"] == "invalid_request_error"  # type: ignore[index]
    assert "maximum context length is 1000 tokens" in caught.value.body["message"]  # type: ignore[index]
    with ScriptedLLM([say("ok")], mode="ollama", window=1000) as server:
        reply = send(server, long)
    assert reply.choices[0].message.content.endswith("ok") and reply.usage is None
    assert server.truncated == [2]  # the oldest user messages went, without a word
