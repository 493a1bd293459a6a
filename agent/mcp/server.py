"""xihe as an MCP server: the registry's tools for an authenticated user, through the chat's own path.

A `tools/call` is an explicit command of the user (`Session.run_tool`) in the conversation `mcp:<user>`
on the channel `mcp`: the same registry (schema validation), gate, confirmation, executor, caps,
artifacts and audit as chat. A read the gate allows answers at once; a refused call answers the gate's
reason; a write never runs on the MCP client's say-so: the call answers "waiting for confirmation"
with the pending action's id, its words and the link `/ui/pending/ID`, and runs only when the user
says `/confirm ID` in one of their chats (WeCom, `xihe chat`). The client polls `xihe_action_status`.

Tools are listed with annotations from their specs: readOnlyHint for reads, destructiveHint for
writes (idempotentHint: reads only). Every list and call is audited with kind `mcp`.

Each user may make `ui.yaml mcp_calls_per_minute` tool calls a minute on one replica (the chat channels'
per-user token bucket, agent/limits.py); past it a call answers "too many calls, try again in N s" and
is audited as `rate_limited`. `xihe_action_status` is not counted: polling one's own action is cheap.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from pydantic import BaseModel, Field

from xihe.agent import pending_view
from xihe.agent.audit import AuditEvent
from xihe.agent.canonical import canonical_json
from xihe.agent.gate import identify, visible
from xihe.agent.inbound import Inbound
from xihe.agent.limits import RateLimits
from xihe.agent.pending import mcp_conversation
from xihe.agent.tasks import StepStatus, TaskStatus
from xihe.config.ui import UI_SECTION, UiConfig

if TYPE_CHECKING:
    from xihe.agent.feature import Runtime
    from xihe.agent.pending import PendingAction
    from xihe.agent.registry import ToolSpec

STATUS_TOOL = "xihe_action_status"
CHANNEL = "mcp"


class StatusArgs(BaseModel):
    action_id: int = Field(description="the id a write answered with ('waiting for confirmation')", ge=1)


def hints(spec: ToolSpec) -> types.ToolAnnotations:
    """The hints an MCP client reads, from the spec's risk (a per-call risk counts as a write)."""
    reads = spec.risk == "read" and spec.risk_of is None
    return types.ToolAnnotations(read_only_hint=reads, destructive_hint=not reads, idempotent_hint=reads)


def text_result(
    text: str, data: dict[str, Any] | None = None, *, error: bool = False
) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=data, is_error=error
    )


