"""What the model sees: tool results capped and labelled, history trimmed in whole groups.

A group is one user message, one plain assistant message, or an assistant message with tool
calls together with every tool result answering it. Trimming drops the oldest groups whole, so a
tool call never loses its result (or the other way round), and the goal and the latest turn stay.
"""

from __future__ import annotations

import json
from typing import Any

from agent.artifacts import ArtifactRef

Message = dict[str, Any]


def label_result(tool: str, text: str, cap: int, ref: ArtifactRef | None) -> str:
    """`[Tool Result: name]` + at most `cap` characters, pointing at the artifact when cut."""
    head = f"[Tool Result: {tool}]\n"
    if len(text) <= cap:
        return head + text
    assert ref is not None, "a truncated result must have been saved as an artifact"
    return (
        head + text[:cap] + f"\n…[truncated: {len(text)} characters in all, sha256 {ref.sha256[:16]}; "
        f'the full output is artifact {ref.id}: call read_artifact(artifact_id="{ref.id}", offset={cap}) '
        "to read more]"
    )


def render_output(value: Any) -> str:
    """A tool's return value as the text the model reads."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=1, default=str)


def _size(message: Message) -> int:
    size = len(message.get("content") or "")
    for tc in message.get("tool_calls") or ():
        size += len(tc["function"]["name"]) + len(tc["function"].get("arguments") or "")
    return size + 20


def groups(messages: list[Message]) -> list[list[Message]]:
    """Split a message list (without the system prompt) into trimming groups."""
    out: list[list[Message]] = []
    for m in messages:
        if m["role"] == "tool" and out and out[-1][0].get("tool_calls"):
            out[-1].append(m)
        else:
            out.append([m])
    return out


def trim(messages: list[Message], budget_chars: int, *, keep_last: int = 1) -> list[Message]:
    """Drop the oldest groups until the messages fit; system messages and the last groups stay."""
    system = [m for m in messages if m["role"] == "system"]
    rest = groups([m for m in messages if m["role"] != "system"])
    total = sum(_size(m) for m in system) + sum(_size(m) for g in rest for m in g)
    dropped = 0
    while total > budget_chars and len(rest) > keep_last:
        # Never drop the user's goal (the first user message of the task) while later groups remain.
        victim = next((i for i, g in enumerate(rest[:-keep_last]) if not g[0].get("_goal")), None)
        if victim is None:
            break
        group = rest.pop(victim)
        total -= sum(_size(m) for m in group)
        dropped += len(group)
    out = list(system)
    if dropped:
        out.append(
            {
                "role": "system",
                "content": f"[{dropped} earlier message(s) were trimmed to fit the context; "
                "their full record is in the task's steps.]",
            }
        )
    out.extend(m for g in rest for m in g)
    return out


def for_api(messages: list[Message]) -> list[Message]:
    """Strip private markers before sending."""
    return [{k: v for k, v in m.items() if not k.startswith("_")} for m in messages]
