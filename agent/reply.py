"""What a finished walk says: a command's one result for people, and the checks on a model's answer.

A final answer each `ReplyCheck` (`xihe.agent.hooks`) complains about goes back to the model once
(`first_complaint`); if it still complains, the answer is marked (`marked`).
"""

from __future__ import annotations

import json

from xihe.agent.deps import Deps
from xihe.agent.executor import StepResult
from xihe.agent.hooks import Hooks
from xihe.agent.i18n import Lang, said_md, say
from xihe.agent.registry import Registry
from xihe.agent.tasks import Task
from xihe.agent.user_text import STOPS, for_people
from xihe.agent.walk import Walk
from xihe.agent.wecom_markdown import block


def command_reply(deps: Deps, registry: Registry, last: tuple[str, StepResult] | None, run: Walk) -> str:
    """A command's one result for people: the gate's refusal, the tool's summary of a success, else
    the result's text."""
    if run.refusal is not None:
        return run.refusal
    if last is None:
        return say(STOPS, "no_answer", run.lang)
    return result_for_people(deps, registry, *last, run.lang)


def result_for_people(deps: Deps, registry: Registry, tool: str, result: StepResult, lang: Lang) -> str:
    """One tool result as people read it: the tool's own summary of a success, the failure from its
    catalog, else the result's text without the instructions meant for the model."""
    spec = registry.specs.get(tool)
    if result.ok and spec is not None and spec.summarize is not None:
        try:  # a JSON result as data; a text result (e.g. a shell run's) as it is
            data = json.loads(result.body)
        except ValueError:
            data = result.body
        try:
            return spec.summarize(data, lang)
        except (ValueError, TypeError, KeyError):
            pass
    # a result's own text (an outside service's error, a tool's output) is outside text
    if not result.ok and result.said is not None:  # the failure from its catalog, in their language
        return for_people(deps.redactor.text(said_md(result.said, lang)), lang)
    return block(for_people(result.body, lang))


def first_complaint(hooks: Hooks, task: Task, reply: str) -> str | None:
    """The first complaint of the reply checks about this answer, if any."""
    for check in hooks.reply_checks:
        said = check.complaint(task, reply)
        if said:
            return said
    return None


def marked(hooks: Hooks, task: Task, reply: str) -> str:
    """The answer with the mark of every check that still complains about it."""
    for check in hooks.reply_checks:
        if check.complaint(task, reply):
            reply = check.mark(task, reply)
    return reply
