"""What the model sees: tool results capped and labelled, each request built within a token budget.

A group is one user message, one plain assistant message, or an assistant message with tool
calls together with every tool result answering it. The budget drops the oldest groups whole, so a
tool call never loses its result (or the other way round), and the goal and the latest turn stay.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xihe.agent.artifacts import ArtifactRef
from xihe.agent.tasks import StepStatus

if TYPE_CHECKING:
    from xihe.agent.budget import TokenCounter
    from xihe.agent.tasks import TaskStep

Message = dict[str, Any]


def labelled(tool: str, body: str) -> str:
    """A tool result as the model reads it: `[Tool Result: name]`, then the body."""
    return f"[Tool Result: {tool}]\n{body}"


def cut(text: str, cap: int, ref: ArtifactRef | None) -> str:
    """At most `cap` characters of `text`, pointing at the artifact that holds all of it when cut."""
    if len(text) <= cap:
        return text
    assert ref is not None, "a truncated result must have been saved as an artifact"
    return (
        text[:cap] + f"\n…[truncated: {len(text)} characters in all, sha256 {ref.sha256[:16]}; "
        f'the full output is artifact {ref.id}: call read_artifact(artifact_id="{ref.id}", offset={cap}) '
        "to read more]"
    )


def label_result(tool: str, text: str, cap: int, ref: ArtifactRef | None) -> str:
    """`[Tool Result: name]` + at most `cap` characters, pointing at the artifact when cut."""
    return labelled(tool, cut(text, cap, ref))


def render_output(value: Any) -> str:
    """A tool's return value as the text the model reads."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=1, default=str)


def groups(messages: list[Message]) -> list[list[Message]]:
    """Split a message list (without the system prompt) into trimming groups."""
    out: list[list[Message]] = []
    for m in messages:
        if m["role"] == "tool" and out and out[-1][0].get("tool_calls"):
            out[-1].append(m)
        else:
            out.append([m])
    return out


def for_api(messages: list[Message]) -> list[Message]:
    """Strip private markers before sending."""
    return [{k: v for k, v in m.items() if not k.startswith("_")} for m in messages]


# ---- the token budget (long tasks) ------------------------------------------------------------
#
# `build()` assembles one request by priority within `limit` tokens (the model's window minus
# the room reserved for the reply):
#
#   1. system rules + tool schemas     always (if they alone do not fit, ContextTooLarge)
#   2. the task goal                    always (a huge goal is shortened head + tail, labelled)
#   3. blocks by priority               open plan items, the user's latest corrections, needed facts,
#                                       other providers' context; each whole, else cut line-wise, else left out
#                                       (room stays for the newest turn and a summary; facts and other
#                                       blocks take at most a quarter of the budget each)
#   4. recent turns, newest first       whole groups only (a tool call never loses its result); the
#                                       newest group (the results the next answer is made from) is cut
#                                       as little as lets it fit, older groups to previews; cut results
#                                       point at the stored step/artifact; the first group that still
#                                       does not fit ends the walk, so what is kept is a contiguous
#                                       recent suffix
#   5. a mechanical summary             of the task's dropped turns, from the step log (every turn is
#                                       archived in task_step before it enters the transcript), where
#                                       an outcome that is not known stays "unknown"; never a model call

PRIORITY = {"plan": 20, "corrections": 30, "facts": 40, "extra": 50}
PREVIEW_CHARS = 300
_ARTIFACT = re.compile(r"artifact ([0-9a-f]{8,64})")


class ContextTooLarge(Exception):
    """Even the mandatory part of a request (rules, tool schemas, goal) exceeds the budget."""


@dataclass(frozen=True)
class Block:
    """System context with a priority (lower is kept first): plan, corrections, facts, extra."""

    name: str
    text: str
    priority: int = PRIORITY["extra"]


@dataclass(frozen=True)
class Built:
    """One request as sent: messages, what they cost, and what was left out."""

    messages: list[Message]
    tokens: int  # prompt tokens (messages + tool schemas) by `counter`
    limit: int
    counter: str  # "tiktoken cl100k_base" or "estimate (...)"
    dropped_groups: int = 0
    previewed: int = 0  # tool results cut to previews
    omitted: list[str] = field(default_factory=list)  # blocks left out or cut
    summary: str | None = None


def _result_status(msg: Message, steps: dict[str, TaskStep] | None) -> str:
    """done | failed | unknown for a tool result message, from the step log when available."""
    key = msg.get("_step")
    if steps is not None and key:
        step = steps.get(key)
        if step is None or step.status == StepStatus.RUNNING:
            return "unknown"
        return "done" if step.status == StepStatus.DONE else "failed"
    body = (msg.get("content") or "").split("\n", 1)[-1]
    if body.startswith(("ERROR", "DENIED", "NOT EXEC", "Refused", "Not executed", "The response was cut")):
        return "failed"
    return "done"


