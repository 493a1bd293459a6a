"""`xihe audit search`: the audit trail, filtered. It needs only the store, so it also runs (with a
warning) while the config is broken: at 3 am the trail is how you find what broke it.

    xihe audit search [--user U] [--tool T] [--workflow W] [--since D] [--until D] [--text S] [--json] ...

`--workflow` matches a workflow by any name it goes by (its DolphinScheduler name, an alias from
workflows.yaml, its code), since each call records the name as its user typed it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `xihe --help` imports neither pydantic nor yaml
    from xihe.config.workflows import WorkflowsConfig


def register(sub: Any) -> None:
    """Add `audit search` to the xihe sub-parsers."""
    audit = sub.add_parser("audit", help="audit trail").add_subparsers(dest="audit_command", required=True)
    search = audit.add_parser("search", help="search audit events (works while the config is broken)")
    for flag in ("--user", "--tool", "--outcome", "--kind", "--since", "--until"):
        search.add_argument(flag)
    search.add_argument("--text", help="anywhere in actor, tool, reason, intent or arguments (any case)")
    search.add_argument(
        "--workflow", help="calls that name this workflow by any of its names (DS name, alias, code)"
    )
    search.add_argument("--offset", type=int, default=0, help="skip this many newest events (paging)")
    search.add_argument("--task", type=int)
    search.add_argument("--limit", type=int, default=50)
    search.add_argument("--json", action="store_true")
    search.set_defaults(func=cmd_audit_search)


@dataclass(frozen=True)
class StoreSettings:
    """What a search needs from the config: where the store is, the team's zone, the workflows."""

    url: str | None  # None: XIHE_DATABASE_URL or the default SQLite file (agent.db.database_url)
    timezone: str
    workflows: WorkflowsConfig | None
    warning: str | None = None  # set when the config is broken and was read leniently


def store_settings(directory: str | Path) -> StoreSettings:
    """The validated config's store, zone and workflows; when the directory does not validate, the
    same read leniently from the raw files, with a warning that says so (never the URL: it may hold
    a password)."""
    from xihe.agent.app import load_config

    try:
        settings = load_config(directory)
    except Exception as exc:  # any problem: the search must still run
        problems = str(exc).splitlines() or [type(exc).__name__]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        url, timezone, where = _raw_store(Path(directory) / "xihe.yaml")
        warning = (
            f"warning: the config does not validate: {problems[0]}{more}. "
            f"Searching the store named by {where} anyway."
        )
        return StoreSettings(url, timezone, _raw_workflows(Path(directory) / "workflows.yaml"), warning)
    return StoreSettings(settings.core.store.url, settings.core.timezone, settings.workflows)


def _raw_store(path: Path) -> tuple[str | None, str, str]:
    """(store.url, timezone, where the URL comes from) read straight from xihe.yaml, when it can be."""
    import yaml

    from xihe.agent.db import DEFAULT_SQLITE, ENV_URL

    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        loaded = None
    data: dict[str, Any] = loaded if isinstance(loaded, dict) else {}
    store = data.get("store")
    found = store.get("url") if isinstance(store, dict) else None
    url = found if isinstance(found, str) and found else None
    zone = data.get("timezone")
    timezone = zone if isinstance(zone, str) else "Asia/Shanghai"
    if os.environ.get(ENV_URL):
        where = ENV_URL
    elif url:
        where = f"store.url in {path}"
    else:
        where = f"the default ({DEFAULT_SQLITE})"
    return url, timezone, where


def _raw_workflows(path: Path) -> WorkflowsConfig | None:
    """workflows.yaml on its own, if it validates (for --workflow names); else None."""
    from xihe.config.workflows import WorkflowsConfig
    from xihe.config.yamlmodel import load_model

    try:
        return load_model(path.read_text(encoding="utf-8"), str(path), WorkflowsConfig)
    except Exception:
        return None


def cmd_audit_search(args: argparse.Namespace) -> int:
    """Print the matching events, newest first (a table, or JSON with --json)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from xihe.agent.audit import SqlAuditSink
    from xihe.agent.db import open_store_engine
    from xihe.agent.timefmt import show
    from xihe.agent.web.ui.data import parse_when
    from xihe.tools.dolphin.names import names_of
    from xihe.tools.dolphin.store import SqlCatalogStore

    found = store_settings(args.config)
    if found.warning:
        print(found.warning, file=sys.stderr)
    try:
        tz = ZoneInfo(found.timezone)  # a date or time without offset is local, as on /ui/audit
    except (ZoneInfoNotFoundError, ValueError):
        tz = ZoneInfo("UTC")
    try:
        since = parse_when(args.since, tz)
        until = parse_when(args.until, tz, end_of_day=True)
    except ValueError:
        print(
            "--since/--until take an ISO date or date-time, e.g. 2026-12-01 or 2026-12-01T08:30",
            file=sys.stderr,
        )
        return 2
    engine = open_store_engine(found.url)
    workflow = None
    if args.workflow:
        workflow = names_of(args.workflow, found.workflows, SqlCatalogStore(engine).entries())
    rows = SqlAuditSink(engine).search(
        actor=args.user,
        tool=args.tool,
        outcome=args.outcome,
        kind=args.kind,
        task_id=args.task,
        since=since,
        until=until,
        text=args.text,
        workflow=workflow,
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
