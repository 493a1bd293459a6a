"""`xihe`: one console script, short handlers.

xihe chat --user ID            terminal chat on the same session code as WeCom; follows its runs
xihe config check [DIR]        validate the YAML; exit 1 with file:line: key: problem
xihe tools [--config DIR]      the exact JSON schemas the model receives
xihe task show ID [--json]     which step failed, with what input, how long each took
xihe task resume ID            continue at the first unfinished step
xihe audit search [...]        the audit trail, filtered
xihe demo                      a scripted tour on the loopback fakes
xihe bench core                per-call overhead of validate + gate + task_step + audit
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xihe.agent.errors import BotError, ConfigError


def _app(args: argparse.Namespace) -> Any:
    """The bot for a command; what it posts to terminal chats waits in the store for them."""
    from xihe.agent.app import build_app

    return build_app(args.config)


def cmd_config_check(args: argparse.Namespace) -> int:
    from xihe.agent.app import check_config

    directory = args.dir or args.config
    try:
        settings, _registry = check_config(directory)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except Exception as exc:  # e.g. a plugin that fails to import: say so, without a traceback
        print(f"{directory}: the check failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"{directory}: OK ({len(settings.texts)} file(s) checked)")
    shell = settings.section("shell")
    if shell is not None:
        from xihe.tools.shell.sandbox import sandbox_warnings

        for warning in sandbox_warnings(shell):
            print(f"WARNING shell.yaml: {warning}")
    return 0


def cmd_tools(args: argparse.Namespace) -> int:
    from xihe.agent.app import check_config

    _settings, registry = check_config(args.config)
    print(json.dumps(registry.schemas(), ensure_ascii=False, indent=2))
    return 0


def cmd_task_show(args: argparse.Namespace) -> int:
    from xihe.agent.report import task_data, task_report

    app = _app(args)
    if args.json:
        print(json.dumps(task_data(app.deps, args.id), ensure_ascii=False, indent=2, default=str))
    else:
        print(task_report(app.deps, args.id))
    return 0


def cmd_task_resume(args: argparse.Namespace) -> int:
    app = _app(args)
    task = app.deps.tasks.get(args.id)
    from xihe.agent.holder import holder_is_dead
    from xihe.agent.tasks import TaskStatus

    take_over = args.force or holder_is_dead(task.lease_owner)
    outcome = app.agent.resume(args.id, take_over=take_over)
    print(f"task {outcome.task_id} {outcome.status}: {outcome.reply}")
    return 0 if outcome.status in (TaskStatus.DONE, TaskStatus.AWAITING_CONFIRMATION) else 1


def cmd_audit_search(args: argparse.Namespace) -> int:
    from zoneinfo import ZoneInfo

    from xihe.agent.timefmt import show
    from xihe.agent.web.ui.data import parse_when

    app = _app(args)
    tz = ZoneInfo(app.settings.core.timezone)  # a date or time without offset is local, as on /ui/audit
    try:
        since = parse_when(args.since, tz)
        until = parse_when(args.until, tz, end_of_day=True)
    except ValueError:
        print(
            "--since/--until take an ISO date or date-time, e.g. 2026-12-01 or 2026-12-01T08:30",
            file=sys.stderr,
        )
        return 2
    rows = app.deps.audit.search(
        actor=args.user,
        tool=args.tool,
        outcome=args.outcome,
        kind=args.kind,
        task_id=args.task,
        since=since,
        until=until,
        text=args.text,
        workflow=args.workflow,
        limit=args.limit,
        offset=args.offset,
    )
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2, default=str))
    else:
        for r in rows:
            print(
                f"{show(r['at'], tz)} {r['kind']:9} {r['actor']:12} {r['tool'] or '-':24} "
                f"{r['outcome']:10} {(r['reason'] or '')[:80]}"
            )
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from xihe.agent.web.server import create_server

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    app = _app(args)
    uvicorn.run(
        create_server(app), host=args.host, port=args.port, log_level="info", timeout_graceful_shutdown=20
    )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from xihe.agent.demo.scenes import run_demo

    return run_demo(verbose=not args.quiet, keep=Path(args.keep) if args.keep else None)


def cmd_bench_core(args: argparse.Namespace) -> int:
    from xihe.agent.cli.bench import bench_core

    print(json.dumps(bench_core(args.n, args.database_url), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree."""
    p = argparse.ArgumentParser(prog="xihe", description="chat-ops agent bot")
    p.add_argument("--config", default="config", help="directory of YAML files (default: config)")
    sub = p.add_subparsers(dest="command", required=True)
    from xihe.agent.cli import chat

    chat.register(sub)

    config = sub.add_parser("config", help="configuration").add_subparsers(
        dest="config_command", required=True
    )
    check = config.add_parser("check", help="validate a config directory")
    check.add_argument("dir", nargs="?", help="directory (default: --config)")
    check.set_defaults(func=cmd_config_check)

    tools = sub.add_parser("tools", help="print the tool schemas the model receives for a config")
    tools.add_argument("--config", default=argparse.SUPPRESS, help="directory of YAML files")
    tools.set_defaults(func=cmd_tools)

    task = sub.add_parser("task", help="durable tasks").add_subparsers(dest="task_command", required=True)
    show = task.add_parser("show", help="a task's step log")
    show.add_argument("id", type=int)
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_task_show)
    resume = task.add_parser("resume", help="continue a task at its first unfinished step")
    resume.add_argument("id", type=int)
    resume.add_argument(
        "--force", action="store_true", help="take the task over even if another holder's lease is live"
    )
    resume.set_defaults(func=cmd_task_resume)

    audit = sub.add_parser("audit", help="audit trail").add_subparsers(dest="audit_command", required=True)
    search = audit.add_parser("search", help="search audit events")
    for flag in ("--user", "--tool", "--outcome", "--kind", "--since", "--until"):
        search.add_argument(flag)
    search.add_argument("--text", help="anywhere in actor, tool, reason, intent or arguments (any case)")
    search.add_argument("--workflow", help="calls whose arguments name this workflow (or alias)")
    search.add_argument("--offset", type=int, default=0, help="skip this many newest events (paging)")
    search.add_argument("--task", type=int)
    search.add_argument("--limit", type=int, default=50)
    search.add_argument("--json", action="store_true")
    search.set_defaults(func=cmd_audit_search)

    serve = sub.add_parser("serve", help="HTTP server (WeCom callbacks, webhooks, health, metrics) + jobs")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.set_defaults(func=cmd_serve)

    demo = sub.add_parser("demo", help="a scripted tour on the loopback fakes")
    demo.add_argument("--quiet", action="store_true")
    demo.add_argument(
        "--keep", metavar="DIR", help="keep config, store and index in DIR (new or empty) afterwards"
    )
    demo.set_defaults(func=cmd_demo)

    bench = sub.add_parser("bench", help="benchmarks").add_subparsers(dest="bench_command", required=True)
    core = bench.add_parser("core", help="validate + gate + task_step + audit overhead per call")
    core.add_argument("-n", type=int, default=2000)
    core.add_argument("--database-url", help="default: a temporary SQLite file; also XIHE_TEST_PG_URL")
    core.set_defaults(func=cmd_bench_core)

    from xihe.agent.cli import alerts, code, fakes, shell

    for feature in (alerts, code, fakes, shell):
        feature.register(sub)
    _accept_config_everywhere(p)
    return p


def _accept_config_everywhere(parser: argparse.ArgumentParser) -> None:
    """`xihe chat --config DIR` works as well as `xihe --config DIR chat`, for every command.

    SUPPRESS: a subcommand's own --config only sets the value when given, so the top-level one stays
    the default and a command that names its own default keeps it.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                if not any("--config" in a.option_strings for a in child._actions):
                    child.add_argument(
                        "--config",
                        default=argparse.SUPPRESS,
                        help="directory of YAML files (default: config)",
                    )
                _accept_config_everywhere(child)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `xihe` console script."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except BotError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
