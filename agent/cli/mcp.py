"""`xihe mcp serve` (xihe's tools over stdio for an MCP client; the user of XIHE_MCP_TOKEN) and
`xihe mcp list` (each server of mcp.yaml: its tools and what mcp.yaml decides for them)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any


def register(sub: Any) -> None:
    """Add the `mcp` command group to the xihe sub-parsers."""
    mcp = sub.add_parser(
        "mcp", help="MCP: serve xihe's tools over stdio; list the MCP servers' tools"
    ).add_subparsers(dest="mcp_command", required=True)
    serve = mcp.add_parser("serve", help="xihe's tools over stdio, as the user of XIHE_MCP_TOKEN")
    serve.set_defaults(func=cmd_serve)
    listing = mcp.add_parser("list", help="each mcp.yaml server's tools and what mcp.yaml decides for them")
    listing.set_defaults(func=cmd_list)


def cmd_serve(args: argparse.Namespace) -> int:
    from xihe.agent.app import build_app
    from xihe.agent.mcp.stdio import TOKEN_ENV, NotAuthenticated, serve_stdio, stdio_user

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)  # stdout is the protocol's
    app = build_app(args.config)
    try:
        user = stdio_user(app, os.environ.get(TOKEN_ENV))
    except NotAuthenticated as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    serve_stdio(app, user)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from xihe.agent.app import load_config
    from xihe.agent.cli.terminal import shown
    from xihe.agent.mcp.auth import token_hashes
    from xihe.agent.mcp.feature import list_all
    from xihe.config.mcp import MCP_SECTION
    from xihe.tools.mcp.remote import verdicts

    settings = load_config(args.config)
    users = sorted(token_hashes(settings))
    if users:
        print(
            shown(f"xihe's MCP server: /mcp under `xihe serve` for {', '.join(users)} (their ui.yaml tokens)")
        )
    else:
        print("xihe's MCP server: off (no ui.yaml user has a token)")
    cfg = settings.get(MCP_SECTION)
    if cfg is None:
        print("no mcp.yaml: xihe uses no MCP server")
        return 0
    listed = list_all(settings, cfg)
    down = 0
    for server in cfg.servers:
        where = server.url if server.transport == "http" else " ".join(server.command)
        print(shown(f"{server.name} ({server.transport} {where})"))
        got = listed[server.name]
        if isinstance(got, Exception):
            down += 1
            print(shown(f"  unavailable: {got}"))
            continue
        for v in verdicts(server, got):
            hints = ", ".join(f"{k}={v}" for k, v in sorted(v.hints.items()))
            print(shown(f"  {v.tool:<24} {v.decision}" + (f"  [server says: {hints}]" if hints else "")))
            if v.use:
                print(shown(f"  {'':<24} registry name {v.registry_name}"))
    return 1 if down else 0
