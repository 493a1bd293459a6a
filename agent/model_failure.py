"""What a task says when its model fails: what already happened, what is still followed, what next.

A model that fails mid-task (an HTTP error, a timeout, a request that never fits) undoes nothing the
task's tools already did. So the reply and the task say it: each write that went through, in the
tool's own words ("Started order_sync … run 102. I'll tell you here when it ends": the run is still
followed), and a next step only where one can work: resuming after a temporary failure
(`xihe task resume N` at the terminal, `/resume N` in chat), never after a refusal that the same
request would meet again.
"""

from __future__ import annotations

from xihe.agent.deps import Deps
from xihe.agent.errors import LLMError
from xihe.agent.executor import Executor
from xihe.agent.i18n import Catalog, Lang, say, say_md
from xihe.agent.registry import Registry
from xihe.agent.reply import result_for_people
from xihe.agent.tasks import StepStatus, Task

LOST: Catalog = {
    "failed": {"en": "The model endpoint failed ({error}).", "zh": "模型接口出错（{error}）。"},
    "lost": {
        "en": "I lost the model mid-answer ({error}), but what I had already done stands.",
        "zh": "模型在回答中途出错了（{error}），但我已经做完的事不受影响。",
    },
    "happened": {"en": "What already happened:", "zh": "已经发生的："},
    "resume_cli": {
        "en": "Task {task} is saved; `xihe task resume {task}` continues it.",
        "zh": "任务 {task} 已保存；`xihe task resume {task}` 可以继续它。",
    },
    "resume_chat": {
        "en": "Task {task} is saved; send `/resume {task}` and I'll continue it.",
        "zh": "任务 {task} 已保存；发送 `/resume {task}`，我会接着做。",
    },
    "refused": {
        "en": "The model server refused this request itself, so sending it again would fail the same way. "
        "Task {task} keeps what was done ({show}).",
        "zh": "模型服务拒绝了这个请求本身，原样重发也会同样失败。任务 {task} 保留了已经做完的部分（{show}）。",
    },
    "setup": {
        "en": "The model endpoint turns xihe away (HTTP {status}): its address, model name or key needs "
        "fixing by whoever runs xihe. Task {task} keeps what was done ({show}).",
        "zh": "模型接口拒绝了 xihe（HTTP {status}）：需要由维护 xihe 的人修正它的地址、模型名或密钥。"
        "任务 {task} 保留了已经做完的部分（{show}）。",
    },
}


def at_terminal(task: Task) -> bool:
    """Whether the task came from the terminal (`xihe chat`), where server commands are the next step."""
    return task.channel == "cli"


def happened(deps: Deps, registry: Registry, executor: Executor, task: Task, lang: Lang) -> list[str]:
    """Each write of the task that went through, in the tool's own words for people."""
    steps = sorted(deps.tasks.latest(task.id).values(), key=lambda s: s.id)
    out = []
    for step in steps:
        spec = registry.specs.get(step.tool_name)
        if (
            step.step_key.startswith("tool:")
            and step.status == StepStatus.DONE
            and spec
            and spec.risk == "write"
        ):
            result = executor.replay(step)
            out.append(result_for_people(deps, registry, step.tool_name, result, lang))
    return out


def what_stands(deps: Deps, registry: Registry, executor: Executor, task: Task, lang: Lang) -> str:
    """The writes that went through, or "" when nothing happened. Each is said by its tool, which
    knows what it still follows (a DolphinScheduler run: "I'll tell you here when it ends")."""
    done = happened(deps, registry, executor, task, lang)
    return "\n".join([say(LOST, "happened", lang), *(f"- {d}" for d in done)]) if done else ""


def next_step(task: Task, exc: LLMError, lang: Lang) -> str:
    """What can be done now: resume after a temporary failure; else say why resuming would not help."""
    if exc.retryable:
        return say(LOST, "resume_cli" if at_terminal(task) else "resume_chat", lang, task=task.id)
    show = f"`xihe task show {task.id}`" if at_terminal(task) else f"/task {task.id}"
    if exc.status == 400:
        return say(LOST, "refused", lang, task=task.id, show=show)
    return say(LOST, "setup", lang, status=exc.status or "?", task=task.id, show=show)


def model_failed(
    deps: Deps, registry: Registry, executor: Executor, task: Task, exc: LLMError, lang: Lang
) -> tuple[str, str]:
    """(the reply for people, the task's error) when the model endpoint failed."""
    error = deps.redactor.text(str(exc))
    stands = what_stands(deps, registry, executor, task, lang)
    head = say_md(LOST, "lost" if stands else "failed", lang, error=error)  # the server's words: outside text
    reply = (
        "\n".join([head, stands, next_step(task, exc, lang)])
        if stands
        else f"{head} {next_step(task, exc, lang)}"
    )
    return reply, str(exc) + ("; writes had already gone through (see the task's steps)" if stands else "")
