"""`xihe shell ...`: admin tools for the whitelisted shell. Nothing here runs a whitelisted command.

    xihe shell check [--config DIR] [--user ID] [--env ENV] [--json] -- ARG...   dry run of an argv
    xihe shell check [--config DIR] [--user ID] --line '/sh text'                dry run of a chat line
    xihe shell list [--config DIR]                                               the entries the model sees

`check` exits 0 when the command would be allowed (also when it would need the user's
confirmation), 1 when refused and 2 when the configuration itself is invalid.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from xihe.agent.errors import ConfigError


def register(sub: Any) -> None:
    """Add the `shell` command group to the xihe sub-parsers."""
    shell = sub.add_parser("shell", help="whitelisted shell: dry-run checks and the entry list")
    actions = shell.add_subparsers(dest="shell_command", required=True)
    check = actions.add_parser(
        "check", help="which entry an argv matches and the decision, without running it"
    )
    check.add_argument("--config", default=argparse.SUPPRESS, help="YAML directory (default: config)")
    check.add_argument("--user", default=None, help="user id whose roles apply (from access.yaml)")
    check.add_argument("--env", default=None, help="environment the command would act on, e.g. test or prod")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.add_argument(
        "--line", default=None, help="check a chat line (the text after /sh) instead of an argv"
    )
    check.add_argument("argv", nargs="*", help="the command, after --")
    check.set_defaults(func=cmd_shell_check)
    lst = actions.add_parser("list", help="the whitelisted entries as the model reads them")
    lst.add_argument("--config", default=argparse.SUPPRESS, help="YAML directory (default: config)")
    lst.set_defaults(func=cmd_shell_list)


def _config_dir(args: argparse.Namespace) -> Path:
    return Path(getattr(args, "config", None) or "config")


def check(
    directory: Path,
    argv: list[str] | None,
    *,
    line: str | None = None,
    user: str | None = None,
    environment: str | None = None,
) -> dict[str, Any]:
    """The dry-run report as a dict: entry, decision, reasons, argv that would run.

    The decision is the gate's (agent/gate.py), with the same per-call inputs the tool gives it.
    """
    from xihe.agent.gate import Allow, Confirm, identify
    from xihe.config.access import AccessConfig
    from xihe.config.shell.file import load_shell_file
    from xihe.config.yamlmodel import load_model
    from xihe.tools.shell.policy import entry_environment, gate_decision
    from xihe.tools.shell.sandbox import make_backend
    from xihe.tools.shell.whitelist import ShellRefused, Whitelist

    config = load_shell_file(directory / "shell.yaml")
    access_path = directory / "access.yaml"
    access = (
        load_model(access_path.read_text(encoding="utf-8"), str(access_path), AccessConfig)
        if access_path.exists()
        else AccessConfig()  # what the bot has without access.yaml: no roles, every tool denied
    )
    report: dict[str, Any] = {
        "input": line if line is not None else list(argv or []),
        "user": user,
        "environment": environment,
        "sandbox": config.sandbox,
    }
    whitelist = Whitelist(config)
    try:
        match = whitelist.match_line(line) if line is not None else whitelist.match_argv(list(argv or []))
    except ShellRefused as exc:
        report.update(
            decision="denied",
            entry=None,
            closest=exc.entry,
            argument=exc.argument,
            reasons=[exc.reason],
            argv=None,
        )
        return report
    who = identify(user or "", access)
    env = entry_environment(match.entry, match.values) if environment is None else environment
    decision = gate_decision(match, who, access, env)
    outcome = (
        "allowed"
        if isinstance(decision, Allow)
        else "needs_confirmation"
        if isinstance(decision, Confirm)
        else "denied"
    )
    reasons = [decision.reason, f"matches entry {match.entry.name!r}"]
    if match.entry.writes:
        reasons.append("runs on a throwaway copy of the workspace")
    if config.sandbox == "none":
        reasons.append("WARNING: sandbox: none; the command would run unsandboxed")
    elif not make_backend(config).available():
        outcome = "denied"
        reasons.insert(0, f"sandbox {config.sandbox!r} is not available on this host")
    report.update(
        environment=env or None,
        decision=outcome,
        entry=match.entry.name,
        closest=match.entry.name,
        argument=None,
        reasons=reasons,
        argv=list(match.argv),
        risk=match.entry.risk,
        roles=list(who.roles),
    )
    return report


def cmd_shell_check(args: argparse.Namespace) -> int:
    """Print the dry-run report; exit 0 allowed or needs confirmation, 1 denied, 2 bad config."""
    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    try:
        report = check(_config_dir(args), argv, line=args.line, user=args.user, environment=args.env)
    except ConfigError as exc:
        if args.json:
            print(
                json.dumps({"decision": "config_error", "reasons": str(exc).splitlines()}, ensure_ascii=False)
            )
        else:
            print(str(exc))
        return 2
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        print(f"decision: {report['decision']}")
        print(
            f"entry:    {report['entry'] or '(none)'}"
            + (f" (closest: {report['closest']})" if report["entry"] is None and report["closest"] else "")
        )
        if report.get("argv"):
            print(f"argv:     {json.dumps(report['argv'], ensure_ascii=False)}")
        for reason in report["reasons"]:
            print(f"  - {reason}")
    return 1 if report["decision"] == "denied" else 0


def cmd_shell_list(args: argparse.Namespace) -> int:
    """Print the entries as the model reads them."""
    from xihe.config.shell.file import load_shell_file
    from xihe.tools.shell.tool import describe_entries
    from xihe.tools.shell.whitelist import Whitelist

    try:
        config = load_shell_file(_config_dir(args) / "shell.yaml")
    except ConfigError as exc:
        print(str(exc))
        return 2
    print(describe_entries(Whitelist(config)))
    return 0
