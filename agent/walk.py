"""One walk over a task's steps: who asked, in which language, the latest row of each step, and the
counters that bound it. Identity and language are derived once per walk (or taken from the message
that started the task) and carried here.

`xihe.agent.loop.Agent` walks a task's step keys in order (see there); the model's turns
(`xihe.agent.model_step`) and the tool calls (`xihe.agent.tool_step`) read and count on this state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xihe.agent.deps import Deps
from xihe.agent.gate import Who
from xihe.agent.i18n import Lang
from xihe.agent.recovery import RunState
from xihe.agent.tasks import Task, TaskStep


@dataclass
class Walk:
    """The state of walking one task, from its first step to where it stops this time."""

    task: Task
    who: Who
    latest: dict[str, TaskStep]
    lang: Lang  # the language people in the task's conversation read (`task_lang`)
    tool_calls: int = 0
    invalid: int = 0
    rechecked: bool = False
    recovery: RunState = field(default_factory=RunState)
    refusal: str | None = None  # the gate's refusal as people read it (a command's reply)


def task_lang(deps: Deps, task: Task) -> Lang:
    """The language people in this task's conversation write in (as agent.inbound.reply_lang)."""
    return deps.lang(task.goal, task.conversation)
