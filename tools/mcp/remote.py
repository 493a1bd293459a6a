"""Another MCP server's tools as xihe tools: what mcp.yaml decides for each, and the ToolSpecs of the
allowed ones.

A listed tool is refused (with its reason) when its input schema is not a valid JSON Schema object
schema or is larger than the server's `max_schema_bytes`; the others become `ToolSpec`s named
`mcp_<server>_<tool>` whose risk, roles and environments come from mcp.yaml only (the server's own
annotations are shown, never used). Their arguments are validated against the server's schema before
anything is sent; their results go through the executor like any tool's (capped, stored as artifacts).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from xihe.agent.errors import ToolFailed
from xihe.agent.gate import Scope
from xihe.agent.registry import ToolContext, ToolSpec
from xihe.config.mcp import McpServer, registry_name
from xihe.integrations.mcp.client import McpClient, McpError, McpUnavailable, RemoteTool

DESCRIPTION_CHARS = 1024  # what the model reads of another server's description


@dataclass(frozen=True)
class Verdict:
    """What xihe does with one tool a server lists (or mcp.yaml names): `use` = it joins the registry."""

    server: str
    tool: str
    registry_name: str
    use: bool
    decision: str  # e.g. "allowed: read", "not listed in mcp.yaml", "refused: schema ..."
    hints: dict[str, Any]


def schema_problem(schema: Any, max_bytes: int) -> str | None:
    """Why an input schema cannot be used (None: it can)."""
    size = len(json.dumps(schema, ensure_ascii=False).encode())
    if size > max_bytes:
        return f"input schema is {size:,} bytes, over max_schema_bytes {max_bytes:,}"
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return 'input schema must be a JSON Schema with "type": "object"'
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        return f"input schema is not valid JSON Schema at {where}: {exc.message[:200]}"
    return None


def verdicts(server: McpServer, listed: list[RemoteTool]) -> list[Verdict]:
    """mcp.yaml's decision for every listed tool, then for the listed names the server does not have."""
    out = []
    for tool in listed:
        name = registry_name(server.name, tool.name)
        entry = server.tool(tool.name)
        if entry is None:
            decision, use = "refused: not listed in mcp.yaml", False
        elif not entry.allowed:
            decision, use = "refused: allowed: false in mcp.yaml", False
        else:
            problem = schema_problem(tool.input_schema, server.max_schema_bytes)
            decision = f"refused: {problem}" if problem else f"allowed: {entry.risk}"
            use = problem is None
        out.append(Verdict(server.name, tool.name, name, use, decision, tool.annotations))
    have = {t.name for t in listed}
    for entry in server.tools:
        if entry.name not in have:
            name = registry_name(server.name, entry.name)
            out.append(
                Verdict(server.name, entry.name, name, False, "missing: the server does not list it", {})
            )
    return out


def args_model(name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """A pydantic model that validates a call's arguments against the server's JSON Schema and whose
    `model_json_schema()` is that schema (what the model is shown)."""
    validator = Draft202012Validator(schema)

    class RemoteArgs(BaseModel):
        model_config = ConfigDict(extra="allow")
        remote_schema: ClassVar[dict[str, Any]] = schema

        @model_validator(mode="before")
        @classmethod
        def _check(cls, data: Any) -> Any:
            problems = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
            if problems:
                raise ValidationError.from_exception_data(
                    name,
                    [
                        InitErrorDetails(
                            type=PydanticCustomError("remote_schema", "{msg}", {"msg": p.message[:200]}),
                            loc=tuple(p.absolute_path),
                            input=p.instance,
                        )
                        for p in problems[:10]
                    ],
                )
            return data

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return json.loads(json.dumps(schema))

    RemoteArgs.__name__ = RemoteArgs.__qualname__ = f"{name}_args"
    return RemoteArgs


def spec_for(server: McpServer, tool: RemoteTool, client: Callable[[], McpClient]) -> ToolSpec:
    """The ToolSpec of an allowed tool (call `verdicts` first: only those with `use`)."""
    entry = server.tool(tool.name)
    if entry is None or not entry.allowed:
        raise ValueError(f"{tool.name} is not allowed in mcp.yaml")
    name = registry_name(server.name, tool.name)
    remote_name = tool.name

    def run(args: BaseModel, ctx: ToolContext) -> str:
        try:
            result = client().call_tool(remote_name, args.model_dump(mode="json"))
        except McpUnavailable as exc:
            maybe = " A write may or may not have taken effect." if entry.risk == "write" else ""
            raise ToolFailed(f"{exc}.{maybe}") from None
        except McpError as exc:
            raise ToolFailed(str(exc)) from None
        if result.is_error:
            raise ToolFailed(f"MCP server {server.name} answered with an error: {result.text[:2000]}")
        return result.text

    scope = Scope(f"mcp {server.name}/{tool.name}", tuple(entry.roles), tuple(entry.environments))
    if not entry.roles and not entry.environments:
        scope_of = None
    else:

        def scope_of(_args: Any, _deps: Any) -> Scope:
            return scope

    summary = (tool.description or f"Tool {tool.name} of MCP server {server.name}.")[:DESCRIPTION_CHARS]
    return ToolSpec(
        name=name,
        description=f"[MCP {server.name}] {summary}",
        args=args_model(name, tool.input_schema),
        run=run,
        risk=entry.risk,
        environments=(server.environment,) if server.environment else (),
        scope_of=scope_of,
    )
