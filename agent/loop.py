"""The function-calling loop: a task is replayed from its steps, then carried forward.

Turn n is step `llm:n` (the model's answer, stored whole); its i-th tool call is step `tool:n:i`.
Running a task = walking these keys in order, reusing every finished step from the store and doing
the first unfinished one for real. So `start()` and `resume()` are the same walk, and a restart,
a `/confirm` hours later or another replica all continue exactly where the task stopped.

A turn ends in a reply, tool calls, or a pause for confirmation. Turns, tool calls and invalid
calls are bounded; an exact repeat of a successful call is refused; a model mistake goes back to
the model; an upstream failure ends the task with a readable reply; our own bugs are raised.
A model turn is `xihe.agent.model_step`, a tool call `xihe.agent.tool_step`, the state they share
`xihe.agent.walk`, and what a finished walk says `xihe.agent.reply`.

Long tasks (set up by `xihe.agent.longtask.feature` through `Hooks`, all off by default): each request is built within
a token budget by priority (`xihe.agent.request`, `xihe.agent.context.build`, with `Block`s from the context providers);
a request the API rejects as too long is compacted once and retried, then the task stops; tool
timeouts are recovered by error class against the task's stored retry budget (`xihe.agent.recovery`);
`reminders` may add a note at the end of a request (e.g. open plan items nobody touched).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from xihe.agent.audit import AuditEvent
from xihe.agent.canonical import canonical_json
from xihe.agent.confirm import Pause
from xihe.agent.context import ContextTooLarge
from xihe.agent.deps import Deps
from xihe.agent.errors import BotError, LLMError, TaskStateError
from xihe.agent.executor import Executor, StepResult
from xihe.agent.gate import Who, identify
from xihe.agent.hooks import Hooks
from xihe.agent.i18n import Lang, Text, say, text
from xihe.agent.llm import LLMClient
from xihe.agent.model_failure import model_failed, what_stands
from xihe.agent.model_step import ContextOverflow, ModelSteps
from xihe.agent.registry import Registry
from xihe.agent.reply import command_reply, first_complaint, marked
from xihe.agent.request import Requests
from xihe.agent.tasks import COMMAND, QUERY, StepStatus, Task, TaskStatus
from xihe.agent.tool_step import ToolSteps
from xihe.agent.user_text import STOPS
from xihe.agent.walk import Walk, task_lang

_NOT_CANCELLED = tuple(s for s in TaskStatus if s != TaskStatus.CANCELLED)
log = logging.getLogger("xihe.loop")


@dataclass(frozen=True)
class Outcome:
    """How handling a message (or resuming a task) ended."""

    task_id: int
    status: TaskStatus | Literal["busy"]  # busy: another holder is working on the task
    reply: str
    pending_id: int | None = None


class Agent:
    """Handles messages as durable tasks."""

    def __init__(
        self, deps: Deps, registry: Registry, llm: LLMClient | None, hooks: Hooks | None = None
    ) -> None:
        self.deps = deps
        self.registry = registry
        self.llm = llm
        self.executor = Executor(deps)
        self.hooks = hooks = hooks or Hooks()
        self.requests = Requests(deps, registry, hooks, llm.profile.window if llm is not None else 8192)
        self.model_steps = ModelSteps(deps, registry, llm, self.requests)
        self.tool_steps = ToolSteps(deps, registry, self.executor, hooks)
        self.sleep: Callable[[float], None] = time.sleep  # back-off waits (tests pass a recorder)

    # ---- entry points
    def start(
        self, who: Who, conversation: str, text: str, *, channel: str = "cli", lang: Lang | None = None
    ) -> Outcome:
        """A new task for a free-text message; `lang`: the message's language, when already derived."""
        if self.llm is None:
            return self._no_model(who, conversation, text, channel)
        task = self._create("chat", who, conversation, text, channel)
        return self._drive(task, who, lang)

    def _no_model(self, who: Who, conversation: str, text: str, channel: str) -> Outcome:
        """Without a model only commands run: the message is a failed task (so later commands are
        answered in its language), and the reply names the command that does what it asks, if one does."""
        deps = self.deps
        lang = deps.lang(text, conversation)
        hint = next((c for c in (h(text) for h in self.hooks.command_hints) if c), None)
        reply = say(STOPS, "no_model_hint" if hint else "no_model", lang, command=hint)
        task = deps.tasks.create(
            kind="chat",
            owner=who.user,
            conversation=conversation,
            goal=text,
            now=deps.clock(),
            channel=channel,
            status=TaskStatus.FAILED,
        )
        deps.tasks.update(task.id, deps.clock(), reply=reply, error="no model is configured")
        return Outcome(task.id, TaskStatus.FAILED, reply)

    def start_command(
        self,
        who: Who,
        conversation: str,
        text: str,
        tool: str,
        args: dict[str, Any],
        *,
        channel: str = "cli",
        lang: Lang | None = None,
    ) -> Outcome:
        """A new task for an explicit command: one tool call, no model involved. A tool that only reads
        (`/status`) makes a `query` task, which `/tasks` does not list among the user's work."""
        spec = self.registry.specs.get(tool)
        reads = spec is not None and spec.risk == "read" and spec.risk_of is None
        task = self._create(QUERY if reads else COMMAND, who, conversation, text, channel)
        message = {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "cmd_0",
                    "type": "function",
                    "function": {"name": tool, "arguments": canonical_json(args)},
                }
            ],
        }
        self.deps.tasks.record(
            task.id,
            "llm:1",
            "command",
            StepStatus.DONE,
            self.deps.clock(),
            output_text=json.dumps({"message": message, "finish_reason": "tool_calls"}),
        )
        return self._drive(task, who, lang)

    def resume(self, task_id: int, *, take_over: bool = False, lang: Lang | None = None) -> Outcome:
        """Continue a task from its first unfinished step; `take_over` breaks a dead holder's lease;
        `lang`: the task's language (`lang(task)`) when the caller derived it already."""
        task = self.deps.tasks.get(task_id)
        if task.status in (TaskStatus.DONE, TaskStatus.CANCELLED):
            raise TaskStateError(f"task {task_id} is {task.status}; there is nothing to resume")
        now = self.deps.clock()
        if take_over and task.lease_owner and task.lease_owner != self.deps.holder:
            self.deps.tasks.release(task_id, task.lease_owner)
            self.deps.audit.record(
                AuditEvent(
                    at=now,
                    kind="task",
                    actor=self.deps.holder,
                    outcome="lease_taken",
                    task_id=task_id,
                    reason=f"lease of {task.lease_owner} broken",
                )
            )
        self.deps.tasks.update(task_id, now, status=TaskStatus.RUNNING, error=None)
        return self._drive(self.deps.tasks.get(task_id), lang=lang)

    def hold(self, task_id: int) -> bool:
        """Take the task's lease before changing what it waits for (a `/confirm`), so a crash right
        after the change leaves a lease that lapses and the orphan job finishes the task."""
        ttl = timedelta(seconds=self.deps.settings.core.store.lease_seconds)
        return self.deps.tasks.claim(task_id, self.deps.holder, self.deps.clock(), ttl)

    def resume_stalled(self, conversation: str) -> list[Outcome]:
        """Resume this conversation's confirmed tasks whose process died before running them."""
        deps = self.deps
        ttl = timedelta(seconds=deps.settings.core.store.lease_seconds)
        out = []
        for orphan in deps.tasks.orphans(deps.clock(), conversation=conversation):
            if orphan.status != TaskStatus.AWAITING_CONFIRMATION or not deps.tasks.take(
                orphan, deps.holder, deps.clock(), ttl
            ):
                continue
            try:
                outcome = self.resume(orphan.id)
            except TaskStateError:
                continue  # finished meanwhile
            except BotError as exc:  # this message is still handled; the orphan job tries again
                deps.tasks.release(orphan.id, deps.holder)
                log.warning("resuming task %s failed: %s", orphan.id, deps.redactor.text(str(exc)))
                continue
            if outcome.status != "busy":
                out.append(outcome)
        return out

    # ---- the walk
    def _create(self, kind: str, who: Who, conversation: str, text: str, channel: str) -> Task:
        now = self.deps.clock()
        ttl = timedelta(seconds=self.deps.settings.core.store.lease_seconds)
        return self.deps.tasks.create(
            kind=kind,
            owner=who.user,
            conversation=conversation,
            goal=text,
            now=now,
            channel=channel,
            lease_owner=self.deps.holder,
            lease_until=now + ttl,
            retry_budget=self.hooks.retry_budget,
        )

    def _drive(self, task: Task, who: Who | None = None, lang: Lang | None = None) -> Outcome:
        """Walk `task`; `who` and `lang` are its owner and language when the message that started it
        derived them already (else derived here, once for the walk)."""
        deps = self.deps
        lang = lang or self.lang(task)
        ttl = timedelta(seconds=deps.settings.core.store.lease_seconds)
        if not deps.tasks.claim(task.id, deps.holder, deps.clock(), ttl):
            return Outcome(task.id, "busy", say(STOPS, "busy", lang, task=task.id))
        try:
            who = who or identify(task.owner, deps.settings.access)
            outcome = self._walk(Walk(task, who, deps.tasks.latest(task.id), lang))
        except LLMError as exc:  # what the task's tools already did stands, and is said
            reply, error = model_failed(deps, self.registry, self.executor, task, exc, lang)
            outcome = self._finish(task, TaskStatus.FAILED, reply, error=error)
        except (ContextOverflow, ContextTooLarge) as exc:
            stands = what_stands(deps, self.registry, self.executor, task, lang)
            outcome = self._stop(task, lang, text(STOPS, "too_large", error=str(exc)), stands)
        finally:
            deps.tasks.release(task.id, deps.holder)
        if outcome.status == TaskStatus.AWAITING_CONFIRMATION and outcome.pending_id is not None:
            # told only now: a click on the card this sends may resume the task at once, and must find
            # this walk over (the lease is per replica, so another thread here could claim it meanwhile)
            for heard in self.hooks.pause_listeners:
                heard(task, outcome.pending_id)
        return outcome

    def _walk(self, run: Walk) -> Outcome:
        loop = self.deps.settings.core.loop
        messages = self.requests.opening(run.task)
        done_calls: dict[str, str] = {}  # args digest → step key, for refusing exact repeats
        last: tuple[str, StepResult] | None = None  # a command's one tool call and its result
        for turn in range(1, loop.max_turns + 1):
            if run.task.kind in (COMMAND, QUERY) and turn > 1:
                return self._finish(
                    run.task, TaskStatus.DONE, command_reply(self.deps, self.registry, last, run)
                )
            completion = self.model_steps.take(run, turn, messages)
            if self._cancelled(run.task):  # by its owner while the model thought (commands run beside)
                return self._as_cancelled(run.task)
            message, finish = completion["message"], completion["finish_reason"]
            messages.append(message)
            calls = message.get("tool_calls") or []
            if not calls:
                reply = message.get("content") or say(STOPS, "no_answer", run.lang)
                complaint = first_complaint(self.hooks, run.task, reply)
                if complaint is not None and not run.rechecked:
                    run.rechecked = True  # one chance to fix the answer, then it is marked
                    messages.append({"role": "user", "content": f"[Answer check] {complaint}"})
                    continue
                if complaint is not None:
                    reply = marked(self.hooks, run.task, reply)
                return self._finish(run.task, TaskStatus.DONE, reply)
            for i, tc in enumerate(calls):
                key = f"tool:{turn}:{i}"
                if i and self._cancelled(run.task):  # nothing more runs once it is cancelled
                    return self._as_cancelled(run.task)
                result = self.tool_steps.take(run, key, tc, finish, done_calls, sleep=self.sleep)
                if isinstance(result, Pause):
                    return Outcome(
                        run.task.id, TaskStatus.AWAITING_CONFIRMATION, result.ask, result.pending_id
                    )
                last = (tc["function"]["name"], result)
                messages.append(
                    {"role": "tool", "tool_call_id": tc["id"], "content": result.shown, "_step": key}
                )
                if run.recovery.stopped:
                    return self._stop(run.task, run.lang, run.recovery.stopped)
            if run.invalid > loop.max_arg_retries:
                reply = say(STOPS, "invalid_calls", run.lang, n=run.invalid, task=run.task.id)
                return self._finish(run.task, TaskStatus.FAILED, reply, error="too many invalid tool calls")
        reply = say(STOPS, "turns", run.lang, n=loop.max_turns, task=run.task.id)
        return self._finish(
            run.task, TaskStatus.FAILED, reply + self._notes(run.task), error="turn limit reached"
        )

    def _notes(self, task: Task) -> str:
        notes = [n for n in (note(task) for note in self.hooks.stop_notes) if n]
        return "".join(f"\n\n{n}" for n in notes)

    def _stop(self, task: Task, lang: Lang, reason: Text, stands: str = "") -> Outcome:
        """End an unfinished task with the reason (said in the task's language), what already happened
        and what is still open."""
        reply = say(STOPS, "stopped", lang, reason=reason, task=task.id)
        reply += f"\n{stands}" if stands else ""
        return self._finish(task, TaskStatus.FAILED, reply + self._notes(task), error=str(reason))

    def lang(self, task: Task) -> Lang:
        """The language people in this task's conversation write in (as agent.inbound.reply_lang)."""
        return task_lang(self.deps, task)

    def _cancelled(self, task: Task) -> bool:
        return self.deps.tasks.get(task.id).status == TaskStatus.CANCELLED

    def _as_cancelled(self, task: Task) -> Outcome:
        """The outcome of a walk whose task its owner cancelled meanwhile: the cancel's words stand."""
        return Outcome(task.id, TaskStatus.CANCELLED, self.deps.tasks.get(task.id).reply or "")

    def _finish(self, task: Task, status: TaskStatus, reply: str, *, error: str | None = None) -> Outcome:
        now = self.deps.clock()
        # never over a cancel that came while the walk ran (a command beside the model's turn)
        if not self.deps.tasks.update(
            task.id, now, expect=_NOT_CANCELLED, status=status, reply=reply, error=error
        ):
            return self._as_cancelled(task)
        self.deps.audit.record(
            AuditEvent(
                at=now,
                kind="task",
                actor=task.owner,
                outcome=status,
                task_id=task.id,
                intent=task.goal,
                reason=error,
                state_before=task.status,
                state_after=status,
            )
        )
        return Outcome(task.id, status, reply)
