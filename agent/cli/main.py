"""`xihe`: one console script, short handlers.

xihe chat --user ID            terminal chat on the same session code as WeCom; follows its runs
xihe config check [DIR]        validate the YAML and this host (workspaces exist); exit 1 with file:line: key: problem
xihe config reload             validate, then ask the running replicas to apply it (audited with your name)
xihe tools [--config DIR]      the exact JSON schemas the model receives
xihe task show ID [--json]     which step failed, with what input, how long each took
xihe task resume ID            continue at the first unfinished step
xihe audit search [...]        the audit trail, filtered (also while the config is broken)
xihe policy explain --user U   what U may do, where, with whose approval (--tool T --env E: who may)
xihe ui sessions [list|end]    web UI sessions: list them, end one or all of a user's
xihe oncall show [--at TIME]   who is on call per team (rotations in oncall.yaml + chat overrides)
xihe alerts stats [--since 7d] time to acknowledge and resolve per workflow and tier; unacknowledged P0s
xihe demo                      a scripted tour on the loopback fakes
xihe bench core                per-call overhead of validate + gate + task_step + audit
xihe eval model [--repeat K]   everyday conversations against the configured model endpoint
xihe mcp serve | list          xihe's tools over stdio (XIHE_MCP_TOKEN); the MCP servers' tools and decisions
"""

from __future__ import annotations

import os
import sys

# A search that a running serve answers imports nothing but its socket client (searchfast.py) before
# printing: this module's own imports are the interpreter's start-up modules, the rest come per command.
TYPE_CHECKING = False  # (typing itself costs a millisecond to import)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any


def _app(args: argparse.Namespace, listen: str = "127.0.0.1") -> Any:
    """The bot for a command; what it posts to terminal chats waits in the store for them."""
    from xihe.agent.app import build_app

    return build_app(args.config, listen=listen)


def cmd_tools(args: argparse.Namespace) -> int:
    import json

    from xihe.agent.app import check_config
    from xihe.agent.profiles import resolve
    from xihe.agent.request import carried_tools

    settings, registry = check_config(args.config)
    cfg = settings.core.llm
    window = resolve(cfg.profile, cfg.model, cfg.base_url).window
    print(json.dumps(carried_tools(registry, cfg, window), ensure_ascii=False, indent=2))
    return 0


def cmd_task_show(args: argparse.Namespace) -> int:
    import json

    from xihe.agent.cli.terminal import shown
    from xihe.agent.report import task_data, task_report

    app = _app(args)
    if args.json:
        print(json.dumps(task_data(app.deps, args.id), ensure_ascii=False, indent=2, default=str))
    else:
        print(shown(task_report(app.deps, args.id)))
    return 0


def cmd_task_resume(args: argparse.Namespace) -> int:
    from xihe.agent.cli.terminal import shown

    app = _app(args)
    task = app.deps.tasks.get(args.id)
    from xihe.agent.holder import holder_is_dead
    from xihe.agent.tasks import TaskStatus

    take_over = args.force or holder_is_dead(task.lease_owner)
    outcome = app.agent.resume(args.id, take_over=take_over)
    print(f"task {outcome.task_id} {outcome.status}: {shown(outcome.reply)}")
    return 0 if outcome.status in (TaskStatus.DONE, TaskStatus.AWAITING_CONFIRMATION) else 1


