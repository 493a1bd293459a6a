"""The MCP feature, both ways (agent/mcp/README.md).

    server   `server.py`: calls are the user's commands in the conversation `mcp:<user>` (same registry,
             gate, /confirm, executor and audit); served at `/mcp` by `xihe serve` (agent/web/mcp.py:
             the web pages' tokens and login throttle) and over stdio by `xihe mcp serve`.
    client   with config/mcp.yaml: each server's tools are listed in the background (in parallel, bounded by
             the server's `list_timeout_seconds`), so building the bot never waits for a server. Until its
             listing arrives, each tool mcp.yaml allows is a stand-in `mcp_<server>_<tool>` that answers "not
             listed yet"; then the real tool replaces it (or it leaves, when the server refuses or lacks it). A
             server that is down or slow is a warning on /readyz, never a failed start. A config reload lists
             again: servers added, changed or removed in mcp.yaml take effect without a restart.

No mcp.yaml: this feature is not even imported (agent/app.py DECLARED). No ui.yaml token: no /mcp.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from fnmatch import fnmatch
from typing import Any

from xihe.agent.errors import ToolFailed
from xihe.agent.feature import Context, Feature, Installed, Runtime
from xihe.agent.registry import ToolContext, ToolSpec
from xihe.config.mcp import MCP_SECTION, McpConfig, McpServer, registry_name
from xihe.config.settings import Settings
from xihe.integrations.mcp.client import Endpoint, McpClient, McpError, RemoteTool
from xihe.tools.mcp.remote import Verdict, args_model, spec_for, verdicts

log = logging.getLogger("xihe.mcp")


LISTING = "listing its tools"  # the /readyz warning while a server's listing is under way


@dataclass
class McpState:
    """What the feature keeps: what each configured server listed, and which are down (or still being
    listed). `listed` is set when the latest round of listings has arrived (tests wait on it)."""

    verdicts: list[Verdict] = field(default_factory=list)
    down: dict[str, str] = field(default_factory=dict)  # server → why its tools are missing
    listing: set[str] = field(default_factory=set)  # servers whose listing has not arrived yet
    listed: threading.Event = field(default_factory=threading.Event)
    cfg: McpConfig | None = None
    _app: Runtime | None = None
    _arrived: list[tuple[McpServer, list[ToolSpec], str | None]] = field(default_factory=list)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _round: int = 0

    def start(self, settings: Settings, cfg: McpConfig) -> None:
        """List every server of `cfg` in a background thread; each listing is applied when it arrives."""
        with self._lock:
            self._round += 1
            this = self._round
            self.cfg = cfg
            self.listing = {s.name for s in cfg.servers}
            self.listed.clear()
            if not cfg.servers:
                self.listed.set()
                return

        def run() -> None:
            def one(server: McpServer) -> None:
                got = list_one(settings, server)
                self.arrive(this, settings, server, got)

            with ThreadPoolExecutor(
                max_workers=min(8, len(cfg.servers)), thread_name_prefix="mcp-list"
            ) as pool:
                list(pool.map(one, cfg.servers))
            with self._lock:
                if this == self._round:
                    self.listed.set()

        threading.Thread(target=run, name="mcp-listing", daemon=True).start()

    def arrive(
        self, this: int, settings: Settings, server: McpServer, got: list[RemoteTool] | McpError
    ) -> None:
        """One server's listing (or why it failed): record the verdicts, then apply them to the registry."""
        specs: list[ToolSpec] = []
        why: str | None = None
        found_verdicts: list[Verdict] = []
        if isinstance(got, McpError):
            why = str(got)
            log.warning("MCP server %s: its tools are not available: %s", server.name, got)
        else:
            found = {t.name: t for t in got}
            for verdict in verdicts(server, got):
                found_verdicts.append(verdict)
                if verdict.use:
                    specs.append(spec_for(server, found[verdict.tool], _client_of(settings, server)))
                elif server.tool(verdict.tool) is not None:  # listed in mcp.yaml, yet refused: say why
                    log.warning("MCP %s/%s: %s", server.name, verdict.tool, verdict.decision)
        with self._lock:
            if this != self._round:  # a reload started a newer round: this listing is stale
                return
            self.listing.discard(server.name)
            self.verdicts = [v for v in self.verdicts if v.server != server.name] + found_verdicts
            if why is None:
                self.down.pop(server.name, None)
            else:
                self.down[server.name] = why
            self._arrived.append((server, specs, why))
            if self._app is not None:
                self._apply()

    def attach(self, app: Runtime) -> None:
        """The app is built: apply the listings that arrived so far; later ones apply as they arrive."""
        with self._lock:
            self._app = app
            self._apply()

    def _apply(self) -> None:
        app = self._app
        assert app is not None
        registry, warnings = app.registry, app.installed.warnings
        enabled = app.settings.core.tools
        for server, specs, why in self._arrived:
            allowed = {registry_name(server.name, e.name) for e in server.tools if e.allowed}
            have = {s.name for s in specs}
            for spec in specs:
                if any(fnmatch(spec.name, p) for p in enabled) and not registry.replace(spec):
                    registry.add_tool(spec)
            for name in allowed - have:
                if why is not None and name in registry:  # down: the stand-in says why
                    registry.replace(stand_in(server, name, f"is unavailable: {why}"))
                elif why is None:  # refused or missing on the server: it leaves
                    registry.remove_tool(name)
            key = f"mcp {server.name}"
            if why is None:
                warnings.pop(key, None)
            else:
                warnings[key] = why
        self._arrived.clear()

    def reload(self, app: Runtime) -> None:
        """After a config reload: drop the tools of servers mcp.yaml no longer has (or now names
        differently), add stand-ins for the new ones, and list every server again."""
        cfg = app.settings.get(MCP_SECTION)
        cfg = cfg if cfg is not None else McpConfig(servers=[])
        with self._lock:
            old = self.cfg
            if old is not None and old == cfg:
                return  # mcp.yaml unchanged: the tools stay as they are
            keep = {s.name for s in cfg.servers}
            for name in list(app.registry.specs):
                if name.startswith("mcp_") and not _wanted(name, cfg):
                    app.registry.remove_tool(name)
            for key in [k for k in app.installed.warnings if k.startswith("mcp ")]:
                if key.removeprefix("mcp ") not in keep:
                    app.installed.warnings.pop(key)
            self.down = {k: v for k, v in self.down.items() if k in keep}
            self.verdicts = [v for v in self.verdicts if v.server in keep]
            enabled = app.settings.core.tools
            for spec in stand_ins(cfg):
                if spec.name not in app.registry and any(fnmatch(spec.name, p) for p in enabled):
                    app.registry.add_tool(spec)
            for server in cfg.servers:
                app.installed.warnings.setdefault(f"mcp {server.name}", LISTING)
        self.start(app.settings, cfg)


