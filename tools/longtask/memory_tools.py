"""remember / recall: facts of the user the channel authenticated, with their source checked.

The owner is always the task's owner (the identity the channel verified); no argument names it, so
the model cannot read or write anyone else's facts. A fact is written only from

- `source: "user"`: the value must be in the user's own words (this message, or this user's earlier
  messages in this conversation), or
- `source: "tool"`: the value must be in the result of a finished call of this task to a tool the
  config trusts for facts (`longtask.memory.fact_tools`); documents (read_artifact, code search ...)
  are never on that list.

A new value for an existing key is a correction: it replaces the value and the old one stays in history.
"""

from __future__ import annotations

import re
from fnmatch import fnmatch
from typing import Any, Literal

from pydantic import BaseModel, Field

from xihe.agent.errors import ToolFailed
from xihe.agent.registry import ToolContext, ToolSpec
from xihe.agent.tasks import StepStatus
from xihe.agent.timefmt import show
from xihe.tools.longtask.evidence import find_step, step_output
from xihe.tools.longtask.memory import MemoryStore

# Tools that return documents (stored outputs, code, search hits): never a source of facts, whatever
# the config trusts, because their text was written by someone other than the user or the system.
DOCUMENT_TOOLS = ("read_artifact", "search_code", "get_code_context", "*search*", "read_*", "fetch_*")


def trusted(tool: str, fact_tools: list[str]) -> bool:
    """Whether a tool's results may become facts."""
    if any(fnmatch(tool, pattern) for pattern in DOCUMENT_TOOLS):
        return False
    return any(fnmatch(tool, pattern) for pattern in fact_tools)


class RememberArgs(BaseModel):
    key: str = Field(
        description="a stable key, e.g. 'A3003:return_reason'; the same key corrects the old value"
    )
    value: str = Field(description="the fact, quoted exactly as the user or the tool result states it")
    source: Literal["user", "tool"] = Field(
        description="user: the user said it; tool: a result of one of your tool calls in this task"
    )
    tool_call_id: str | None = Field(
        None, description="source=tool: the id of your tool call whose result states it"
    )


class RecallArgs(BaseModel):
    key: str | None = Field(None, description="the key; leave empty to list the keys you may recall")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("“", '"').replace("”", '"')).strip().casefold()


def _user_words(ctx: ToolContext, history: int) -> list[str]:
    task = ctx.deps.tasks.get(ctx.task_id)
    earlier = ctx.deps.tasks.recent(owner=task.owner, conversation=task.conversation, limit=history + 1)
    return [task.goal, *(t.goal for t in earlier if t.id < task.id)]


def specs(store: MemoryStore, fact_tools: list[str], history: int = 6) -> list[ToolSpec]:
    """The memory tools over one store."""

    def source_of(args: RememberArgs, ctx: ToolContext) -> str:
        value = _norm(args.value)
        if args.source == "user":
            if not any(value in _norm(words) for words in _user_words(ctx, history)):
                raise ToolFailed(
                    "not remembered: the user's messages do not contain this value. Quote the user's own "
                    "words exactly, or ask the user."
                )
            return f"user: task {ctx.task_id}"
        if not args.tool_call_id:
            raise ToolFailed(
                "not remembered: source=tool needs the tool_call_id of the call whose result states it"
            )
        step = find_step({"tool_call_id": args.tool_call_id}, ctx)
        if step.status != StepStatus.DONE:
            raise ToolFailed(f"not remembered: that call ({step.tool_name}) did not finish successfully")
        if not trusted(step.tool_name, fact_tools):
            raise ToolFailed(
                f"not remembered: results of {step.tool_name} are not a trusted source of facts (documents and "
                f"free text never are; trusted: {', '.join(fact_tools) or 'none'})"
            )
        if value not in _norm(step_output(step, ctx)):
            raise ToolFailed(f"not remembered: the result of {step.tool_name} does not state this value")
        return f"tool {step.tool_name}: task {ctx.task_id} step {step.step_key}"

    def remember(args: RememberArgs, ctx: ToolContext) -> dict[str, Any]:
        source = source_of(args, ctx)
        try:
            done = store.remember(ctx.user, args.key, args.value, source, ctx.now)
        except ValueError as exc:
            raise ToolFailed(f"not remembered: {exc}") from None
        out: dict[str, Any] = {"key": done.fact.key, "value": done.fact.value, "source": done.fact.source}
        if done.replaced is not None:
            out["corrected_from"] = done.replaced.value
        if not done.changed:
            out["unchanged"] = True
        return out

    def recall(args: RecallArgs, ctx: ToolContext) -> dict[str, Any]:
        if not args.key:
            facts = store.facts(ctx.user)
            return {"keys": [f.key for f in facts] or "(nothing remembered yet)"}
        fact = store.recall(ctx.user, args.key)
        if fact is None:
            return {
                "key": args.key,
                "found": False,
                "note": "nothing remembered under this key; do not guess",
            }
        return {
            "key": fact.key,
            "value": fact.value,
            "source": fact.source,
            "updated": show(fact.updated_at, ctx.deps.settings.core.timezone, seconds=False),
            "note": "remembered, not live: re-check states that change (orders, runs) with their tools",
        }

    return [
        ToolSpec(
            name="remember",
            description="Remember a fact for this user (a preference, a stated reason, a checked result). "
            "Only from the user's own words or a trusted tool result; a new value for a key corrects the old.",
            args=RememberArgs,
            run=remember,
        ),
        ToolSpec(
            name="recall",
            description="Recall a remembered fact of this user by key (or list the keys).",
            args=RecallArgs,
            run=recall,
        ),
    ]