class McpGateway:
    """The MCP face of one wired bot; every method is blocking (the transports run it in a thread)."""

    def __init__(self, app: Runtime) -> None:
        self.app = app
        self._limits: tuple[float, RateLimits] | None = None  # (per minute, its buckets)
        self._limits_lock = threading.Lock()

    def per_minute(self) -> float:
        """The configured calls per user per minute (ui.yaml; read at each call: a reload counts)."""
        cfg = self.app.deps.settings.get(UI_SECTION)
        return (cfg if isinstance(cfg, UiConfig) else UiConfig()).mcp_calls_per_minute

    def limited(self, user: str) -> int | None:
        """None when `user` may call now (counted); else the seconds until they may."""
        rate = self.per_minute()
        if rate <= 0:
            return None
        with self._limits_lock:
            if self._limits is None or self._limits[0] != rate:  # a new rate starts with full buckets
                self._limits = (rate, RateLimits(rate, 1e9, 1e9, self.app.deps.clock))
            limits = self._limits[1]
        hit = limits.check(user)
        return None if hit is None else hit[1]

    # ---- listing
    def tools_for(self, user: str) -> list[types.Tool]:
        """The tools this user may call (as /help shows them), plus the status tool."""
        deps = self.app.deps
        who = identify(user, deps.settings.access)
        out = []
        for name, spec in sorted(self.app.registry.specs.items()):
            envs = spec.environments or (("*",) if spec.environment_of else ())  # as /help asks
            if not visible(name, spec.risk, envs, who, deps.settings.access):
                continue
            schema = self.app.registry.schemas([name])[0]["function"]
            out.append(
                types.Tool(
                    name=name,
                    description=schema["description"],
                    input_schema=schema["parameters"],
                    annotations=hints(spec),
                )
            )
        out.append(
            types.Tool(
                name=STATUS_TOOL,
                description="Where an action that waits for your confirmation stands: waiting, confirmed, "
                "executed (with its result), rejected, cancelled or expired.",
                input_schema=_schema(StatusArgs),
                annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True),
            )
        )
        self._audit(user, "listed", detail={"tools": len(out)})
        return out

    # ---- calling
    def call(self, user: str, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """One tools/call by `user`."""
        if name == STATUS_TOOL:
            return self.status(user, arguments)
        wait = self.limited(user)
        if wait is not None:
            rate = self.per_minute()
            self._audit(user, "rate_limited", name, detail={"retry_after_seconds": wait, "per_minute": rate})
            text = (
                f"Too many calls: at most {rate:g} tool calls a minute per user (ui.yaml mcp_calls_per_minute). "
                f"{name} was not run; try again in {wait} s."
            )
            return text_result(text, {"status": "rate_limited", "retry_after_seconds": wait}, error=True)
        deps = self.app.deps
        who = identify(user, deps.settings.access)
        conversation = mcp_conversation(user)
        spec = self.app.registry.specs.get(name)
        secret = spec.secret_args if spec is not None else frozenset()
        shown = deps.redactor.data(arguments, secret)  # the goal is stored and audited: no secret argument
        intent = deps.redactor.text(f"mcp: {name} {canonical_json(shown)}")[:500]
        msg = Inbound(user, conversation, intent, channel=CHANNEL, lang="en")
        outcome = self.app.session.run_tool(who, msg, name, dict(arguments))
        if outcome.status == TaskStatus.AWAITING_CONFIRMATION and outcome.pending_id is not None:
            action = deps.pending.get(outcome.pending_id)
            if action is not None:
                self._audit(user, "awaiting_confirmation", name, outcome.task_id, {"pending_id": action.id})
                return self._waiting(action)
        step = deps.tasks.latest(outcome.task_id).get("tool:1:0")
        if step is None or step.status != StepStatus.DONE:
            reason = (step.error if step is not None else None) or outcome.reply
            # refused (the gate, invalid arguments, a precondition) or failed (the tool ran and failed)
            how = deps.tasks.get(outcome.task_id).outcome or "failed"
            self._audit(user, how, name, outcome.task_id, {"reason": reason[:500]})
            return text_result(reason, {"status": how, "task_id": outcome.task_id}, error=True)
        body = self.app.agent.executor.replay(step).body
        self._audit(user, "done", name, outcome.task_id)
        return text_result(body, {"status": "done", "task_id": outcome.task_id})

    def status(self, user: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """`xihe_action_status`: the caller's own action, in any state; its result once executed."""
        try:
            action_id = StatusArgs.model_validate(arguments).action_id
        except ValueError:
            return text_result("action_id must be a positive integer", error=True)
        deps = self.app.deps
        action = deps.pending.get(action_id)
        if action is None or action.user_id != user:
            self._audit(user, "status_unknown", STATUS_TOOL, detail={"pending_id": action_id})
            return text_result(f"No action {action_id} of yours.", error=True)
        data: dict[str, Any] = {"action_id": action.id, "status": action.status, "link": self.link(action.id)}
        words = self._words(action)
        lines = [f"Action {action.id} ({words}) is {action.status}."]
        if action.status == "executed":
            step = deps.tasks.latest(action.task_id).get(action.step_key)
            if step is not None and step.status in (StepStatus.DONE, StepStatus.FAILED):
                result = self.app.agent.executor.replay(step)
                data["result_ok"] = result.ok
                lines.append(result.body)
        elif action.status == "pending":
            lines.append(f"It waits for your `/confirm {action.id}` in chat.")
        elif action.status == "confirmed" and action.needs_approval and action.approved_by is None:
            lines.append("Confirmed; it waits for an approver's /approve.")
        elif action.closed_by:
            lines.append(f"By {action.closed_by}" + (f": {action.close_note}" if action.close_note else "."))
        self._audit(
            user, "status", STATUS_TOOL, action.task_id, {"pending_id": action.id, "state": action.status}
        )
        return text_result("\n".join(lines), data)

    def link(self, action_id: int) -> str:
        """The action's web page, relative to the server the client talks to (`xihe serve`)."""
        return f"/ui/pending/{action_id}"

    def _words(self, action: PendingAction) -> str:
        return pending_view.view(action, self.app.deps, self.app.registry).summary

    def _waiting(self, action: PendingAction) -> types.CallToolResult:
        words = self._words(action)
        link = self.link(action.id)
        approval = " and an approver's /approve" if action.needs_approval else ""
        text = (
            f"Waiting for confirmation: action {action.id}: {words}. Nothing runs until you confirm it in chat "
            f"with `/confirm {action.id}`{approval} (details: {link}). Ask `{STATUS_TOOL}` with action_id "
            f"{action.id} for its state."
        )
        data = {
            "status": "waiting_for_confirmation",
            "action_id": action.id,
            "words": words,
            "reason": action.reason,
            "link": link,
            "expires_at": action.expires_at.isoformat(),
        }
        return text_result(text, data)

    def _audit(
        self,
        user: str,
        outcome: str,
        tool: str | None = None,
        task_id: int | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        deps = self.app.deps
        deps.audit.record(
            AuditEvent(
                at=deps.clock(),
                kind="mcp",
                actor=user,
                outcome=outcome,
                task_id=task_id,
                tool=tool,
                detail={"channel": CHANNEL, **(detail or {})},
            )
        )

    def refused_login(self, client: str) -> None:
        """A request without a valid token (the token itself is never recorded)."""
        self._audit("-", "unauthorized", detail={"client": client})


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return json.loads(json.dumps(schema))


def mcp_server(gateway: McpGateway, user_of: Callable[[Any], str | None]) -> Server[Any]:
    """The SDK's low-level server over `gateway`; `user_of(ctx)` names the authenticated caller."""

    def caller(ctx: Any) -> str:
        user = user_of(ctx)
        if not user:
            raise PermissionError("not authenticated")
        return user

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        user = caller(ctx)
        return types.ListToolsResult(tools=await anyio.to_thread.run_sync(gateway.tools_for, user))

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        user = caller(ctx)
        args = dict(params.arguments or {})
        return await anyio.to_thread.run_sync(gateway.call, user, params.name, args)

    return Server("xihe", version="0.1.0", on_list_tools=list_tools, on_call_tool=call_tool)