def _wanted(name: str, cfg: McpConfig) -> bool:
    """Whether `name` is an allowed tool of a server in `cfg` (before its listing says more)."""
    return any(registry_name(s.name, e.name) == name for s in cfg.servers for e in s.tools if e.allowed)


def stand_in(server: McpServer, name: str, why: str) -> ToolSpec:
    """What an allowed tool is while its server's listing has not arrived (or the server is down): a
    call is a clear tool error, never sent anywhere."""
    entry = next(e for e in server.tools if registry_name(server.name, e.name) == name)

    def run(args: Any, ctx: ToolContext) -> str:
        raise ToolFailed(f"MCP server {server.name} {why}; {name} cannot be called now. Try again later.")

    return ToolSpec(
        name=name,
        description=f"[MCP {server.name}] {entry.name}: not available yet (the server {why}).",
        args=args_model(name, {"type": "object"}),
        run=run,
        risk=entry.risk,
        environments=(server.environment,) if server.environment else (),
    )


def stand_ins(cfg: McpConfig) -> list[ToolSpec]:
    """A stand-in for every tool mcp.yaml allows, until its server's listing arrives."""
    not_yet = "has not listed its tools yet"
    return [
        stand_in(s, registry_name(s.name, e.name), not_yet) for s in cfg.servers for e in s.tools if e.allowed
    ]


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


def list_one(settings: Settings, server: McpServer) -> list[RemoteTool] | McpError:
    """One server's tool list within its `list_timeout_seconds`; its error when it fails."""
    try:
        listing = replace(endpoint(settings, server), timeout=server.list_timeout_seconds)
        return McpClient(listing).list_tools()
    except McpError as exc:
        return exc


def list_all(settings: Settings, cfg: McpConfig) -> dict[str, list[RemoteTool] | McpError]:
    """Every server's tool list, asked in parallel; a server that fails gives its error instead."""
    if not cfg.servers:
        return {}
    with ThreadPoolExecutor(max_workers=min(8, len(cfg.servers)), thread_name_prefix="mcp-list") as pool:
        got = pool.map(lambda s: list_one(settings, s), cfg.servers)
        return dict(zip((s.name for s in cfg.servers), got, strict=True))


def _client_of(settings: Settings, server: McpServer) -> Callable[[], McpClient]:
    def make() -> McpClient:  # secrets read at call time: a rotated token counts at once
        return McpClient(endpoint(settings, server))

    return make


def install(ctx: Context) -> Installed:
    state = McpState()
    if ctx.offline:
        return Installed()
    cfg = ctx.settings.get(MCP_SECTION)
    if cfg is None:
        return Installed(state=state)
    state.start(ctx.settings, cfg)  # in the background: building the bot never waits for a server
    return Installed(
        tools=stand_ins(cfg),
        warnings={f"mcp {s.name}": LISTING for s in cfg.servers},
        state=state,
        built=[state.attach],
        reloaded=[state.reload],
    )


FEATURE = Feature("mcp", MCP_SECTION, install)
