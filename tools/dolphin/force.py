"""force_success: mark a failed task of a run FORCED_SUCCESS, so the run goes on or ends.

    force_success   write   `POST …/task-instances/{id}/force-success`, then the run continues

DolphinScheduler accepts it only for a failed or killed task row (else 10166) and, from 3.2 on, only
in a run that has ended. It turns the run SUCCESS by itself only when every task of the DAG has run
and this was the only failure; otherwise the downstream tasks never ran, so this tool goes on with
them the way the UI does (a rerun from the failure for a FAILURE run, a resume for a stopped one),
followed like a rerun. The confirmation names the downstream tasks that depend on the task's output,
which it did not produce, and of them those that read its output parameters (`${prop}` of its OUT
localParams, which a forced task never set).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from xihe.agent.deps import Deps
from xihe.agent.errors import DolphinError
from xihe.agent.i18n import Catalog, Lang, Text, say_md, text
from xihe.agent.registry import Prepared, ToolContext, ToolSpec
from xihe.agent.run_states import state_text
from xihe.agent.wecom_markdown import Md
from xihe.integrations.dolphinscheduler.models import Instance, TaskRun
from xihe.integrations.dolphinscheduler.states import TASK_FORCEABLE, is_terminal
from xihe.tools.dolphin.failures import ds_state
from xihe.tools.dolphin.instance import InstanceArgs, instance_info, read_instance, send_followed
from xihe.tools.dolphin.logs import named_task
from xihe.tools.dolphin.service import environment_of_instance, locate, service, told

FORCE: Catalog = {
    "explain": {
        "en": "mark task {task} of {workflow} instance {id} FORCED_SUCCESS (it is {task_state}), then let the run "
        "go on{warning}",
        "zh": "把 {workflow} 实例 {id} 的任务 {task} 标记为强制成功（当前 {task_state}），然后让运行继续{warning}",
    },
    "warning": {
        "en": ". ⚠️ Downstream tasks depend on {task}'s output, which it did not produce: {names}",
        "zh": "。⚠️ 下游任务依赖 {task} 的输出，而它并没有产出：{names}",
    },
    "name": {"en": "{name}", "zh": "{name}"},
    "reads": {
        "en": "{name} (reads {params}, which {task} never set)",
        "zh": "{name}（读取 {params}，而 {task} 并没有设置）",
    },
    "not_failed": {
        "en": "task {task} of instance {id} is {state}; DolphinScheduler forces success only on a failed or "
        "killed task, so nothing was sent",
        "zh": "实例 {id} 的任务 {task} 是 {state}；DolphinScheduler 只能对失败或被终止的任务强制成功，所以没有发送任何请求",
    },
    "running": {
        "en": "instance {id} is still {state}; DolphinScheduler forces a task's success only once the run has "
        "ended, so nothing was sent",
        "zh": "实例 {id} 仍是 {state}；运行结束后 DolphinScheduler 才能对任务强制成功，所以没有发送任何请求",
    },
    "ended": {
        "en": "Task **{task}** of **{workflow}** #{id} is now FORCED_SUCCESS; the run is {state}.",
        "zh": "**{workflow}** #{id} 的任务 **{task}** 已强制成功；运行状态：{state}。",
    },
    "continues": {
        "en": "Task **{task}** of **{workflow}** #{id} is now FORCED_SUCCESS; the run goes on with {names}. "
        "I'll report here when it ends.",
        "zh": "**{workflow}** #{id} 的任务 **{task}** 已强制成功；运行将继续执行 {names}。结束后我会在这里告诉你。",
    },
}
GO_ON = {"FAILURE": "START_FAILURE_TASK_PROCESS", "STOP": "RECOVER_SUSPENDED_PROCESS"}


class ForceArgs(BaseModel):
    instance_id: int = Field(gt=0, description="workflow instance id, e.g. 101")
    task: str = Field(min_length=1, description="name of the failed task in that run, e.g. 'load'")
    project: str = Field("", description="DolphinScheduler project; empty = find it")


@dataclass(frozen=True)
class Forced:
    """The run, the task row to force and the tasks that depend on it (read once per walk)."""

    instance: Instance
    task: TaskRun
    downstream: tuple[str, ...]
    reads: dict[str, tuple[str, ...]]  # downstream task -> the `${prop}`s of this task's output it uses


Target = Prepared[ForceArgs, Forced]


def _read(args: ForceArgs, deps: Deps) -> Forced:
    """The run and the current attempt of the named task, or ToolFailed naming the run's tasks."""
    inst = read_instance(InstanceArgs(instance_id=args.instance_id, project=args.project), deps)
    svc = service(deps)
    code = svc.instance_projects[inst.id]
    _, tasks = svc.client.current_tasks(code, inst.id)
    row = named_task(tasks, inst.id, args.task)
    names: list[str] = []
    reads: dict[str, tuple[str, ...]] = {}
    try:
        if row.task_code:
            names, reads = svc.client.downstream(code, inst, row.task_code)
    except DolphinError:
        pass  # the warning is best effort; the force itself does not need the DAG
    return Forced(inst, row, tuple(names), reads)


