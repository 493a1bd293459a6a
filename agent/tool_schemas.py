"""Which tool schemas a model request carries: all of them, or the core and the ones the model loads.

Every request pays for every schema. With all features on, the schemas take about 9,000 tokens;
a model served with an 8,192-token window (Ollama with `num_ctx` raised to 8192, a small vLLM
deployment) would have no room left for the conversation. When the full schemas would take more
than `TOOL_SHARE` of the request's budget, tools are *deferred* (the pattern of tool-search tools):

- the request carries the `CORE` tools, every tool the transcript already called or loaded, and
  `load_tools`, whose description lists each deferred tool with its first sentence;
- all of them in a compact form: each description keeps its first sentence per line (a listing
  such as the whitelisted commands keeps its entries whole), and an optional argument's
  `anyOf [X, null]` with a null default becomes X. Names, types, enums, required keys and nested
  shapes never change, and the registry validates every call against the full argument model;
- a `load_tools` call is a durable step like any other (`agent/tool_step.py`), so a resumed task
  carries the same tools again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from xihe.agent.budget import TokenCounter

TOOL_SHARE = 0.5  # at most this share of a request's budget goes to tool schemas before they are compacted
_LINE_CAP = 120  # characters of one description line in the compact form
# a sentence ends at . ! ? (or the Chinese marks) before a space, not after an abbreviation like e.g.
_SENTENCE = re.compile(r"(?<!e\.g\.)(?<!i\.e\.)(?<=[.!?])\s|(?<=[。！？])")


def _first_sentence(line: str) -> str:
    head = _SENTENCE.split(line.strip(), maxsplit=1)[0]
    return head if len(head) <= _LINE_CAP else head[: _LINE_CAP - 1] + "…"


def short_description(text: str) -> str:
    """The first sentence of each line; the entries of a listing ("- name: …", e.g. the whitelisted
    commands with their arguments) are data the model needs and stay whole."""
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(line if line.startswith("- ") else _first_sentence(line) for line in lines)


def _compact(node: Any) -> Any:
    if isinstance(node, list):
        return [_compact(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "description" and isinstance(value, str):
            out[key] = short_description(value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _compact(prop) for name, prop in value.items()}  # property names stay
        elif key == "default" and value is None:
            continue  # an optional argument's null default says nothing `required` does not
        elif key == "anyOf" and isinstance(value, list) and node.get("default", ...) is None:
            kinds = [v for v in value if v != {"type": "null"}]
            if len(kinds) == 1:  # optional X: the model leaves it out rather than sending null
                out.update(_compact(kinds[0]))
                continue
            out[key] = _compact(value)
        else:
            out[key] = _compact(value)
    return out


def compact(schema: dict[str, Any]) -> dict[str, Any]:
    """One function schema in its compact form (see the module docstring)."""
    return _compact(schema)


LOAD_TOOLS = "load_tools"
# always carried when tools are deferred: the first tool of each everyday question
CORE = frozenset(
    {
        "search_code",
        "get_code_context",
        "query_ds_task_status",
        "trigger_dolphinscheduler",
        "run_shell_command",
        "read_artifact",
        "send_wecom_alert",
    }
)


def _name(schema: dict[str, Any]) -> str:
    return str(schema["function"]["name"])


def used_tools(messages: Sequence[dict[str, Any]]) -> set[str]:
    """Tools the transcript called, and the ones its `load_tools` calls loaded."""
    found: set[str] = set()
    for msg in messages:
        for tc in msg.get("tool_calls") or ():
            name = tc.get("function", {}).get("name", "")
            found.add(name)
            if name == LOAD_TOOLS:
                found.update(load_request(tc["function"].get("arguments")))
    return found


def load_request(raw: str | None) -> list[str]:
    """The names a `load_tools` call asks for (an unreadable call asks for none)."""
    try:
        data = json.loads(raw or "{}")
    except ValueError:
        return []
    names = data.get("names") if isinstance(data, dict) else None
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def load_tools_schema(deferred: list[dict[str, Any]]) -> dict[str, Any]:
    """The `load_tools` function: what is deferred, in one line each."""
    listing = "\n".join(
        f"- {_name(s)}: {_first_sentence(s['function'].get('description', ''))}" for s in deferred
    )
    return {
        "type": "function",
        "function": {
            "name": LOAD_TOOLS,
            "description": "More tools exist than fit this model's context; these are left out until you load "
            "them. Call load_tools with the names you need, then call those tools.\n" + listing,
            "parameters": {
                "type": "object",
                "properties": {
                    "names": {
                        "type": "array",
                        "items": {"type": "string", "enum": [_name(s) for s in deferred]},
                    }
                },
                "required": ["names"],
            },
        },
    }


def fitting(
    schemas: list[dict[str, Any]], counter: TokenCounter, limit: int, messages: Sequence[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """The schemas a request within `limit` tokens carries: all of them unless they take over
    `TOOL_SHARE`; then the core, the ones `messages` used or loaded, and `load_tools` (compact)."""
    if counter.tools(schemas) <= limit * TOOL_SHARE:
        return schemas
    keep = CORE | used_tools(messages)
    carried = [compact(s) for s in schemas if _name(s) in keep]
    deferred = [s for s in schemas if _name(s) not in keep]
    return [*carried, load_tools_schema(deferred)] if deferred else carried
