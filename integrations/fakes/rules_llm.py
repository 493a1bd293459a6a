"""A rule-following stand-in for a model, for trying xihe by hand on the loopback fakes (`xihe fakes up`).

It is not clever: a backfill request becomes one `trigger_dolphinscheduler` call, a "where is…"
question one `search_code` call, a tool result a short answer quoting it; anything else gets a
hint of what to try. It only calls tools the request offers, so the gate and the schemas decide
exactly as with a real model.
"""

from __future__ import annotations

import re
from typing import Any

from xihe.integrations.fakes.llm_server import Step, call, say

BACKFILL = re.compile(r"补跑|补数|重跑|回刷|backfill|re-?run", re.I)
QUESTION = re.compile(
    r"哪里|哪儿|在哪|哪个文件|代码|怎么实现|where|which file|code|how does|implemented", re.I
)
DATES = re.compile(
    r"\d{4}-\d{1,2}-\d{1,2}(?:\s*(?:到|至|~|\.\.|to)\s*\d{4}-\d{1,2}-\d{1,2})?"
    r"|\d{1,2}月\d{1,2}[日号]?(?:\s*(?:到|至|-)\s*\d{1,2}[日号]?)?"
    r"|上周[一二三四五六日天]|昨天|今天|前天|yesterday|today|last \w+day",
    re.I,
)
FILLER = re.compile(
    r"把|帮我|给我|请|一下|任务|工作流|的|吧|。|，|\?|？|please|the|workflow|for|of|" + BACKFILL.pattern, re.I
)
CJK = re.compile(r"[\u4e00-\u9fff]")


def _tools(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools") or [] if t.get("type") == "function"}


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            return m["content"]
    return ""


def respond(body: dict[str, Any]) -> Step:
    """The next answer for one chat-completions request."""
    messages = body.get("messages") or []
    text = _last_user_text(messages)
    zh = bool(CJK.search(text))
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        quoted = "\n".join(str(last.get("content") or "").splitlines()[:12])[:1200]
        return say(
            (
                "工具结果如下（本地假模型只做转述）：\n"
                if zh
                else "The tool said (the local fake model only quotes it):\n"
            )
            + quoted
        )
    tools = _tools(body)
    if BACKFILL.search(text) and "trigger_dolphinscheduler" in tools:
        found = DATES.search(text)
        dates = found.group(0) if found else ("昨天" if zh else "yesterday")
        workflow = FILLER.sub(" ", DATES.sub(" ", text)).strip()
        if workflow:
            return call("trigger_dolphinscheduler", workflow=workflow.split()[0], dates=dates)
        return say("要补跑哪个工作流？" if zh else "Which workflow should I backfill?")
    if QUESTION.search(text) and "search_code" in tools:
        return call("search_code", query=text, k=5)
    return say(
        "我是 `xihe fakes up` 的本地假模型，只懂几种说法。试试：「把订单同步任务补跑一下昨天的」、"
        "「确认操作是在哪里绑定到用户的？」，或 /help。"
        if zh
        else "I am the local fake model of `xihe fakes up` and follow a few rules. Try: "
        "'backfill order_sync for yesterday', 'where is the confirmation bound to the user?', or /help."
    )
