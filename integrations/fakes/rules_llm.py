"""A rule-following stand-in for a model, for trying xihe by hand on the loopback fakes (`xihe fakes up`)
and for running `xihe eval model` against the fake in every server family's mode.

It is not clever: a backfill request becomes one `trigger_dolphinscheduler` call, a "where is…"
question one `search_code` call, a question about run(s) one `query_ds_task_status` call per run
(in one turn), a question about the repository's files one whitelisted shell call, a question about
a file's last line a shell call and then `read_artifact` paging to the end; a tool result gets a
short answer quoting it; anything else gets a hint of what to try. It only calls tools the request
offers, so the gate and the schemas decide exactly as with a real model.
"""

from __future__ import annotations

import re
from typing import Any

from xihe.integrations.fakes.llm_server import Step, call, calls, say

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
RUNS = re.compile(r"(?:实例|instance|run)\s*#?(\d+)", re.I)
STATUS = re.compile(r"状态|怎么样|status|state", re.I)
LAST_LINE = re.compile(r"最后一行|last line", re.I)
FILES = re.compile(r"哪些文件|有什么文件|列出|list (?:the )?files", re.I)
PATH = re.compile(r"[\w./-]+\.\w+")
ARTIFACT = re.compile(r"artifact ([0-9a-f]{8,64})")
SIZE = re.compile(r"characters \d+-\d+ of (\d+)")


def _tools(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools") or [] if t.get("type") == "function"}


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            return m["content"]
    return ""


def _results(messages: list[dict[str, Any]]) -> list[str]:
    """The tool results after the last assistant turn (all answers to its calls)."""
    out: list[str] = []
    for m in reversed(messages):
        if m.get("role") != "tool":
            break
        out.insert(0, str(m.get("content") or ""))
    return out


def _quote(results: list[str], zh: bool) -> Step:
    """A short answer quoting the head and the tail of each result."""
    parts = []
    for text in results:
        lines = text.splitlines()
        shown = lines if len(lines) <= 12 else [*lines[:6], "…", *lines[-6:]]
        parts.append("\n".join(line[:200] for line in shown))
    head = (
        "工具结果如下（本地假模型只做转述）：\n"
        if zh
        else "The tool said (the local fake model only quotes it):\n"
    )
    return say(head + "\n\n".join(parts))


def _after_results(text: str, results: list[str], zh: bool, tools: set[str]) -> Step:
    """Page to the end of a saved output when the question is about its last line, else answer."""
    last = results[-1]
    art = ARTIFACT.search(last)
    if LAST_LINE.search(text) and art and "read_artifact" in tools:
        size = SIZE.search(last)
        if not last.startswith("[Tool Result: read_artifact]"):
            return call("read_artifact", artifact_id=art.group(1), offset=0, length=1)
        if size and "(end)" not in last:
            total = int(size.group(1))
            return call("read_artifact", artifact_id=art.group(1), offset=max(0, total - 400), length=400)
    return _quote(results, zh)


def respond(body: dict[str, Any]) -> Step:
    """The next answer for one chat-completions request."""
    messages = body.get("messages") or []
    text = _last_user_text(messages)
    zh = bool(CJK.search(text))
    tools = _tools(body)
    results = _results(messages)
    if results:
        return _after_results(text, results, zh, tools)
    if BACKFILL.search(text) and "trigger_dolphinscheduler" in tools:
        found = DATES.search(text)
        dates = found.group(0) if found else ("昨天" if zh else "yesterday")
        workflow = FILLER.sub(" ", DATES.sub(" ", text)).strip()
        if workflow:
            return call("trigger_dolphinscheduler", workflow=workflow.split()[0], dates=dates)
        return say("要补跑哪个工作流？" if zh else "Which workflow should I backfill?")
    runs = RUNS.findall(text)
    if runs and STATUS.search(text) and "query_ds_task_status" in tools:
        return calls(*(("query_ds_task_status", {"instance_id": int(r)}) for r in runs))
    shell = "run_shell_command" in tools
    if LAST_LINE.search(text) and shell and PATH.search(text):
        return call("run_shell_command", command="show_file", args={"path": PATH.search(text).group(0)})  # type: ignore[union-attr]
    if FILES.search(text) and shell:
        return call("run_shell_command", command="ls", args={"path": "."})
    if QUESTION.search(text) and "search_code" in tools:
        return call("search_code", query=text, k=5)
    return say(
        "我是 `xihe fakes up` 的本地假模型，只懂几种说法。试试：「把订单同步任务补跑一下昨天的」、"
        "「确认操作是在哪里绑定到用户的？」，或 /help。"
        if zh
        else "I am the local fake model of `xihe fakes up` and follow a few rules. Try: "
        "'backfill order_sync for yesterday', 'where is the confirmation bound to the user?', or /help."
    )
