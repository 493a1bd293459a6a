"""The demo's MCP scene: dave's IDE agent (the SDK's own client, connected in process to xihe's MCP
server; `xihe serve` offers the same server at /mcp behind dave's bearer token) lists xihe's tools,
reads, and asks for a write, which waits until dave says /confirm in his chat."""

from __future__ import annotations

import json
from typing import Any, Protocol

import anyio

from xihe.agent.app import App
from xihe.agent.mcp.server import STATUS_TOOL, McpGateway, mcp_server


class Demo(Protocol):
    """What the scene uses of `xihe.agent.demo.scenes.Demo`."""

    def bot(self) -> App: ...

    def out(self, text: str = "") -> None: ...

    def scene(self, title: str) -> None: ...

    def say(self, user: str, text: str, conversation: str | None = None) -> str: ...


def _client_calls(
    app: App, user: str, calls: list[tuple[str, dict[str, Any]]]
) -> tuple[list[Any], list[Any]]:
    """tools/list, then each call, through the SDK's client and xihe's MCP server (in process)."""
    from mcp import Client

    server = mcp_server(McpGateway(app), lambda _ctx: user)

    async def main() -> tuple[list[Any], list[Any]]:
        async with Client(server) as client:
            tools = (await client.list_tools()).tools
            return list(tools), [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(main)


def _text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def scene_mcp(d: Demo) -> None:
    d.scene("12. MCP: dave's IDE agent calls xihe's tools; a write waits for dave's /confirm in chat")
    app = d.bot()
    alert = {"channel": "default", "title": "deploy window", "markdown": "The deploy window moves to 22:00."}
    tools, (read, write) = _client_calls(
        app,
        "dave",
        [("search_code", {"query": "when does a pending action expire"}), ("send_wecom_alert", alert)],
    )
    hints = {t.name: t.annotations for t in tools}
    d.out(f"ide> tools/list → {len(tools)} tools, e.g. search_code readOnlyHint="
          f"{hints['search_code'].read_only_hint}, send_wecom_alert destructiveHint="
          f"{hints['send_wecom_alert'].destructive_hint}")  # fmt: skip
    found = [line.strip() for line in _text(read).splitlines() if "## File:" in line or '"path"' in line]
    d.out(f"ide> tools/call search_code → {found[0] if found else _text(read)[:120]}")
    d.out(f"ide> tools/call send_wecom_alert → {_text(write)}")
    action = write.structured_content["action_id"]
    d.say("dave", f"/confirm {action}")
    (status,) = _client_calls(app, "dave", [(STATUS_TOOL, {"action_id": action})])[1]
    d.out(f"ide> tools/call {STATUS_TOOL} → {json.dumps(status.structured_content, ensure_ascii=False)}")
