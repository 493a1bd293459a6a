"""Pause and resume a DolphinScheduler run (executeType PAUSE and RECOVER_SUSPENDED_PROCESS).

    pause_run    write  PAUSE a RUNNING_EXECUTION instance: the running task finishes, then PAUSE
    resume_run   write  RECOVER_SUSPENDED_PROCESS on a PAUSE or STOP instance: it goes on where it halted

Both read their instance once per walk (`prepare`), refuse at once what DolphinScheduler would refuse
(`ACTION_ALLOWED`: the state the run is in does not allow that executeType) and say why, sending
nothing; both are followed like a rerun, so the poll job reports the new state (⏸️ PAUSE, or how the
resumed run ended) in the conversation that asked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xihe.agent.deps import Deps
from xihe.agent.i18n import Catalog, Lang, Text, say_md, text
from xihe.agent.registry import ToolContext, ToolSpec
from xihe.agent.run_states import state_text
from xihe.integrations.dolphinscheduler.states import ACTION_ALLOWED, PAUSING
from xihe.tools.dolphin.failures import ds_state
from xihe.tools.dolphin.instance import (
    InstanceArgs,
    Target,
    explain_instance,
    followed_lookup,
    instance_environment,
    read_instance,
    send_followed,
    target_arg,
)
from xihe.tools.dolphin.service import told

SUSPEND: Catalog = {
    "explain_pause": {
        "en": "pause {workflow} instance {id}{when}, now {state} (the running task finishes first)",
        "zh": "暂停 {workflow} 实例 {id}{when}，当前 {state}（正在运行的任务会先跑完）",
    },
    "explain_resume": {
        "en": "resume {workflow} instance {id}{when}, now {state}, where it halted",
        "zh": "从停下的地方恢复 {workflow} 实例 {id}{when}，当前 {state}",
    },
    "pause": {
        "en": "Pausing **{workflow}** #{id} (was {state}): the running task finishes, then it pauses. "
        "I'll report here when it has paused; `/resume {id}` goes on from there.",
        "zh": "正在暂停 **{workflow}** #{id}（之前是 {state}）：正在运行的任务跑完后暂停。"
        "暂停后我会在这里告诉你；发送 `/resume {id}` 从那里继续。",
    },
    "resume": {
        "en": "Resuming **{workflow}** #{id} (was {state}). I'll report here when it ends.",
        "zh": "正在恢复 **{workflow}** #{id}（之前是 {state}）。结束后我会在这里告诉你。",
    },
    "pause_refused": {
        "en": "instance {id} is {state}; DolphinScheduler pauses only a RUNNING_EXECUTION run, so nothing was sent",
        "zh": "实例 {id} 的状态是 {state}；DolphinScheduler 只能暂停运行中（RUNNING_EXECUTION）的实例，所以没有发送任何请求",
    },
    "pause_already": {
        "en": "instance {id} is already {state}; nothing was sent (`/resume {id}` goes on once it has paused)",
        "zh": "实例 {id} 已经是 {state}；没有发送任何请求（暂停后发送 `/resume {id}` 继续）",
    },
    "resume_refused": {
        "en": "instance {id} is {state}; DolphinScheduler resumes only a PAUSE or STOP run, so nothing was sent",
        "zh": "实例 {id} 的状态是 {state}；DolphinScheduler 只能恢复已暂停（PAUSE）或已停止（STOP）的实例，所以没有发送任何请求",
    },
}


def _precheck(execute_type: str, refused: str) -> Callable[[Target, Deps], Text | None]:
    """Refuse a state DolphinScheduler does not allow for `execute_type`, before asking for a yes."""

    def precheck(call: Target, deps: Deps) -> Text | None:
        inst = call.target
        if inst.state in ACTION_ALLOWED[execute_type]:
            return None
        key = "pause_already" if execute_type == "PAUSE" and inst.state in PAUSING else refused
        return text(SUSPEND, key, id=inst.id, state=ds_state(inst.state))

    return precheck


def _reply(r: dict[str, Any], lang: Lang = "en") -> str:
    """What was sent for which run, and what comes next."""
    return say_md(
        SUSPEND,
        r["action"],
        lang,
        workflow=r["workflow"],
        id=r["instance_id"],
        state=state_text(r["state"], lang),
    )


def pause(call: Target, ctx: ToolContext) -> dict[str, Any]:
    """PAUSE a running instance (`pause_precheck` passed on it); followed until it has paused."""
    return send_followed(call, ctx, "PAUSE", "pause")


def resume(call: Target, ctx: ToolContext) -> dict[str, Any]:
    """RECOVER_SUSPENDED_PROCESS on a paused or stopped instance; followed until it ends."""
    return send_followed(call, ctx, "RECOVER_SUSPENDED_PROCESS", "resume")


PAUSE = ToolSpec(
    name="pause_run",
    description="Pause a running DolphinScheduler workflow instance: the running task finishes, no further "
    "task starts, and the run waits in PAUSE until resumed (resume_run).",
    args=InstanceArgs,
    run=told(pause, target_arg),
    risk="write",
    environment_of=instance_environment,
    lookup=followed_lookup("pause"),
    summarize=_reply,
    explain=explain_instance("explain_pause", SUSPEND),
    precheck=_precheck("PAUSE", "pause_refused"),
    prepare=read_instance,
)

RESUME = ToolSpec(
    name="resume_run",
    description="Resume a paused (or stopped) DolphinScheduler workflow instance where it halted "
    "(same instance id); the bot reports how it ends.",
    args=InstanceArgs,
    run=told(resume, target_arg),
    risk="write",
    environment_of=instance_environment,
    lookup=followed_lookup("resume"),
    summarize=_reply,
    explain=explain_instance("explain_resume", SUSPEND),
    precheck=_precheck("RECOVER_SUSPENDED_PROCESS", "resume_refused"),
    prepare=read_instance,
)
