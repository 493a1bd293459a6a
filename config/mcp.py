"""`config/mcp.yaml`: the MCP servers whose tools xihe may call, and what each tool may do.

Deny by default: a server's tool joins the registry only when it is listed here with `allowed: true`
and a `risk` (read or write) the admin decided; what the other server says about its tools
(annotations such as readOnlyHint) is never trusted for that decision. `roles` and `environments`
narrow a tool further, like a shell entry's (`xihe.agent.gate.Scope`); the roles of access.yaml must
still grant the tool's registry name (`mcp_<server>_<tool>`, e.g. `mcp_*` or `mcp_prom_*`).

No mcp.yaml: no MCP client at all. Secrets never live here: `token_env` names the environment variable
of an HTTP server's bearer token, `env[].value_env` the variables handed to a stdio server.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from xihe.config.semantic import unknown_name
from xihe.config.settings import Problem, Section, Settings

SERVER_NAME = re.compile(r"^[a-z][a-z0-9]{0,19}$")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what an OpenAI-compatible function name allows
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PREFIX = "mcp_"  # registry names: mcp_<server>_<tool>


def registry_name(server: str, tool: str) -> str:
    """The name a server's tool has in xihe's registry (and in access.yaml grants)."""
    return f"{PREFIX}{server}_{tool}"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class McpTool(_Strict):
    """One tool of the server and what xihe decides for it."""

    name: str = Field(description="the tool's name on the MCP server, e.g. query_metrics")
    allowed: bool = Field(False, description="true: the tool joins the registry; false: listed, refused")
    risk: Literal["read", "write"] = Field(
        description="read: runs when a role grants it; write: waits for the requester's /confirm"
    )
    roles: list[str] = Field(default_factory=list, description="the caller also needs one of these roles")
    environments: list[str] = Field(
        default_factory=list, description="the call is enabled only when the server acts on one of these"
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not TOOL_NAME.match(v):
            raise ValueError("a tool name is 1-64 letters, digits, '_' or '-'")
        return v


class ChildEnv(_Strict):
    """An environment variable handed to a stdio server, its value read from xihe's environment."""

    name: str = Field(description="the variable's name in the server's process, e.g. KUBECONFIG")
    value_env: str = Field(description="xihe's environment variable that holds the value")

    @field_validator("name", "value_env")
    @classmethod
    def _env(cls, v: str) -> str:
        if not ENV_NAME.match(v):
            raise ValueError("not an environment variable name")
        return v


class McpServer(_Strict):
    """One MCP server: how to reach it and which of its tools xihe may use."""

    name: str = Field(description="short lowercase name, part of the registry names, e.g. prom")
    transport: Literal["stdio", "http"] = Field(description="stdio: xihe starts it; http: Streamable HTTP")
    command: list[str] = Field(default_factory=list, description="stdio: the program and its arguments")
    env: list[ChildEnv] = Field(default_factory=list, description="stdio: variables for the program")
    url: str = Field("", description="http: the endpoint, e.g. http://127.0.0.1:9000/mcp")
    token_env: str = Field("", description="http: variable holding a bearer token (optional)")
    environment: str = Field("", description="the access.yaml environment its tools act on ('' = none)")
    timeout_seconds: float = Field(30, gt=0, le=600, description="one tool call at most")
    list_timeout_seconds: float = Field(
        10, gt=0, le=120, description="listing the tools when xihe starts, at most (a slow server waits)"
    )
    max_schema_bytes: int = Field(
        16384, ge=256, le=262144, description="a tool's input schema larger than this is refused"
    )
    tools: list[McpTool] = Field(default_factory=list, description="the only tools that may be used")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not SERVER_NAME.match(v):
            raise ValueError("a server name is 1-20 lowercase letters and digits, starting with a letter")
        return v

    @model_validator(mode="after")
    def _reach(self) -> McpServer:
        if self.transport == "stdio" and not self.command:
            raise ValueError("transport stdio needs command: [program, args...]")
        if self.transport == "http" and not self.url:
            raise ValueError("transport http needs url: http(s)://host:port/path")
        if self.transport == "stdio" and (self.url or self.token_env):
            raise ValueError("url and token_env are for transport http")
        if self.transport == "http" and (self.command or self.env):
            raise ValueError("command and env are for transport stdio")
        names = [t.name for t in self.tools]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"tools listed twice: {', '.join(twice)}")
        long = [t.name for t in self.tools if len(registry_name(self.name, t.name)) > 64]
        if long:
            raise ValueError(f"registry name over 64 characters for: {', '.join(long)}")
        return self

    def tool(self, name: str) -> McpTool | None:
        """What this file says about the server's tool `name` (None: not listed, so refused)."""
        return next((t for t in self.tools if t.name == name), None)


class McpConfig(_Strict):
    """Everything in mcp.yaml."""

    servers: list[McpServer] = Field(default_factory=list, description="the MCP servers xihe is a client of")

    @field_validator("servers")
    @classmethod
    def _unique(cls, v: list[McpServer]) -> list[McpServer]:
        names = [s.name for s in v]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"servers listed twice: {', '.join(twice)}")
        return v


def references(settings: Settings, cfg: McpConfig) -> Iterator[Problem]:
    """Roles and environments must exist in access.yaml."""
    access = settings.access
    for i, server in enumerate(cfg.servers):
        if server.environment and server.environment not in access.environments:
            yield (
                "mcp.yaml",
                ("servers", i, "environment"),
                unknown_name("environment", server.environment, access.environments, "access.yaml"),
            )
        for j, tool in enumerate(server.tools):
            for k, role in enumerate(tool.roles):
                if role not in access.roles:
                    where = ("servers", i, "tools", j, "roles", k)
                    yield "mcp.yaml", where, unknown_name("role", role, access.roles, "access.yaml roles")
            for k, env in enumerate(tool.environments):
                if env not in access.environments:
                    where = ("servers", i, "tools", j, "environments", k)
                    yield (
                        "mcp.yaml",
                        where,
                        unknown_name("environment", env, access.environments, "access.yaml"),
                    )


MCP_SECTION = Section("mcp.yaml", "mcp", McpConfig, checks=references)