def summarize_groups(dropped: list[list[Message]], steps: dict[str, TaskStep] | None, task_id: int) -> str:
    """A deterministic account of dropped turns: calls, outcomes (unknown stays unknown), replies."""
    lines = [
        f"[Earlier turns of task {task_id}, summarised mechanically; the full record is in the task's "
        "steps. An 'unknown' outcome is NOT a success: check it before relying on it.]"
    ]
    history = 0
    for group in dropped:
        head = group[0]
        if head.get("_history"):
            history += 1
            continue
        if head.get("tool_calls"):
            results = {m.get("tool_call_id"): m for m in group[1:]}
            for tc in head["tool_calls"]:
                fn = tc.get("function", {})
                args = (fn.get("arguments") or "")[:80]
                res = results.get(tc.get("id"))
                if res is None:
                    outcome = "outcome unknown (no result recorded)"
                else:
                    status = _result_status(res, steps)
                    body = (res.get("content") or "").split("\n", 1)[-1].strip().replace("\n", " ")
                    where = f" [step {res['_step']}]" if res.get("_step") else ""
                    if status == "unknown":
                        outcome = f"outcome unknown (interrupted){where}"
                    elif status == "failed":
                        outcome = f"failed: {body[:120]}{where}"
                    else:
                        outcome = f"done: {body[:120]}{where}"
                lines.append(f"- {fn.get('name', '?')}({args}) → {outcome}")
        elif head["role"] == "assistant":
            lines.append(f"- assistant said: {(head.get('content') or '')[:120]}")
        else:
            lines.append(f"- {head['role']}: {(head.get('content') or '')[:120]}")
    if history:
        lines.append(f"- ({history} earlier exchange(s) of this conversation left out)")
    return "\n".join(lines)


def _previewed(group: list[Message], chars: int = PREVIEW_CHARS) -> list[Message]:
    """The group with long tool results cut to `chars` characters that say where the rest is."""
    out: list[Message] = []
    for m in group:
        content = m.get("content") or ""
        if m.get("tool_calls"):
            out.append({**m, "tool_calls": [_args_cut(tc, chars) for tc in m["tool_calls"]]})
            continue
        if m["role"] != "tool" or len(content) <= chars + 200:
            out.append(m)
            continue
        head, _, body = content.partition("\n") if content.startswith("[Tool Result:") else ("", "", content)
        art = _ARTIFACT.search(content)
        where = (
            f'artifact {art.group(1)} (read_artifact(artifact_id="{art.group(1)}"))'
            if art
            else f"step {m.get('_step', '?')} of this task"
        )
        out.append(
            {
                **m,
                "content": f"{head}\n"
                * bool(head)
                + f"{body[:chars]}\n…[cut to a preview to fit the context: "
                f"{len(body)} characters in all; the full result is {where}]",
            }
        )
    return out


def _args_cut(tc: Message, chars: int) -> Message:
    """A tool call whose arguments are longer than a preview, with a JSON note in their place (its
    result says what came of it; the step log keeps the call as the model sent it)."""
    args = tc["function"].get("arguments") or ""
    if len(args) <= max(chars, PREVIEW_CHARS) + 200:
        return tc
    note = json.dumps({"left_out": f"{len(args)} characters of arguments, not repeated to fit the context"})
    return {**tc, "function": {**tc["function"], "arguments": note}}


def _cut_to_fit(group: list[Message], room: int, counter: TokenCounter) -> list[Message] | None:
    """The group with its tool results cut as little as lets it fit `room` tokens (the call and each
    result stay together), or None when not even a short preview fits."""
    longest = max(
        [len(m.get("content") or "") for m in group if m["role"] == "tool"]
        + [len(tc["function"].get("arguments") or "") for tc in group[0].get("tool_calls") or ()]
    )
    low, high, best = 0, longest, None
    while low <= high:
        mid = (low + high) // 2
        trial = _previewed(group, mid)
        if sum(counter.message(m) for m in trial) <= room:
            best, low = trial, mid + 1
        else:
            high = mid - 1
    return best


def _fit_block(block: Block, room: int, counter: TokenCounter) -> str | None:
    """The block's text whole, or cut to whole lines that fit `room` tokens, or None."""
    msg = {"role": "system", "content": block.text}
    if counter.message(msg) <= room:
        return block.text
    kept: list[str] = []
    lines = block.text.splitlines()
    for line in lines:
        trial = "\n".join([*kept, line, f"…[{block.name}: more left out to fit the context]"])
        if counter.message({"role": "system", "content": trial}) > room:
            break
        kept.append(line)
    if len(kept) <= 1:
        return None
    return "\n".join(
        [*kept, f"…[{block.name}: {len(lines) - len(kept)} more line(s) left out to fit the context]"]
    )


