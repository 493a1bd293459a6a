"""One answer as the server sent it, read the way its family writes it (`xihe.agent.profiles`).

Reasoning comes out of the answer: from a separate field, or from `<think>…</think>` at the start of
the content, so people never read it, the task never keeps it as its reply and later requests never
carry it as content. Reasoning that arrived as `reasoning_content` stays on the message (DeepSeek
thinking mode needs it echoed within the user turn; `profiles.outgoing` decides); reasoning from
anywhere else is kept privately (`_reasoning`) for the record and never sent.

Where the profile allows it, a tool call written as text (bare JSON `{"name": …, "arguments": …}`, or
Hermes/Qwen `<tool_call>{…}</tool_call>`) becomes a native call, which the loop validates exactly
like any other: a malformed one is refused back to the model and never runs.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from xihe.agent.profiles import Profile

_THINK = re.compile(r"\s*<think>(.*?)</think>\s*", re.S)
_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.S)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # OpenAI's rule for function names (API reference, tools)
_NAME_IN_TEXT = re.compile(r'"name"\s*:\s*"([a-zA-Z0-9_-]{1,64})"')
_CALL_START = re.compile(r'^\{\s*"name"\s*:\s*"[^"]*"\s*,\s*"(arguments|parameters)"\s*:')
INVALID_NAME = "invalid_call"  # stands for a name that could not be read; no tool has it


def split_think(content: str) -> tuple[str, str]:
    """(reasoning, answer) of content that may start with <think>…</think>.

    Qwen3's chat template may open the <think> itself, so the output holds only the closing tag
    (docs.vllm.ai, qwen3 reasoning parser); an unclosed <think> (cut off by the output limit) is all
    reasoning.
    """
    found = _THINK.match(content)
    if found:
        return found.group(1).strip(), content[found.end() :]
    stripped = content.lstrip()
    if stripped.startswith("<think>"):
        return stripped.removeprefix("<think>").strip(), ""
    if "</think>" in content and "<think>" not in content:
        thought, _, rest = content.partition("</think>")
        return thought.strip(), rest.lstrip()
    return "", content


def _call(item: Any, raw: str) -> dict[str, Any]:
    """One text tool call as a native one; what cannot be read is left for the registry to refuse."""
    if isinstance(item, dict) and isinstance(item.get("name"), str):
        name = item["name"] if _NAME.match(item["name"]) else INVALID_NAME
        args = item.get("arguments", item.get("parameters", {}))  # Llama 3.x writes "parameters"
        arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    else:  # not JSON, or not a call: name what can be read, pass the text on as the arguments
        found = _NAME_IN_TEXT.search(raw)
        name, arguments = (found.group(1) if found else INVALID_NAME), raw
    return {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _json_calls(text: str) -> list[tuple[Any, str]] | None:
    """The calls of a content that is nothing but a JSON call (or a list of them), else None; a call
    that is not valid JSON (cut off, mistyped) is kept as its text, for the registry to refuse."""
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    if not body.startswith(("{", "[")):
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return [(None, body)] if _CALL_START.match(body) else None
    items = data if isinstance(data, list) else [data]
    if items and all(
        isinstance(i, dict) and isinstance(i.get("name"), str) and ("arguments" in i or "parameters" in i)
        for i in items
    ):
        return [(i, json.dumps(i, ensure_ascii=False)) for i in items]
    return None


def text_tool_calls(profile: Profile, content: str) -> tuple[list[dict[str, Any]], str]:
    """Tool calls written as text, in the formats the profile allows, and the content left over."""
    if "hermes" in profile.text_tools and "<tool_call>" in content:
        calls = []
        for found in _HERMES.finditer(content):
            raw = found.group(1)
            try:
                item: Any = json.loads(raw)
            except ValueError:
                item = None
            calls.append(_call(item, raw))
        return calls, _HERMES.sub("", content).strip()
    if "json" in profile.text_tools:
        items = _json_calls(content.strip())
        if items is not None:
            return [_call(item, raw) for item, raw in items], ""
    return [], content


def read_answer(profile: Profile, raw: dict[str, Any], finish: str) -> tuple[dict[str, Any], str]:
    """The assistant message as the loop keeps it, and the finish reason (`tool_calls` for a call
    read from text, unless the answer was cut off)."""
    content = raw.get("content") or ""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    field = next((f for f in profile.reasoning_fields if raw.get(f)), None)
    reasoning = str(raw[field]) if field else ""
    if profile.think_tags:
        thought, content = split_think(content)
        reasoning = "\n".join(r for r in (reasoning, thought) if r)
        message["content"] = content
    if field == "reasoning_content":
        message["reasoning_content"] = raw[field]
    elif reasoning:
        message["_reasoning"] = reasoning
    native = [tc for tc in raw.get("tool_calls") or () if isinstance(tc, dict) and tc.get("function")]
    if native:
        message["tool_calls"] = [
            {
                "id": tc.get("id") or f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {
                    "name": tc["function"].get("name") or INVALID_NAME,
                    "arguments": tc["function"].get("arguments") or "",
                },
            }
            for tc in native
        ]
        return message, finish
    calls, rest = text_tool_calls(profile, content)
    if calls:
        message["content"] = rest
        message["tool_calls"] = calls
        return message, finish if finish == "length" else "tool_calls"
    return message, finish
