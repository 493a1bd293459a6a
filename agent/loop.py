"""The function-calling loop: a task is replayed from its steps, then carried forward.

Turn n is step `llm:n` (the model's answer, stored whole); its i-th tool call is step `tool:n:i`.
Running a task = walking these keys in order, reusing every finished step from the store and doing
the first unfinished one for real. So `start()` and `resume()` are the same walk, and a restart,
a `/confirm` hours later or another replica all continue exactly where the task stopped.

A turn ends in a reply, tool calls, or a pause for confirmation. Turns, tool calls and invalid
calls are bounded; an exact repeat of a successful call is refused; a model mistake goes back to
the model; an upstream failure ends the task with a readable reply; our own bugs are raised.

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
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from xihe.agent.audit import AuditEvent
from xihe.agent.canonical import canonical_json, sha256_text
from xihe.agent.confirm import CLOSED, Pause, Refusal, Release, audit_gate, settle
from xihe.agent.context import ContextTooLarge, labelled
from xihe.agent.deps import Deps
from xihe.agent.errors import BotError, LLMError, OutcomeUnknown, TaskStateError, ToolError, ToolRetry
from xihe.agent.executor import Executor, StepResult
from xihe.agent.frontier import (
    INTERRUPTED,
    Decision,
    confirmation_key,
    frontier,
    uncertain,
    when_unknown,
)
from xihe.agent.gate import Allow, Confirm, Deny, Who, decide, identify, interrupted
from xihe.agent.hooks import Hooks
from xihe.agent.i18n import Catalog, Lang, Text, say, text
from xihe.agent.llm import LLMClient
from xihe.agent.recovery import RunState, with_recovery
from xihe.agent.registry import ParsedCall, Registry
from xihe.agent.request import Requests
from xihe.agent.tasks import StepStatus, Task, TaskStatus, TaskStep
from xihe.agent.user_text import STOPS, for_people, outcome

log = logging.getLogger("xihe.loop")


@dataclass(frozen=True)
class Outcome:
    """How handling a message (or resuming a task) ended."""

    task_id: int
    status: TaskStatus | Literal["busy"]  # busy: another holder is working on the task
    reply: str
    pending_id: int | None = None


@dataclass
class _Run:
    task: Task
    who: Who
    latest: dict[str, TaskStep]
    tool_calls: int = 0
    invalid: int = 0
    rechecked: bool = False
    recovery: RunState = field(default_factory=RunState)
    refusal: str | None = None  # the gate's refusal as people read it (a command's reply)


class ContextOverflow(Exception):
    """The request does not fit the model even after compacting once."""


def too_long(exc: LLMError) -> bool:
    """The API refused the request for its length (HTTP 400 context_length_exceeded)."""
    return exc.status == 400 and "context_length_exceeded" in str(exc)


DENIED: Catalog = {"denied": {"en": "Refused: {reason}.", "zh": "已拒绝：{reason}。"}}

# a call that a person's or the gate's decision kept from running (not a tool that broke)
REFUSALS = frozenset({"denied", "precondition", *CLOSED})


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
        self.requests = Requests(deps, registry, hooks)
        self.sleep: Callable[[float], None] = time.sleep  # back-off waits (tests pass a recorder)

    # ---- entry points
    def start(self, who: Who, conversation: str, text: str, *, channel: str = "cli") -> Outcome:
        """A new task for a free-text message."""
        if self.llm is None:
            lang = self.deps.lang(text, conversation)
            return Outcome(0, TaskStatus.FAILED, say(STOPS, "no_model", lang))
        task = self._create("chat", who, conversation, text, channel)
        return self._drive(task)

    def start_command(
        self, who: Who, conversation: str, text: str, tool: str, args: dict[str, Any], *, channel: str = "cli"
    ) -> Outcome:
        """A new task for an explicit command: one tool call, no model involved."""
        task = self._create("command", who, conversation, text, channel)
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
        return self._drive(task)

    def resume(self, task_id: int, *, take_over: bool = False) -> Outcome:
        """Continue a task from its first unfinished step; `take_over` breaks a dead holder's lease."""
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
        return self._drive(self.deps.tasks.get(task_id))

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

    def resume_orphans(self) -> list[Outcome]:
        """Resume tasks left `running` by a process that died (its lease lapsed, or it is gone from this host)."""
        return [self.resume(t.id, take_over=True) for t in self.deps.tasks.orphans(self.deps.clock())]

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

    def _drive(self, task: Task) -> Outcome:
        deps = self.deps
        ttl = timedelta(seconds=deps.settings.core.store.lease_seconds)
        if not deps.tasks.claim(task.id, deps.holder, deps.clock(), ttl):
            return Outcome(task.id, "busy", say(STOPS, "busy", self.lang(task), task=task.id))
        try:
            outcome = self._walk(
                _Run(task, identify(task.owner, deps.settings.access), deps.tasks.latest(task.id))
            )
        except LLMError as exc:
            reply = say(
                STOPS, "llm_failed", self.lang(task), error=deps.redactor.text(str(exc)), task=task.id
            )
            outcome = self._finish(task, TaskStatus.FAILED, reply, error=str(exc))
        except (ContextOverflow, ContextTooLarge) as exc:
            outcome = self._stop(task, text(STOPS, "too_large", error=str(exc)))
        finally:
            deps.tasks.release(task.id, deps.holder)
        return outcome

    def _walk(self, run: _Run) -> Outcome:
        loop = self.deps.settings.core.loop
        messages = self.requests.opening(run.task)
        done_calls: dict[str, str] = {}  # args digest → step key, for refusing exact repeats
        last: tuple[str, StepResult] | None = None  # a command's one tool call and its result
        for turn in range(1, loop.max_turns + 1):
            if run.task.kind == "command" and turn > 1:
                return self._finish(run.task, TaskStatus.DONE, self._command_reply(last, run))
            completion = self._model_turn(run, turn, messages)
            message, finish = completion["message"], completion["finish_reason"]
            messages.append(message)
            calls = message.get("tool_calls") or []
            if not calls:
                reply = message.get("content") or say(STOPS, "no_answer", self.lang(run.task))
                complaint = self._complaint(run, reply)
                if complaint is not None and not run.rechecked:
                    run.rechecked = True  # one chance to fix the answer, then it is marked
                    messages.append({"role": "user", "content": f"[Answer check] {complaint}"})
                    continue
                if complaint is not None:
                    reply = self._mark(run, reply)
                return self._finish(run.task, TaskStatus.DONE, reply)
            for i, tc in enumerate(calls):
                key = f"tool:{turn}:{i}"
                result = self._tool_step(run, key, tc, finish, done_calls)
                if isinstance(result, Pause):
                    return Outcome(
                        run.task.id, TaskStatus.AWAITING_CONFIRMATION, result.ask, result.pending_id
                    )
                last = (tc["function"]["name"], result)
                messages.append(
                    {"role": "tool", "tool_call_id": tc["id"], "content": result.shown, "_step": key}
                )
                if run.recovery.stopped:
                    return self._stop(run.task, run.recovery.stopped)
            if run.invalid > loop.max_arg_retries:
                reply = say(STOPS, "invalid_calls", self.lang(run.task), n=run.invalid, task=run.task.id)
                return self._finish(run.task, TaskStatus.FAILED, reply, error="too many invalid tool calls")
        reply = say(STOPS, "turns", self.lang(run.task), n=loop.max_turns, task=run.task.id)
        return self._finish(
            run.task, TaskStatus.FAILED, reply + self._notes(run.task), error="turn limit reached"
        )

    def _notes(self, task: Task) -> str:
        notes = [n for n in (note(task) for note in self.hooks.stop_notes) if n]
        return "".join(f"\n\n{n}" for n in notes)

    def _stop(self, task: Task, reason: Text) -> Outcome:
        """End an unfinished task with the reason (said in the task's language) and what is still open."""
        reply = say(STOPS, "stopped", self.lang(task), reason=reason, task=task.id)
        return self._finish(task, TaskStatus.FAILED, reply + self._notes(task), error=str(reason))

    def _model_turn(self, run: _Run, turn: int, messages: list[dict[str, Any]]) -> dict[str, Any]:
        key = f"llm:{turn}"
        prior = run.latest.get(key)
        if prior is not None and prior.status == StepStatus.DONE:
            return json.loads(prior.output_text or "{}")
        assert self.llm is not None, "a chat task needs a model"
        deps = self.deps
        now = deps.clock()
        if prior is not None and prior.status == StepStatus.RUNNING:  # a model call has no side effect: rerun
            deps.tasks.finish_step(prior, StepStatus.FAILED, now, error=INTERRUPTED)
        begun = deps.tasks.begin_step(run.task.id, key, self.llm.cfg.model, now)
        api_messages: list[dict[str, Any]] = []
        try:
            api_messages = self.requests.build(run.task, messages)
            completion = self.llm.complete(api_messages, self.registry.schemas())
        except (LLMError, ContextTooLarge) as exc:
            deps.tasks.finish_step(begun, StepStatus.FAILED, deps.clock(), error=str(exc))
            if not isinstance(exc, LLMError) or not too_long(exc):
                raise
            # Compact once (a smaller share of the budget: fewer turns, results as previews), retry once.
            begun = deps.tasks.begin_step(run.task.id, key, self.llm.cfg.model, deps.clock())
            try:
                completion = self.llm.complete(
                    self.requests.build(run.task, messages, rejected=api_messages), self.registry.schemas()
                )
            except (LLMError, ContextTooLarge) as again:
                deps.tasks.finish_step(begun, StepStatus.FAILED, deps.clock(), error=str(again))
                if isinstance(again, LLMError) and too_long(again):
                    raise ContextOverflow(
                        "the model rejected it as too long, and again after compacting it once"
                    ) from None
                raise
        stored = json.dumps(
            {"message": completion.message, "finish_reason": completion.finish_reason}, ensure_ascii=False
        )
        deps.tasks.finish_step(begun, StepStatus.DONE, deps.clock(), output_text=stored)
        return {"message": completion.message, "finish_reason": completion.finish_reason}

    def _tool_step(
        self, run: _Run, key: str, tc: dict[str, Any], finish: str, done_calls: dict[str, str]
    ) -> StepResult | Pause:
        deps, loop = self.deps, self.deps.settings.core.loop
        name, raw = tc["function"]["name"], tc["function"].get("arguments")
        prior = run.latest.get(key)
        if prior is not None and (
            frontier(prior, superseded=self._superseded(run, prior), side_effecting=True, has_lookup=False)
            is Decision.REPLAY
        ):
            result = self.executor.replay(prior)
            if prior.status == StepStatus.DONE and prior.input_digest:
                done_calls[f"{prior.tool_name}:{prior.input_digest}"] = key
            run.tool_calls += 1
            return result
        if finish == "length":
            run.invalid += 1
            return self._refuse(
                run,
                key,
                name,
                "The response was cut off (output limit), so this tool call was not "
                "executed. Send the complete call again.",
                kind="truncated",
            )
        try:
            call = self.registry.parse(name, raw, max_bytes=loop.max_args_bytes)
        except ToolRetry as exc:
            run.invalid += 1
            return self._refuse(run, key, name, str(exc), kind="invalid_args", said=exc.text)
        run.tool_calls += 1
        if run.tool_calls > loop.max_tool_calls:
            return self._refuse(
                run,
                key,
                name,
                f"Not executed: the limit of {loop.max_tool_calls} tool calls for one "
                "message is reached. Answer with what you have.",
                kind="limit",
            )
        repeat_key = f"{name}:{sha256_text(canonical_json(call.data))}"
        if repeat_key in done_calls:
            return self._refuse(
                run,
                key,
                name,
                f"Refused: this exact call ({name} with the same arguments) already "
                f"succeeded at step {done_calls[repeat_key]}; use that result.",
                kind="repeat",
            )
        try:
            environment = call.spec.environment(call.args, deps)
        except ToolError as exc:  # it cannot say where it would act (e.g. an unknown workflow): nothing runs
            run.invalid += isinstance(exc, ToolRetry)
            said = outcome("ERROR", exc.text if exc.text is not None else str(exc))
            return self._refuse(run, key, name, f"ERROR: {exc}", kind="invalid_args", said=said)
        risk = call.spec.risk_for(call.args, deps)
        decision = decide(
            name, risk, environment, run.who, deps.settings.access, call.spec.scope(call.args, deps)
        )
        if isinstance(decision, Deny):
            audit_gate(deps, run.task, key, call, "deny", decision.reason, environment)
            lang = self.lang(run.task)
            run.refusal = say(DENIED, "denied", lang, reason=decision.text(lang))
            return self._refuse(run, key, name, f"DENIED: {decision.reason}.", kind="denied", audited=True)
        step = frontier(
            prior, superseded=False, side_effecting=risk == "write", has_lookup=call.spec.lookup is not None
        )
        why = "the process stopped while it ran, and there is no way to look up whether it took effect"
        if step is Decision.LOOK_UP and prior is not None:
            prior = self.executor.interrupted(prior)
            try:
                found = self.executor.look_up(
                    run.task, key, call, intent=run.task.goal, reason=decision.reason
                )
            except OutcomeUnknown as exc:
                step = when_unknown(side_effecting=risk == "write")
                why = f"the process stopped while it ran, and looking it up could not tell: {exc}"
            else:
                if found is not None:  # the effect happened before the crash: that is the result
                    done_calls[repeat_key] = key
                    return found
        if step is Decision.UNCERTAIN and prior is not None:
            if not uncertain(prior):
                prior = self.executor.uncertain(run.task, key, call, prior, why)
            if not isinstance(decision, Confirm):  # only a fresh yes runs it again
                decision = interrupted(name)
            settled = settle(
                deps,
                run.task,
                key,
                call,
                decision,
                environment,
                self.lang(run.task),
                bound=confirmation_key(key, prior),
                unsure=prior.error,
            )
        elif isinstance(decision, Confirm):
            bound = confirmation_key(key, prior)
            if call.spec.precheck is not None and deps.pending.for_step(run.task.id, bound) is None:
                try:  # a call that cannot succeed is refused now, not after the user's yes
                    why_not = call.spec.precheck(call.args, deps)
                except ToolError:
                    why_not = None  # cannot tell now: the tool itself will say after the yes
                if why_not:
                    said = outcome("NOT EXECUTED", why_not)
                    return self._refuse(
                        run, key, name, f"NOT EXECUTED: {why_not}", kind="precondition", said=said
                    )
            settled = settle(
                deps, run.task, key, call, decision, environment, self.lang(run.task), bound=bound
            )
        else:
            settled = Release()
        if isinstance(settled, Refusal):
            return self._refuse(run, key, name, settled.message, kind=settled.kind, said=settled.said)
        if isinstance(settled, Pause):
            return settled
        if isinstance(decision, Allow):
            deps.metrics.gate.labels("allow").inc()
        for listen in self.hooks.step_listeners:  # progress messages
            listen(run.task, key, name)
        if self.hooks.recovery is not None:
            call = ParsedCall(
                with_recovery(call.spec, self.hooks.recovery, run.recovery, sleep=self.sleep),
                call.args,
                call.data,
            )
        result = self.executor.run(
            run.task, key, call, intent=run.task.goal, reason=decision.reason, latest=prior
        )
        if result.ok:
            done_calls[repeat_key] = key
        return result

    def _superseded(self, run: _Run, step: TaskStep) -> bool:
        """A failed step the task already moved past (its failure is history, not a frontier)."""
        return any(s.id > step.id for k, s in run.latest.items() if k != step.step_key)

    def _refuse(
        self,
        run: _Run,
        key: str,
        name: str,
        message: str,
        *,
        kind: str,
        audited: bool = False,
        said: Text | None = None,
    ) -> StepResult:
        now = self.deps.clock()
        self.deps.metrics.tool_calls.labels(name, kind).inc()
        shown = labelled(name, message)
        audit = (
            None
            if audited
            else AuditEvent(
                at=now,
                kind="tool_call",
                actor=run.task.owner,
                outcome=kind,
                task_id=run.task.id,
                step_key=key,
                tool=name,
                reason=message,
            )
        )
        self.deps.tasks.record(
            run.task.id,
            key,
            name,
            StepStatus.FAILED,
            now,
            output_text=shown,
            error=message,
            audit=audit,
            outcome="refused" if kind in REFUSALS else "failed",
        )
        return StepResult(shown, ok=False, body=message, error=message, said=said)

    def _command_reply(self, last: tuple[str, StepResult] | None, run: _Run) -> str:
        """A command's one result for people: the gate's refusal, the tool's summary of a success, else
        the result's text."""
        if run.refusal is not None:
            return run.refusal
        if last is None:
            return say(STOPS, "no_answer", self.lang(run.task))
        tool, result = last
        spec = self.registry.specs.get(tool)
        if result.ok and spec is not None and spec.summarize is not None:
            try:  # a JSON result as data; a text result (e.g. a shell run's) as it is
                data = json.loads(result.body)
            except ValueError:
                data = result.body
            try:
                return spec.summarize(data, self.lang(run.task))
            except (ValueError, TypeError, KeyError):
                pass
        lang = self.lang(run.task)
        if not result.ok and result.said is not None:  # the failure from its catalog, in their language
            return for_people(self.deps.redactor.text(result.said.in_(lang)), lang)
        return for_people(result.body, lang)

    def lang(self, task: Task) -> Lang:
        """The language people in this task's conversation write in (as agent.session.reply_lang)."""
        return self.deps.lang(task.goal, task.conversation)

    def _complaint(self, run: _Run, reply: str) -> str | None:
        for check in self.hooks.reply_checks:
            complaint = check.complaint(run.task, reply)
            if complaint:
                return complaint
        return None

    def _mark(self, run: _Run, reply: str) -> str:
        for check in self.hooks.reply_checks:
            if check.complaint(run.task, reply):
                reply = check.mark(run.task, reply)
        return reply

    def _finish(self, task: Task, status: TaskStatus, reply: str, *, error: str | None = None) -> Outcome:
        now = self.deps.clock()
        self.deps.tasks.update(task.id, now, status=status, reply=reply, error=error)
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
