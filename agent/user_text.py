"""Text written for the model, turned into text for people.

Tool results speak to the model ("…; tell the user nothing was done", "Ask the user which one they
mean and call again…"). When a command's result goes straight to a person (no model in between),
`for_people` drops those instructions and names the outcome in the user's language.

A failed step also carries its message as a catalog `Text` (`outcome`), so a command's reply says
the failure itself in the user's language, while the model and the audit keep the English.
"""

from __future__ import annotations

import json
import re
from typing import Any

from xihe.agent.i18n import Catalog, Lang, Text, say, text

PREFIXES: Catalog = {
    "NOT EXECUTED": {"en": "Not run", "zh": "没有执行"},
    "NOT RUN AGAIN": {"en": "Not run again", "zh": "没有再次执行"},
    "DENIED": {"en": "Refused", "zh": "已拒绝"},
    "ERROR": {"en": "Failed", "zh": "失败"},
}
OUTCOME: Catalog = {"said": {"en": "{word}: {message}", "zh": "{word}：{message}"}}
FAILURES: Catalog = {  # what the executor says about a tool that did not finish
    "integration": {
        "en": "{service} error: {message}{temporary}",
        "zh": "{service} 出错：{message}{temporary}",
    },
    "told": {"en": "{message}{temporary}", "zh": "{message}{temporary}"},
    "temporary": {"en": " (temporary; may be retried)", "zh": "（临时问题，可以重试）"},
    "internal": {
        "en": "internal error in {tool}: {error}",
        "zh": "{tool} 内部出错：{error}",
    },
}
STOPS: Catalog = {  # how the loop tells people a task ended without the model's answer
    "no_model": {
        "en": "No model is configured, so I can only run commands. Try /help.",
        "zh": "没有配置模型，所以我只能执行命令。试试 /help。",
    },
    "no_model_hint": {
        "en": "No model is configured, so I can only run commands. This one does what you asked: `{command}`",
        "zh": "没有配置模型，所以我只能执行命令。你要的可以这样做：`{command}`",
    },
    "busy": {"en": "Task {task} is being worked on elsewhere.", "zh": "任务 {task} 正在别处处理。"},
    "stopped": {
        "en": "I stopped: {reason}. Task {task} keeps what was done so far.",
        "zh": "我停下了：{reason}。任务 {task} 保留了目前做完的部分。",
    },
    "too_large": {
        "en": "the request does not fit the model's context: {error}",
        "zh": "请求超出了模型的上下文长度：{error}",
    },
    "invalid_calls": {
        "en": "I stopped: the model kept producing tool calls that could not be executed ({n} invalid). "
        "Task {task} has the details.",
        "zh": "我停下了：模型一直给出无法执行的工具调用（{n} 次无效）。详情见任务 {task}。",
    },
    "turns": {
        "en": "I stopped after {n} model turns without finishing. Task {task} has what was done so far.",
        "zh": "模型回合达到 {n} 次仍未完成，我停下了。任务 {task} 保留了目前做完的部分。",
    },
    "no_answer": {"en": "(no answer)", "zh": "（没有回答）"},
}
SERVICES = {"dolphinscheduler": "DolphinScheduler", "wecom": "WeCom", "llm": "LLM", "smtp": "SMTP"}
WHICH_ONE: Catalog = {"q": {"en": "Which one do you mean?", "zh": "你指的是哪一个？"}}

ASK_WHICH = re.compile(r"\s*Ask the user which one they mean\b[^.]*\.?", re.I)
TELL = re.compile(r"\b(?:tell|inform) the user (?:that )?", re.I)
FIX = re.compile(r"\s*Fix them and call again\.", re.I)
PREFIX = re.compile(r"^(NOT EXECUTED|NOT RUN AGAIN|DENIED|ERROR):\s*")


def for_people(text: str, lang: Lang = "en") -> str:
    """`text` without instructions to the model, its outcome word in `lang`."""
    out = text.strip()
    if ASK_WHICH.search(out):
        out = ASK_WHICH.sub("", out).rstrip() + " " + say(WHICH_ONE, "q", lang)
    out = FIX.sub("", TELL.sub("", out))
    found = PREFIX.match(out)
    if found:
        word = say(PREFIXES, found.group(1), lang)
        out = f"{word}{'：' if lang == 'zh' else ': '}{out[found.end() :]}"
    return out


def outcome(prefix: str, message: str | Text) -> Text:
    """A failed step's message for people: `prefix` (ERROR, NOT EXECUTED...) as an outcome word."""
    return text(OUTCOME, "said", word=text(PREFIXES, prefix), message=message)


def integration_failure(service: str, message: str | Text, *, retryable: bool) -> Text:
    """An outside service's failure for people: its raw message after the service's product name, or
    the explanation a tool gave it (a `Text`, which names the service itself)."""
    temporary = text(FAILURES, "temporary") if retryable else ""
    if isinstance(message, Text):
        return text(FAILURES, "told", message=message, temporary=temporary)
    name = SERVICES.get(service, service)
    return text(FAILURES, "integration", service=name, message=message, temporary=temporary)


def readable_args(data: dict[str, Any]) -> str:
    """`key: value` per argument given (empty ones left out); nested values as compact JSON with
    characters, not \\u escapes."""
    lines = []
    for key, value in data.items():
        if value is None or value == "":
            continue
        shown = (
            value
            if isinstance(value, str)
            else json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        )
        lines.append(f"{key}: {shown}")
    return "\n".join(lines)
