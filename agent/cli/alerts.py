"""`xihe alerts …` subcommands: `replay EVENTS.jsonl [--config DIR] [--json [--indent N]]` and
`stats [--since 7d] [--json]` (time to acknowledge and resolve, unacknowledged P0s)."""

from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xihe.agent.errors import ConfigError

if TYPE_CHECKING:  # imported when the command runs: `xihe --help` stays fast
    from xihe.config.alerts import AlertsConfig
    from xihe.config.workflows import WorkflowsConfig


def load_alert_config(directory: str | Path) -> tuple[AlertsConfig, WorkflowsConfig, frozenset[str]]:
    """alerts.yaml, workflows.yaml and access.yaml's production environments from `directory`
    (a missing file means defaults); unchanged files are read from their validated snapshot
    (agent/alerts/configsnap.py: no pydantic, no YAML)."""
    from xihe.agent.alerts import configsnap

    return configsnap.load(directory)


def cmd_replay(args: argparse.Namespace) -> int:
    """Feed a recorded stream through the pipeline on a simulated clock and print what it would send.

    Bad lines (not JSON, a required field missing, an unknown state) are reported with their line
    number on stderr and in the JSON output, and the replay goes on without them.

    The cyclic garbage collector is off meanwhile: a replay allocates ~10 objects per event and keeps
    most of them, so the collector's passes were ~10% of its time (issue 30), while the cycles it
    would free are ~0.4 objects per event, freed when the command ends.

    As the whole process (`xihe alerts replay`, not a caller in the same process) it ends at once
    once its output is flushed (`searchfast.leave`): freeing the replay's ~100,000 objects one by
    one and tearing down the interpreter cost ~20 ms, 7% of a 10,000-event replay (issue 30)."""
    kept: list[object] = []  # what the replay made, alive until it is printed and the process ends
    was = gc.isenabled()
    gc.disable()
    try:
        code = _replay(args, kept)
        if getattr(args, "whole_process", False):  # before the collector is back: it would walk them all
            from xihe.agent.cli.searchfast import leave

            leave(code)
        return code
    finally:
        if was:
            gc.enable()