def cmd_serve(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from xihe.agent.heap import limit_arenas
    from xihe.agent.web.server import create_server

    limit_arenas()  # before the bot's threads start (agent/heap.py)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    app = _app(args, listen=args.host)
    uvicorn.run(
        create_server(app), host=args.host, port=args.port, log_level="info", timeout_graceful_shutdown=20
    )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from pathlib import Path

    from xihe.agent.demo.scenes import run_demo

    return run_demo(verbose=not args.quiet, keep=Path(args.keep) if args.keep else None)


def cmd_bench_core(args: argparse.Namespace) -> int:
    import json

    from xihe.agent.cli.bench import bench_core

    print(json.dumps(bench_core(args.n, args.database_url), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree."""
    import argparse

    p = argparse.ArgumentParser(prog="xihe", description="chat-ops agent bot")
    p.add_argument("--config", default="config", help="directory of YAML files (default: config)")
    sub = p.add_subparsers(dest="command", required=True)
    from xihe.agent.cli import chat

    chat.register(sub)

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

    from xihe.agent.cli import alerts, audit, code, config, eval_model, fakes, mcp, oncall, policy, shell, ui

    for feature in (config, audit, policy, alerts, oncall, code, fakes, shell, ui, mcp):
        feature.register(sub)
    evals = sub.add_parser("eval", help="evaluations").add_subparsers(dest="eval_what", required=True)
    code.register_eval(evals)
    eval_model.register(evals)
    _accept_config_everywhere(p)
    return p


def _accept_config_everywhere(parser: argparse.ArgumentParser) -> None:
    """`xihe chat --config DIR` works as well as `xihe --config DIR chat`, for every command.

    SUPPRESS: a subcommand's own --config only sets the value when given, so the top-level one stays
    the default and a command that names its own default keeps it.
    """
    import argparse

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


SIGPIPE_EXIT = 141  # 128 + SIGPIPE: what `cat`, `grep` and friends exit with when the reader leaves


def _command_word(argv: Sequence[str]) -> str:
    """The command `argv` names after an optional leading `--config DIR` ("" when none)."""
    rest = list(argv)
    if rest[:1] == ["--config"]:
        rest = rest[2:]
    elif rest[:1] and rest[0].startswith("--config="):
        rest = rest[1:]
    return rest[0] if rest else ""


def _search_argv(argv: Sequence[str]) -> list[str] | None:
    """`xihe [--config DIR] search ARGS` as `search_parser()` reads it, or None for any other command."""
    rest, config = list(argv), []
    if rest[:1] == ["--config"] and len(rest) > 1:
        config, rest = rest[:2], rest[2:]
    elif rest[:1] and rest[0].startswith("--config="):
        config, rest = rest[:1], rest[1:]
    return [*config, *rest[1:]] if rest[:1] == ["search"] else None


def _alerts_parser() -> argparse.ArgumentParser:
    """The tree with only `xihe [--config DIR] alerts …` in it (the same arguments, help and errors):
    the whole tree imports every command's module, ~25 ms of a 10,000-event replay (issue 30)."""
    import argparse

    from xihe.agent.cli import alerts

    p = argparse.ArgumentParser(prog="xihe", description="chat-ops agent bot")
    p.add_argument("--config", default="config", help="directory of YAML files (default: config)")
    alerts.register(p.add_subparsers(dest="command", required=True))
    _accept_config_everywhere(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `xihe` console script."""
    whole_process = argv is None  # the console script (or `-m`), not a caller in this process
    argv = list(sys.argv[1:] if argv is None else argv)
    search = _search_argv(argv)
    if search is not None:  # the whole parser imports every command's module: a search needs its own
        from xihe.agent.cli import searchfast

        try:
            done = searchfast.answered(search)  # a running serve's answer, argparse not even imported
        except BrokenPipeError:
            return _reader_left()
        if done is not None:
            if whole_process:
                searchfast.leave(done)
            return done
        from xihe.agent.cli.code import search_parser

        args = search_parser().parse_args(search)
        args.asked = searchfast.read_args(search) is not None  # asked above: not again
    elif _command_word(argv) == "alerts":
        args = _alerts_parser().parse_args(argv)
        args.whole_process = whole_process  # `alerts replay` then ends the process at once
    else:
        args = build_parser().parse_args(argv)
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a reader that left (`| head`) shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:
        return _reader_left()
    except Exception as exc:
        from xihe.agent.errors import BotError, ConfigError  # imported when something failed only

        if isinstance(exc, ConfigError):
            print(str(exc), file=sys.stderr)
            return 1
        if isinstance(exc, BotError):
            print(f"error: {exc}", file=sys.stderr)
            return 1
        raise


def _reader_left() -> int:
    """`xihe audit search | head`: end quietly like standard tools, no traceback. What is still
    buffered for stdout goes to /dev/null, so the flush at exit does not complain either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return SIGPIPE_EXIT


if __name__ == "__main__":
    sys.exit(main())
