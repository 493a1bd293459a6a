"""`xihe oncall show [--at TIME] [--team T]`: who is on call, from oncall.yaml and the overrides in
the store (the same answer as `/oncall all` in chat, at any time)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo


def register(sub: Any) -> None:
    """Add the `oncall` command group to the xihe sub-parsers."""
    oncall = sub.add_parser("oncall", help="on-call rotations").add_subparsers(
        dest="oncall_command", required=True
    )
    show = oncall.add_parser("show", help="who is on call (now, or at --at), per team")
    show.add_argument(
        "--at",
        metavar="TIME",
        help="ISO 8601 time, e.g. 2026-12-07T10:00+08:00; without an offset: xihe.yaml's timezone (default: now)",
    )
    show.add_argument("--team", metavar="T", help="only this team (a rotation in oncall.yaml)")
    show.set_defaults(func=cmd_show)


def parse_at(text: str, zone: str) -> datetime:
    """`--at`: an ISO 8601 time; a time without an offset is in `zone`."""
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--at {text!r} is not an ISO 8601 time (e.g. 2026-12-07T10:00+08:00)") from None
    return at if at.tzinfo is not None else at.replace(tzinfo=ZoneInfo(zone))


def cmd_show(args: argparse.Namespace) -> int:
    from xihe.agent.app import build_app
    from xihe.agent.cli.terminal import shown
    from xihe.agent.oncall.feature import show_now
    from xihe.agent.oncall.overrides import SqlOverrides
    from xihe.config.oncall import ONCALL_SECTION, OnCallConfig
    from xihe.config.semantic import unknown_name

    app = build_app(args.config)
    deps = app.deps
    cfg = deps.settings.get(ONCALL_SECTION) or OnCallConfig()
    try:
        at = parse_at(args.at, deps.settings.core.timezone) if args.at else deps.clock()
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if args.team is not None and args.team not in cfg.rotations:
        print(
            f"--team: {unknown_name('team', args.team, cfg.rotations, 'oncall.yaml rotations')}",
            file=sys.stderr,
        )
        return 2
    teams = (args.team,) if args.team else tuple(cfg.rotations)
    print(
        shown(show_now(deps, cfg, SqlOverrides(deps.engine), teams, at, "en", everything=args.team is None))
    )
    return 0
