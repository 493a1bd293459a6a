"""`xihe ui sessions …`: the web UI's sessions as the store holds them (shared by every replica).

xihe ui sessions [list] [--all] [--json]   open sessions (with --all: ended ones too, and why)
xihe ui sessions end ID                    end one session (its cookie stops working everywhere)
xihe ui sessions end --user U              end every session of one user
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register(sub: Any) -> None:
    """Add the `ui` command group to the xihe sub-parsers."""
    ui = sub.add_parser("ui", help="web UI: sessions").add_subparsers(dest="ui_command", required=True)
    sessions = ui.add_parser("sessions", help="list or end web UI sessions")
    sessions.set_defaults(func=cmd_sessions_list, all=False, json=False)
    actions = sessions.add_subparsers(dest="sessions_command")
    lst = actions.add_parser("list", help="open sessions: user, login method, client, times")
    lst.add_argument("--all", action="store_true", help="ended sessions too, with why they ended")
    lst.add_argument("--json", action="store_true", help="one JSON array")
    lst.set_defaults(func=cmd_sessions_list)
    end = actions.add_parser("end", help="end one session (ID from the list) or all of a user's")
    end.add_argument("id", nargs="?", type=int, help="the session's id, from `xihe ui sessions`")
    end.add_argument("--user", help="end every open session of this user")
    end.set_defaults(func=cmd_sessions_end)


def _store(args: argparse.Namespace) -> Any:
    from xihe.agent.app import build_app
    from xihe.agent.web.ui.sessions import SessionStore

    app = build_app(args.config)
    return app, SessionStore(app.deps.engine)


def cmd_sessions_list(args: argparse.Namespace) -> int:
    from xihe.agent.timefmt import show

    app, store = _store(args)
    now = app.deps.clock()
    tz = app.settings.core.timezone
    rows = store.open(now, with_ended=args.all)
    if args.json:
        print(json.dumps([vars(r) for r in rows], ensure_ascii=False, indent=2, default=str))
        return 0
    if not rows:
        print("no open sessions" if not args.all else "no sessions")
        return 0
    print(
        f"{'ID':>5}  {'USER':12} {'VIA':6} {'CLIENT':16} {'CREATED':26} {'LAST SEEN':26} {'ENDS':26} STATUS"
    )
    for r in rows:
        status = f"ended ({r.end_reason})" if r.ended_at else "expired" if r.expires_at <= now else "open"
        print(
            f"{r.id:>5}  {r.user:12} {r.via:6} {r.client or '-':16} {show(r.created_at, tz):26} "
            f"{show(r.last_seen_at, tz):26} {show(r.ended_at or r.expires_at, tz):26} {status}"
        )
    return 0


def cmd_sessions_end(args: argparse.Namespace) -> int:
    from xihe.agent.audit import AuditEvent

    if (args.id is None) == (args.user is None):
        print("give a session ID or --user USER (one of them)", file=sys.stderr)
        return 2
    app, store = _store(args)
    now = app.deps.clock()
    if args.id is not None:
        n = store.end(now, "ended by xihe ui sessions end", session_id=args.id)
        what = f"session {args.id}"
    else:
        n = store.end(now, "ended by xihe ui sessions end", user=args.user)
        what = f"{n} session(s) of {args.user}"
    if not n:
        print(f"no open {'session ' + str(args.id) if args.id is not None else 'session of ' + args.user}")
        return 1
    app.deps.audit.record(
        AuditEvent(
            at=now,
            kind="web",
            actor="cli",
            outcome="sessions_ended",
            reason=f"ended {what} with xihe ui sessions end",
            detail={"session": args.id, "user": args.user, "count": n},
        )
    )
    print(f"ended {what}")
    return 0
