"""The MCP feature, both ways (agent/mcp/README.md).

    server   `server.py`: calls are the user's commands in the conversation `mcp:<user>` (same registry,
             gate, /confirm, executor and audit); served at `/mcp` by `xihe serve` (agent/web/mcp.py:
             the web pages' tokens and login throttle) and over stdio by `xihe mcp serve`.
    client   with config/mcp.yaml: each server's tools are listed at start (in parallel, bounded by the
             server's `list_timeout_seconds`); those mcp.yaml allows join the registry as `mcp_<server>_<tool>`. A
             server that is down or slow is a warning on /readyz, never a failed start.

No mcp.yaml: this feature is not even imported (agent/app.py DECLARED). No ui.yaml token: no /mcp.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from xihe.agent.feature import Context, Feature, Installed
from xihe.agent.registry import ToolSpec
from xihe.config.mcp import MCP_SECTION, McpConfig, McpServer
from xihe.config.settings import Settings
from xihe.integrations.mcp.client import Endpoint, McpClient, McpError, RemoteTool
from xihe.tools.mcp.remote import Verdict, spec_for, verdicts

log = logging.getLogger("xihe.mcp")


@dataclass
class McpState:
    """What the feature keeps: what each configured server listed, and which are down."""

    verdicts: list[Verdict] = field(default_factory=list)
    down: dict[str, str] = field(default_factory=dict)  # server → why its tools are missing


def endpoint(settings: Settings, server: McpServer) -> Endpoint:
    """How to reach `server`, with its secrets read from the environment (never from the YAML)."""
    env = {e.name: settings.secret(e.value_env) or "" for e in server.env}
    token = settings.secret(server.token_env) if server.token_env else None
    return Endpoint(
        server.name,
        server.transport,
        tuple(server.command),
        server.url,
        env=env,
        token=token,
        timeout=server.timeout_seconds,
    )


def list_all(settings: Settings, cfg: McpConfig) -> dict[str, list[RemoteTool] | McpError]:
    """Every server's tool list, asked in parallel; a server that fails gives its error instead."""

    def one(server: McpServer) -> list[RemoteTool] | McpError:
        try:
            listing = replace(endpoint(settings, server), timeout=server.list_timeout_seconds)
            return McpClient(listing).list_tools()
        except McpError as exc:
            return exc

    if not cfg.servers:
        return {}
    with ThreadPoolExecutor(max_workers=min(8, len(cfg.servers)), thread_name_prefix="mcp-list") as pool:
        return dict(zip((s.name for s in cfg.servers), pool.map(one, cfg.servers), strict=True))


def client_tools(settings: Settings, cfg: McpConfig, state: McpState) -> list[ToolSpec]:
    """The allowed tools of every reachable server; what is refused or down is kept in `state`."""
    specs: list[ToolSpec] = []
    listed = list_all(settings, cfg)
    for server in cfg.servers:
        got = listed[server.name]
        if isinstance(got, McpError):
            state.down[server.name] = str(got)
            log.warning("MCP server %s: its tools are not available: %s", server.name, got)
            continue
        found = {t.name: t for t in got}
        for verdict in verdicts(server, got):
            state.verdicts.append(verdict)
            if verdict.use:
                specs.append(spec_for(server, found[verdict.tool], _client_of(settings, server)))
            elif server.tool(verdict.tool) is not None:  # listed in mcp.yaml, yet refused: say why
                log.warning("MCP %s/%s: %s", server.name, verdict.tool, verdict.decision)
    return specs


def _client_of(settings: Settings, server: McpServer) -> Callable[[], McpClient]:
    def make() -> McpClient:  # secrets read at call time: a rotated token counts at once
        return McpClient(endpoint(settings, server))

    return make


def install(ctx: Context) -> Installed:
    state = McpState()
    if ctx.offline:
        return Installed()
    cfg = ctx.settings.get(MCP_SECTION)
    tools = client_tools(ctx.settings, cfg, state) if cfg is not None else []
    warnings = {f"mcp {name}": why for name, why in state.down.items()}
    return Installed(
        tools=tools,
        warnings=warnings,
        state=state,
    )


FEATURE = Feature("mcp", MCP_SECTION, install)