def _precheck(call: Target, deps: Deps) -> Text | None:
    """What DolphinScheduler would refuse: a task that did not fail, or a run that has not ended."""
    f = call.target
    if f.task.state not in TASK_FORCEABLE:
        return text(FORCE, "not_failed", task=f.task.name, id=f.instance.id, state=ds_state(f.task.state))
    if not is_terminal(f.instance.state):
        return text(FORCE, "running", id=f.instance.id, state=ds_state(f.instance.state))
    return None


def _explain(call: Target, deps: Deps, lang: Lang) -> str:
    f = call.target
    names = Md(", ".join(_downstream_name(f, name, lang) for name in f.downstream))
    warning = say_md(FORCE, "warning", lang, task=f.task.name, names=names) if f.downstream else Md("")
    info = instance_info(deps, f.instance)
    return say_md(
        FORCE,
        "explain",
        lang,
        task=f.task.name,
        workflow=info["workflow"],
        id=f.instance.id,
        task_state=state_text(f.task.state, lang),
        warning=warning,
    )


def _downstream_name(f: Forced, name: str, lang: Lang) -> Md:
    """A downstream task's name; with the output parameters it reads when it reads any."""
    if name not in f.reads:
        return say_md(FORCE, "name", lang, name=name)
    return say_md(FORCE, "reads", lang, name=name, params=" ".join(f.reads[name]), task=f.task.name)


def _result(deps: Deps, inst: Instance, f: Forced, goes_on: bool, user: str) -> dict[str, Any]:
    return {
        **service(deps).asked_by(user),
        **instance_info(deps, inst),
        "action": "continues" if goes_on else "ended",
        "task": f.task.name,
        "task_state": "FORCED_SUCCESS",
        "downstream": list(f.downstream),
        "accepted": True,
    }


def force(call: Target, ctx: ToolContext) -> dict[str, Any]:
    """Force the task's success; when DS leaves the run unfinished, go on with its downstream tasks."""
    svc = service(ctx.deps)
    f = call.target
    code = svc.instance_projects[f.instance.id]
    svc.writer(ctx.user).force_success(code, f.task.id)
    inst = svc.client.get_instance(code, f.instance.id)
    go_on = GO_ON.get(inst.state)
    if go_on is None:  # DS made it SUCCESS itself (every task ran; this was the only failure)
        return _result(ctx.deps, inst, f, goes_on=False, user=ctx.user)
    send_followed(
        Prepared(InstanceArgs(instance_id=inst.id, project=call.args.project), inst), ctx, go_on, ""
    )
    return _result(ctx.deps, inst, f, goes_on=True, user=ctx.user)


def lookup(call: Target, ctx: ToolContext) -> dict[str, Any] | None:
    """After a crash: the force was sent when the task row shows FORCED_SUCCESS (read afresh)."""
    svc = service(ctx.deps)
    inst = locate(ctx.deps, call.args.instance_id, call.args.project)
    _, tasks = svc.client.current_tasks(svc.instance_projects[inst.id], inst.id)
    row = next((t for t in tasks if t.id == call.target.task.id), None)
    if row is None or row.state != "FORCED_SUCCESS":
        return None
    result = _result(ctx.deps, inst, call.target, goes_on=inst.state in GO_ON, user=ctx.user)
    if inst.state in GO_ON:
        result["note"] = (
            f"The run is still {inst.state}: `/rerun {inst.id}` goes on with the downstream tasks."
        )
    return result


def _reply(r: dict[str, Any], lang: Lang = "en") -> str:
    names = ", ".join(r["downstream"]) or "-"
    state = state_text(r["state"], lang)
    return say_md(FORCE, r["action"], lang, task=r["task"], workflow=r["workflow"], id=r["instance_id"],
                  state=state, names=names)  # fmt: skip


def _environment(call: Target, deps: Deps) -> str:
    return environment_of_instance(deps, call.target.instance, call.args.project)


FORCE_SUCCESS = ToolSpec(
    name="force_success",
    description="Mark a failed task of an ended DolphinScheduler run as FORCED_SUCCESS so the run goes on "
    "with its downstream tasks (or counts as SUCCESS when nothing is left). Use only when the user asks to "
    "skip or force that task.",
    args=ForceArgs,
    run=told(force, lambda call: f"task {call.args.task!r} of instance_id {call.args.instance_id}"),
    risk="write",
    environment_of=_environment,
    lookup=lookup,
    summarize=_reply,
    explain=_explain,
    precheck=_precheck,
    prepare=_read,
)
