"""What `/plan`, `/memory` and the plan notes say to people, in English and Chinese (see `xihe.agent.i18n`).

The model reads the same lines in English (`lang="en"`, the default)."""

from __future__ import annotations

from xihe.agent.i18n import Catalog

STATUS: Catalog = {
    "pending": {"en": "pending", "zh": "待办"},
    "in_progress": {"en": "in_progress", "zh": "进行中"},
    "completed": {"en": "completed", "zh": "已完成"},
    "failed": {"en": "failed", "zh": "失败"},
    "cancelled": {"en": "cancelled", "zh": "已取消"},
}

CHANGE: Catalog = {
    "replaced": {"en": "replaced", "zh": "被替换"},
    "dropped": {"en": "dropped", "zh": "被放弃"},
    "failed": {"en": "failed", "zh": "失败"},
    "reclaimed": {"en": "reclaimed", "zh": "被收回"},
}

PLAN: Catalog = {
    "item": {
        "en": "#{seq} [{status}] {description}{after}{who}{tail}",
        "zh": "#{seq} [{status}] {description}{after}{who}{tail}",
    },
    "after": {"en": " (after {deps})", "zh": "（在 {deps} 之后）"},
    "owner": {"en": " [{owner}]", "zh": " [{owner}]"},
    "owner_lapsed": {"en": " [{owner}, lease expired]", "zh": " [{owner}，租约已过期]"},
    "evidence": {"en": " — evidence: {evidence}", "zh": " — 证据：{evidence}"},
    "reason": {"en": " — {reason}", "zh": " — {reason}"},
    "not_yours": {"en": "Task {task} belongs to someone else.", "zh": "任务 {task} 属于别人。"},
    "no_task": {"en": "There is no task {task}.", "zh": "没有任务 {task}。"},
    "none_here": {"en": "No plan in this conversation yet.", "zh": "这个对话里还没有计划。"},
    "no_plan": {"en": "Task {task} has no plan.", "zh": "任务 {task} 没有计划。"},
    "head": {"en": "**Plan of task {task}** — {goal}", "zh": "**任务 {task} 的计划** — {goal}"},
    "open": {"en": "{open} of {total} item(s) open", "zh": "{total} 项中有 {open} 项未完成"},
    "changes": {"en": "Changes:", "zh": "变更："},
    "change": {"en": "#{seq} {change} by {actor} at {at}", "zh": "#{seq} 于 {at} 由 {actor} {change}"},
    "change_reason": {"en": ": {reason}", "zh": "：{reason}"},
    "stop_note": {
        "en": "Plan (task {task}), {open} item(s) open:",
        "zh": "计划（任务 {task}）还有 {open} 项未完成：",
    },
    "overclaim": {
        "en": "_Note: this answer claims more than the plan shows. {note}_",
        "zh": "_注意：这个回答说完成的比计划显示的多。{note}_",
    },
}

MEMORY: Catalog = {
    "fact": {
        "en": "{key} = {value}  (source: {source}; {at})",
        "zh": "{key} = {value}（来源：{source}；{at}）",
    },
    "current": {"en": "(current) ", "zh": "（当前）"},
    "nothing_under": {"en": "Nothing remembered under {key!r}.", "zh": "没有记住 {key!r} 下的内容。"},
    "nothing": {"en": "I remember nothing about you yet.", "zh": "我还没有记住关于你的任何事。"},
}
