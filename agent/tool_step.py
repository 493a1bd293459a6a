"""The i-th tool call of turn n as the step `tool:n:i`: replayed, refused, paused for a confirmation, or run.

A finished step is replayed. A new call is bounded (a cut-off answer, invalid arguments, the tool-call
limit, an exact repeat of a success are refused back to the model), then the gate decides: denied,
allowed, or confirmed by a person first (`xihe.agent.confirm`). The call's target is read once per
walk (`ToolSpec.prepare`): once before the prompt, once afresh after the yes; the tool's precheck
refuses a call that cannot succeed on that read, before asking and again right before it runs.
A write a crash interrupted is looked up before it runs again, and one that cannot be looked up is
uncertain: only a fresh yes reruns it (`xihe.agent.frontier`). Tool timeouts are recovered against
the task's retry budget (`xihe.agent.recovery`) when the long-task hooks set that up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from xihe.agent.audit import AuditEvent
from xihe.agent.canonical import canonical_json, sha256_text
from xihe.agent.confirm import CLOSED, Pause, Refusal, Release, audit_gate, settle
from xihe.agent.context import labelled
from xihe.agent.deps import Deps
from xihe.agent.errors import OutcomeUnknown, ToolError, ToolRetry
from xihe.agent.executor import Executor, StepResult
from xihe.agent.frontier import Decision, confirmation_key, frontier, uncertain, when_unknown
from xihe.agent.gate import Allow, Confirm, Deny, decide, interrupted
from xihe.agent.hooks import Hooks
from xihe.agent.i18n import Catalog, Text, say
from xihe.agent.recovery import with_recovery
from xihe.agent.registry import ParsedCall, Registry
from xihe.agent.tasks import StepStatus, TaskStep
from xihe.agent.tool_schemas import LOAD_TOOLS, load_request
from xihe.agent.user_text import outcome
from xihe.agent.walk import Walk

DENIED: Catalog = {"denied": {"en": "Refused: {reason}.", "zh": "已拒绝：{reason}。"}}

# a call that a person's or the gate's decision kept from running (not a tool that broke)
REFUSALS = frozenset({"denied", "precondition", *CLOSED})


class ToolSteps:
    """Takes the tool calls of a walk, each as one durable step."""

    def __init__(self, deps: Deps, registry: Registry, executor: Executor, hooks: Hooks) -> None:
        self.deps = deps
        self.registry = registry
        self.executor = executor
        self.hooks = hooks

    def take(
        self,
        run: Walk,
        key: str,
        tc: dict[str, Any],
        finish: str,
        done_calls: dict[str, str],
        *,
        sleep: Callable[[float], None],
    ) -> StepResult | Pause:
        """The call's result (replayed, refused or run), or the pause that asks a person first.

        `done_calls` maps the arguments digest of each successful call to its step key (exact repeats
        are refused); `sleep` waits out a recovery's back-off.
        """
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
        if name == LOAD_TOOLS and name not in self.registry:
            return self._load(run, key, raw)
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
        try:  # its target is read once here (`ToolSpec.prepare`): before the prompt, and fresh after the yes
            call = call.prepare(deps)
            environment = call.spec.environment(call.subject, deps)
        except ToolError as exc:  # it cannot say where it would act (e.g. an unknown workflow): nothing runs
            run.invalid += isinstance(exc, ToolRetry)
            said = outcome("ERROR", exc.text if exc.text is not None else str(exc))
            return self._refuse(run, key, name, f"ERROR: {exc}", kind="invalid_args", said=said)
        risk = call.spec.risk_for(call.subject, deps)
        decision = decide(
            name, risk, environment, run.who, deps.settings.access, call.spec.scope(call.subject, deps)
        )
        if isinstance(decision, Deny):
            audit_gate(deps, run.task, key, call, "deny", decision.reason, environment)
            run.refusal = say(DENIED, "denied", run.lang, reason=decision.text(run.lang))
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
                run.lang,
                bound=confirmation_key(key, prior),
                unsure=prior.error,
            )
        elif isinstance(decision, Confirm):
            bound = confirmation_key(key, prior)
            if call.spec.precheck is not None and deps.pending.for_step(run.task.id, bound) is None:
                refused = self._precheck(run, key, call)  # refused now, not after the user's yes
                if refused is not None:
                    return refused
            settled = settle(deps, run.task, key, call, decision, environment, run.lang, bound=bound)
        else:
            settled = Release()
        if isinstance(settled, Refusal):
            return self._refuse(run, key, name, settled.message, kind=settled.kind, said=settled.said)
        if isinstance(settled, Pause):  # the walk's caller tells the pause listeners, once the lease is free
            return settled
        refused = self._precheck(run, key, call)  # again on this walk's read: it may have changed meanwhile
        if refused is not None:
            return refused
        if isinstance(decision, Allow):
            deps.metrics.gate.labels("allow").inc()
        for listen in self.hooks.step_listeners:  # progress messages
            listen(run.task, key, name)
        if self.hooks.recovery is not None:
            call = replace(
                call, spec=with_recovery(call.spec, self.hooks.recovery, run.recovery, sleep=sleep)
            )
        result = self.executor.run(
            run.task, key, call, intent=run.task.goal, reason=decision.reason, latest=prior
        )
        if result.ok:
            done_calls[repeat_key] = key
        return result

    def _precheck(self, run: Walk, key: str, call: ParsedCall) -> StepResult | None:
        """The refusal of a call its tool says cannot succeed right now (`ToolSpec.precheck`), or None."""
        if call.spec.precheck is None:
            return None
        try:
            why_not = call.spec.precheck(call.subject, self.deps)
        except ToolError:
            return None  # cannot tell now: the tool itself will say when it runs
        if not why_not:
            return None
        said = outcome("NOT EXECUTED", why_not)
        message = f"NOT EXECUTED: {why_not}"
        return self._refuse(run, key, call.spec.name, message, kind="precondition", said=said)

    def _superseded(self, run: Walk, step: TaskStep) -> bool:
        """A failed step the task already moved past (its failure is history, not a frontier)."""
        return any(s.id > step.id for k, s in run.latest.items() if k != step.step_key)

    def _load(self, run: Walk, key: str, raw: str | None) -> StepResult:
        """A `load_tools` call (agent/tool_schemas.py): the next request carries the named tools. A
        durable step like any other, so a resumed task carries them again; it touches nothing."""
        asked = load_request(raw)
        known = [n for n in asked if n in self.registry]
        unknown = [n for n in asked if n not in self.registry]
        if not known:
            return self._refuse(
                run,
                key,
                LOAD_TOOLS,
                f"Nothing loaded: name tools from the list ({', '.join(unknown) or 'none given'}).",
                kind="invalid_args",
            )
        body = f"Loaded {', '.join(known)}: call them now." + (
            f" Unknown: {', '.join(unknown)}." if unknown else ""
        )
        self._record(
            run,
            key,
            LOAD_TOOLS,
            "ok",
            body,
            status=StepStatus.DONE,
            output_text=body,
            input_preview=(raw or "")[:200],
            outcome="ok",
        )
        return StepResult(labelled(LOAD_TOOLS, body), ok=True, body=body)

    def _refuse(
        self,
        run: Walk,
        key: str,
        name: str,
        message: str,
        *,
        kind: str,
        audited: bool = False,
        said: Text | None = None,
    ) -> StepResult:
        shown = labelled(name, message)
        self._record(
            run,
            key,
            name,
            kind,
            message,
            status=StepStatus.FAILED,
            output_text=shown,
            error=message,
            audited=audited,
            outcome="refused" if kind in REFUSALS else "failed",
        )
        return StepResult(shown, ok=False, body=message, error=message, said=said)

    def _record(
        self,
        run: Walk,
        key: str,
        name: str,
        kind: str,
        message: str,
        *,
        status: StepStatus,
        output_text: str,
        outcome: str,
        error: str | None = None,
        audited: bool = False,
        input_preview: str | None = None,
    ) -> None:
        """A step that ran no tool (refused, or handled here): counted, recorded, audited unless it was."""
        now = self.deps.clock()
        self.deps.metrics.tool_calls.labels(name, kind).inc()
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
            status,
            now,
            input_preview=input_preview,
            output_text=output_text,
            error=error,
            audit=audit,
            outcome=outcome,
        )
