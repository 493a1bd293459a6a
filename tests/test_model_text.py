"""Reading answers by profile (think tags, text tool calls), shaping requests, and "too long" shapes."""

from __future__ import annotations

import json

import pytest

from xihe.agent.model_text import INVALID_NAME, read_answer, split_think
from xihe.agent.profiles import BY_NAME, OPENAI, QWEN, TOLERANT, outgoing, resolve


def test_think_tags_open_closed_or_opened_by_the_template() -> None:
    assert split_think("<think>\nplan\n</think>\n\nHello") == ("plan", "Hello")
    assert split_think("plan</think>\n\nHello") == ("plan", "Hello")  # Qwen3's template opened it
    assert split_think("<think>cut off by the output lim") == ("cut off by the output lim", "")
    assert split_think("Use <think> tags like this") == ("", "Use <think> tags like this")


def test_reasoning_is_taken_out_of_the_answer_and_kept_apart() -> None:
    msg, _ = read_answer(QWEN, {"content": "<think>why</think>Answer"}, "stop")
    assert msg == {"role": "assistant", "content": "Answer", "_reasoning": "why"}
    msg, _ = read_answer(BY_NAME["deepseek"], {"content": "A", "reasoning_content": "r"}, "stop")
    assert msg["reasoning_content"] == "r" and msg["content"] == "A"
    msg, _ = read_answer(BY_NAME["vllm"], {"content": "A", "reasoning": "r"}, "stop")
    assert msg == {"role": "assistant", "content": "A", "_reasoning": "r"}  # never sent back


def test_hermes_calls_become_native_calls_with_the_text_around_them_kept() -> None:
    content = (
        'Let me look.\n<tool_call>\n{"name": "echo", "arguments": {"text": "编号"}}\n</tool_call>\n'
        '<tool_call>{"name": "echo", "arguments": "{\\"text\\": \\"b\\"}"}</tool_call>'
    )
    msg, finish = read_answer(QWEN, {"content": content}, "stop")
    assert finish == "tool_calls" and msg["content"] == "Let me look."
    fns = [tc["function"] for tc in msg["tool_calls"]]
    assert [json.loads(f["arguments"]) for f in fns] == [{"text": "编号"}, {"text": "b"}]
    assert len({tc["id"] for tc in msg["tool_calls"]}) == 2


@pytest.mark.parametrize(
    "content",
    [
        '{"name": "echo", "arguments": {"text": "a"}}',
        '```json\n{"name": "echo", "parameters": {"text": "a"}}\n```',
        '[{"name": "echo", "arguments": {"text": "a"}}]',
    ],
)
def test_bare_json_calls(content: str) -> None:
    msg, finish = read_answer(BY_NAME["ollama"], {"content": content}, "stop")
    assert finish == "tool_calls" and msg["content"] == ""
    assert json.loads(msg["tool_calls"][0]["function"]["arguments"]) == {"text": "a"}


def test_a_malformed_text_call_is_kept_for_the_registry_to_refuse() -> None:
    msg, _ = read_answer(
        QWEN, {"content": '<tool_call>{"name": "echo", "arguments": {"text": "a"</tool_call>'}, "stop"
    )
    fn = msg["tool_calls"][0]["function"]
    assert fn["name"] == "echo" and not _is_json(fn["arguments"])
    msg, _ = read_answer(
        QWEN, {"content": '<tool_call>{"name": "no such!", "arguments": {}}</tool_call>'}, "stop"
    )
    assert msg["tool_calls"][0]["function"]["name"] == INVALID_NAME  # a name the API would refuse in history


def test_a_call_cut_off_by_the_output_limit_stays_cut_off() -> None:
    _, finish = read_answer(QWEN, {"content": '<tool_call>{"name": "echo", "argu'}, "length")
    assert finish == "length"  # the loop refuses it as truncated


def test_no_text_calls_where_the_family_never_writes_them() -> None:
    content = '{"name": "echo", "arguments": {"text": "a"}}'
    msg, finish = read_answer(OPENAI, {"content": content}, "stop")
    assert finish == "stop" and msg == {"role": "assistant", "content": content}
    msg, _ = read_answer(OPENAI, {"content": "<think>x</think>y"}, "stop")
    assert msg["content"] == "<think>x</think>y"


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def test_reasoning_is_echoed_only_on_tool_call_turns_of_the_current_user_turn() -> None:
    messages = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "a"}], "reasoning_content": "old"},
        {"role": "tool", "tool_call_id": "a", "content": "r"},
        {"role": "assistant", "content": "answer 1", "reasoning_content": "old2"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "b"}], "reasoning_content": "new"},
        {"role": "tool", "tool_call_id": "b", "content": "r"},
    ]
    kept = [m.get("reasoning_content") for m in outgoing(BY_NAME["deepseek"], messages)]
    assert kept == [None, None, None, None, None, "new", None]
    assert all("reasoning_content" not in m for m in outgoing(OPENAI, messages))


@pytest.mark.parametrize(
    ("model", "url", "family"),
    [
        ("deepseek-reasoner", "https://api.deepseek.com", "auto:deepseek"),
        ("Qwen/Qwen3-8B", "http://vllm:8000/v1", "auto:qwen"),
        ("qwen3:8b", "http://gpu:8080/v1", "auto:ollama"),
        ("my-model", "http://gpu:11434/v1", "auto:ollama"),
        ("gpt-4o-mini", "https://api.openai.com/v1", "auto:openai"),
        ("my-model", "http://gpu:8000/v1", "auto"),
    ],
)
def test_auto_picks_by_model_name_and_port(model: str, url: str, family: str) -> None:
    assert resolve("auto", model, url).name == family
    assert resolve("vllm", model, url) is BY_NAME["vllm"]


SHAPES = {
    "openai": {"message": "This model's maximum context length is 8192 tokens.", "code": "context_length_exceeded"},
    "deepseek": {"message": "This model's maximum context length is 131072 tokens. However, you requested 140000", "type": "invalid_request_error", "code": "invalid_request_error"},
    "vllm": {"object": "error", "type": "BadRequestError", "code": 400, "message": "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens"},
}  # fmt: skip


@pytest.mark.parametrize("shape", SHAPES)
def test_too_long_is_recognised_in_every_shape(shape: str) -> None:
    for profile in (*BY_NAME.values(), TOLERANT):
        assert profile.is_too_long(400, SHAPES[shape])
    assert not OPENAI.is_too_long(
        400, {"message": "Invalid schema for function 'x'", "code": "invalid_function_parameters"}
    )
    assert not OPENAI.is_too_long(500, SHAPES[shape])
