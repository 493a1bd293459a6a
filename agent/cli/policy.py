"""`xihe policy explain`: the gate's decisions over a config directory, for admins.

    xihe policy explain --user U [--env E] [--json]     what U may do, where, with whose approval
    xihe policy explain --tool T [--env E] [--json]     who may use T (there)

Every line is `xihe.agent.gate.decide` over the loaded files (`xihe.agent.policy`); a shell entry is
its own line, with its roles and environments. Exit 0, or 2 for an unknown user, tool or environment.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register(sub: Any) -> None:
    """Add `policy explain` to the xihe sub-parsers."""
    policy = sub.add_parser("policy", help="what the gate allows").add_subparsers(
        dest="policy_command", required=True
    )
    explain = policy.add_parser(
        "explain", help="what a user may do (--user), or who may use a tool (--tool), as the gate decides"
    )
    whom = explain.add_mutually_exclusive_group(required=True)
    whom.add_argument("--user", help="a user id from access.yaml (others get unknown_user_roles)")
    whom.add_argument("--tool", help="a tool name, or a shell entry as run_shell_command:ENTRY")
    explain.add_argument("--env", help="only this environment, e.g. prod")
    explain.add_argument("--json", action="store_true", help="one JSON object per decision")
    explain.set_defaults(func=cmd_policy_explain)


def cmd_policy_explain(args: argparse.Namespace) -> int:
    """Print the decisions; exit 2 when the user, tool or environment is unknown."""
    from xihe.agent.app import check_config, declared_tools
    from xihe.agent.policy import explain, for_tool, for_user, read_query, subjects
    from xihe.agent.subject import Subject
    from xihe.config.shell.file import SHELL_SECTION
    from xihe.tools.shell.policy import entry_subject

    settings, registry = check_config(args.config)
    access = settings.access
    shell = settings.get(SHELL_SECTION)
    expand: dict[str, list[Subject]] = {}
    if shell is not None:
        for entry in shell.entries:
            subject = entry_subject(entry, access)
            expand.setdefault(subject.tool, []).append(subject)
    found = subjects(registry.specs.values(), access, expand)
    if args.user is not None:
        if args.user not in access.users:
            print(
                f"note: {args.user} is not in access.yaml: the roles of unlisted users apply", file=sys.stderr
            )
        query = read_query(args.user, args.env, found, access, "en", "user")
    else:
        query = read_query(args.tool, args.env, found, access, "en", "tool")
    if query.problem and args.tool in declared_tools():
        print(
            f"{args.tool} is off in this config (its feature is not configured or lacks its credentials, "
            "or xihe.yaml `tools` leaves it out): the model never gets it, so nobody may use it."
        )
        return 0
    if query.problem:
        print(query.problem, file=sys.stderr)
        return 2
    if args.json:
        rows = (
            for_user(query.user, found, access, query.environment)
            if query.user is not None
            else [r for s in query.subjects for r in for_tool(s, access, query.environment)]
        )
        print(json.dumps([r.data() for r in rows], ensure_ascii=False, indent=2))
    else:
        print(explain(query, found, access, "en"))
    return 0