def _replay(args: argparse.Namespace, kept: list[object]) -> int:
    from xihe.agent.alerts.replay import load_events, run_replay
    from xihe.agent.cli.terminal import shown

    try:
        alerts, workflows, production = load_alert_config(args.config)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    try:
        loaded = load_events(args.events)
    except OSError as exc:
        print(f"{args.events}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    for bad in loaded.bad:
        print(f"{args.events}:{bad.line}: {bad.problem}", file=sys.stderr)
    if loaded.unknown_fields:
        names = ", ".join(f"{k} ({n}×)" for k, n in sorted(loaded.unknown_fields.items()))
        print(f"{args.events}: ignored unknown field(s): {names}", file=sys.stderr)
    result = run_replay(loaded.events, alerts, workflows, production, acks=loaded.acks)
    kept += (loaded, result)
    for problem in result.ack_problems:
        print(shown(f"{args.events}: {problem}"), file=sys.stderr)
    summary = {**result.summary(), "bad_lines": len(loaded.bad)}
    if args.json:
        out: dict[str, Any] = {
            "notifications": result.notifications,
            "suppressed": None,  # below
            "lifecycle": [t.to_dict() for t in result.lifecycle],
            "resolved": result.resolved(),
            "ack_problems": result.ack_problems,
            "bad_lines": [b.to_dict() for b in loaded.bad],
            "summary": summary,
        }
        if args.indent is not None:
            out["suppressed"] = result.suppressed()
            print(json.dumps(out, ensure_ascii=False, indent=args.indent))
            return 0
        # one line: the document json.dumps makes, its ~10,000 suppressed records put in as text
        # (records_json: the same bytes at under half the cost)
        from xihe.agent.alerts.model import PUSHED, records_json

        suppressed = records_json(r for r in result.records if r.reason not in PUSHED)
        fields = (
            f'"{k}": {suppressed if k == "suppressed" else json.dumps(v, ensure_ascii=False)}'
            for k, v in out.items()
        )
        print("{" + ", ".join(fields) + "}")
        return 0
    for n in result.notifications:
        print(
            f"=== {n['time']}  {n['tier']}  {n['kind']}  channel={n['channel']} via={n['via']}  key={n['key']}"
        )
        print(n["text"])
        print()
    print("--- not pushed on their own ---")
    for r in result.suppressed():
        print(
            f"{r['at']}  instance {r['instance_id']}  {r['workflow']}/{r['task']}  {r['reason']}"
            f"{'  → ' + r['notification_key'] if r['notification_key'] else ''}{'  (' + r['detail'] + ')' if r['detail'] else ''}"
        )
    if result.lifecycle:
        print("--- alert lifecycle ---")
    for t in result.lifecycle:
        a = t.alert
        who = f"  {t.actor}" if t.actor else ""
        line = f"{t.at.isoformat()}  {a.short}  instance {a.instance_id}  {a.workflow}  {a.tier.value}  {t.why.value}{who}"
        print(shown(line))
    if result.resolved():
        print("--- resolved: " + ", ".join(f"instance {i}" for i in result.resolved()))
    print(
        f"--- {summary['events']} events → {summary['notifications']} notifications "
        f"(naive: {summary['naive_one_per_failure']}); rate-limit violations: "
        f"{summary['rate_limit_violations']}; bad lines: {summary['bad_lines']}"
    )
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Per workflow and tier: alerts, time to acknowledge and to resolve (median, p90) since --since;
    the P0s nobody has acknowledged right now."""
    from zoneinfo import ZoneInfo

    from xihe.agent.alerts.measures import measures, parse_since, span, unacked_p0
    from xihe.agent.alerts.sql.life import SqlLifeStore
    from xihe.agent.alerts.sql.stores import SqlAlertStores
    from xihe.agent.app import build_app
    from xihe.agent.cli.terminal import shown
    from xihe.agent.timefmt import show

    app = build_app(args.config)
    deps = app.deps
    now = deps.clock()
    tz = ZoneInfo(deps.settings.core.timezone)
    try:
        since = parse_since(args.since, now, tz)
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    life = SqlLifeStore(SqlAlertStores(deps.engine))
    rows = measures(life.since(since))
    waiting = unacked_p0(life.open_alerts())
    if args.json:
        doc = {
            "since": since.isoformat(),
            "now": now.isoformat(),
            "measures": [m.to_dict() for m in rows],
            "unacknowledged_p0": [
                {"alert": a.short, "instance_id": a.instance_id, "workflow": a.workflow,
                 "fired_at": a.fired_at.isoformat(), "pages": a.pages}
                for a in waiting
            ],
        }  # fmt: skip
        print(json.dumps(doc, ensure_ascii=False, indent=2))
        return 0
    print(f"alerts since {show(since, tz, seconds=False)}")
    print(f"{'tier':4}  {'workflow':24}  {'alerts':>6}  {'acked':>5}  {'ack p50':>7}  {'ack p90':>7}  "
          f"{'resolved':>8}  {'res p50':>7}  {'res p90':>7}")  # fmt: skip
    for m in rows:
        name = "(all)" if m.workflow == "*" else m.workflow
        print(shown(
            f"{m.tier:4}  {name[:24]:24}  {m.alerts:>6}  {m.acked:>5}  {span(m.ack_median):>7}  "
            f"{span(m.ack_p90):>7}  {m.resolved:>8}  {span(m.resolve_median):>7}  {span(m.resolve_p90):>7}"
        ))  # fmt: skip
    if not rows:
        print("(no alert in this period)")
    print(f"unacknowledged P0 now: {len(waiting)}")
    for a in waiting:
        print(shown(f"  {a.short}  {a.workflow} instance {a.instance_id}  since {show(a.fired_at, tz, seconds=False)}"
                    f"  ({span((now - a.fired_at).total_seconds())}, {a.pages} page(s))"))  # fmt: skip
    return 0


def register(sub: Any) -> None:
    """Add `alerts` with its subcommands to the `xihe` sub-parsers."""
    alerts = sub.add_parser("alerts", help="alert pipeline tools")
    alerts_sub = alerts.add_subparsers(dest="alerts_command", required=True)
    replay = alerts_sub.add_parser("replay", help="replay a JSONL event stream on a simulated clock")
    replay.add_argument(
        "events",
        metavar="EVENTS.jsonl",
        help="one event JSON object per line (format: agent/alerts/README.md)",
    )
    replay.add_argument(
        "--config", default=argparse.SUPPRESS, help="YAML directory (alerts.yaml, workflows.yaml)"
    )
    replay.add_argument("--json", action="store_true", help="print one JSON document (on one line)")
    replay.add_argument(
        "--indent", type=int, metavar="N", help="with --json: indent the document by N spaces per level"
    )
    replay.set_defaults(func=cmd_replay)
    stats = alerts_sub.add_parser(
        "stats", help="time to acknowledge and resolve per workflow and tier; unacknowledged P0s"
    )
    stats.add_argument(
        "--since",
        default="7d",
        metavar="SPAN|TIME",
        help="period start: a span back from now (30m, 24h, 7d; default 7d) or an ISO 8601 date or time",
    )
    stats.add_argument("--json", action="store_true", help="print one JSON document")
    stats.set_defaults(func=cmd_stats)