def _shorten(text: str, room: int, counter: TokenCounter) -> str:
    """Head and tail of a text that is too long, labelled."""
    keep = max(200, len(text))
    while keep > 200:
        keep = int(keep * 0.8)
        cut = text[: keep // 2] + f"\n…[{len(text) - keep} characters left out]…\n" + text[-keep // 2 :]
        if counter.message({"role": "user", "content": cut}) <= room:
            return cut
    return text[:200] + "…[left out]"


def build(
    system: str,
    transcript: list[Message],
    *,
    tools: list[dict[str, Any]],
    counter: TokenCounter,
    limit: int,
    blocks: list[Block] = (),  # type: ignore[assignment]
    steps: dict[str, TaskStep] | None = None,
    task_id: int = 0,
    summary_tokens: int = 400,
) -> Built:
    """One request within `limit` tokens, by priority (see the comment above)."""
    rules = {"role": "system", "content": system}
    used = counter.messages([rules]) + counter.tools(tools)
    if used > limit:
        raise ContextTooLarge(
            f"the system rules and tool schemas alone take {used} tokens, over the {limit}-token budget "
            "(a larger model window is needed: the server's, e.g. Ollama's num_ctx, and llm.context_tokens)"
        )
    rest = [m for m in transcript if m["role"] != "system" or m.get("_keep")]
    gs = groups(rest)
    goal_i = next((i for i, g in enumerate(gs) if g[0].get("_goal")), None)
    goal = gs[goal_i] if goal_i is not None else []
    goal_msgs = list(goal)
    g_tokens = sum(counter.message(m) for m in goal_msgs)
    if used + g_tokens > limit and goal_msgs:
        goal_msgs = [{**goal_msgs[0], "content": _shorten(goal_msgs[0]["content"], limit - used, counter)}]
        g_tokens = counter.message(goal_msgs[0])
        if used + g_tokens > limit:
            raise ContextTooLarge(f"the task goal does not fit the {limit}-token budget")
    used += g_tokens
    omitted: list[str] = []
    block_msgs: list[Message] = []
    ordered = [g for i, g in enumerate(gs) if i != goal_i]  # oldest → newest, goal excluded
    # Blocks come first, but never at the price of the whole recent past: keep room for the newest
    # turn (as previews) and a summary, and let facts/extra blocks take at most a quarter each.
    newest = sum(counter.message(m) for m in _previewed(ordered[-1])) if ordered else 0
    reserve = min(newest, limit // 4) + (min(summary_tokens, limit // 8) if len(ordered) > 1 else 0)
    for block in sorted(blocks, key=lambda b: b.priority):
        room = limit - used - reserve
        if block.priority >= PRIORITY["facts"]:
            room = min(room, limit // 4)
        text = _fit_block(block, room, counter)
        if text is None:
            omitted.append(block.name)
            continue
        if text != block.text:
            omitted.append(f"{block.name} (cut)")
        msg = {"role": "system", "content": text}
        block_msgs.append(msg)
        used += counter.message(msg)

    def fill(room: int, spare: int = 0) -> tuple[list[list[Message]], int, int]:
        kept: list[list[Message]] = []
        previews = 0
        for group in reversed(ordered):
            cost = sum(counter.message(m) for m in group)
            if cost > room:
                # the newest results are what the next answer is made from: as much of them as fits
                # (leaving `spare` for the summary of what is dropped)
                short = _cut_to_fit(group, room - spare, counter) if not kept else _previewed(group)
                cost = sum(counter.message(m) for m in short) if short is not None else room + 1
                if short is None or cost > room:
                    break
                previews += 1
                group = short
            kept.append(group)
            room -= cost
        kept.reverse()
        return kept, previews, room

    kept, previews, _ = fill(limit - used, min(summary_tokens, limit // 8) if len(ordered) > 1 else 0)
    summary = None
    if len(kept) < len(ordered):
        dropped = ordered[: len(ordered) - len(kept)]
        summary = summarize_groups(dropped, steps, task_id)
        newest = sum(counter.message(m) for m in kept[-1]) if kept else 0  # the summary never displaces it
        room_for_summary = min(summary_tokens, max(0, limit - used - newest - 16))
        s_msg = {"role": "system", "content": summary}
        while counter.message(s_msg) > room_for_summary and "\n" in summary:
            lines = summary.splitlines()
            summary = (
                "\n".join([lines[0], "- (older entries left out)", *lines[3:]])
                if len(lines) > 3
                else lines[0]
            )
            s_msg = {"role": "system", "content": summary}
        if counter.message(s_msg) <= room_for_summary:
            used += counter.message(s_msg)
            kept, previews, _ = fill(limit - used)
        else:
            summary = None
    n_dropped = len(ordered) - len(kept)
    out: list[Message] = [rules, *block_msgs]
    # earlier exchanges of the conversation, the goal, the summary of dropped turns, the recent turns
    out += [m for g in kept if g[0].get("_history") for m in g]
    out += goal_msgs
    if summary:
        out.append({"role": "system", "content": summary})
    out += [m for g in kept if not g[0].get("_history") for m in g]
    total = counter.messages(out) + counter.tools(tools)
    return Built(out, total, limit, counter.label, n_dropped, previews, omitted, summary)
