"""The explicit command for a free-text run request, for when no model is there to read it.

Without a model xihe runs only commands; a message such as 把订单同步任务补跑一下昨天的 is answered
with the command that does it, `/run 订单同步 昨天`: a workflow workflows.yaml knows (its name or an
alias, as the user wrote it), a word that asks for a run, and the date phrase when there is one.
`/run` itself reads the dates, so a phrase it cannot read is explained there.
"""

from __future__ import annotations

import re

from xihe.config.workflows import WorkflowsConfig

ASKS_FOR_RUN = re.compile(
    r"补跑|补数|补一下|重跑|回刷|刷一下|跑一下|跑下|运行|启动|执行|触发|backfill|re-?run|\brun\b|\bstart\b|\btrigger\b",
    re.I,
)
_DAY = r"(?:\d{4}-\d{1,2}-\d{1,2}|\d{1,2}月\d{1,2}[日号]?|\d{1,2}[日号])"
DATE_PHRASE = re.compile(
    rf"{_DAY}(?:\s*(?:\.\.|到|至|~|-|to)\s*{_DAY})?"
    r"|(?:上上|上|本|这)?(?:周|星期|礼拜)[一二三四五六日天]"
    r"|大前天|前天|昨天|今天|yesterday|today|last\s+(?:mon|tues|wednes|thurs|fri|satur|sun)day"
    r"|\d+\s*(?:天前|days?\s+ago)",
    re.I,
)


def run_command(text: str, workflows: WorkflowsConfig) -> str | None:
    """`/run WORKFLOW [DATES]` for a message that asks to run a known workflow, else None."""
    if not ASKS_FOR_RUN.search(text):
        return None
    lowered = text.lower()
    names = [n for wf in workflows.workflows for n in (wf.name, *wf.aliases) if n.lower() in lowered]
    if not names:
        return None
    name = max(names, key=len)  # 订单同步任务 names 订单同步, not a shorter alias inside it
    dates = DATE_PHRASE.search(text.replace(name, " "))
    return f"/run {name} {dates.group(0)}" if dates else f"/run {name}"
