"""`xihe alerts …` subcommands: `replay EVENTS.jsonl [--config DIR] [--json]`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.errors import ConfigError

if TYPE_CHECKING:  # imported when the command runs: `xihe --help` stays fast
    from config.alerts import AlertsConfig
    from config.workflows import WorkflowsConfig


def load_alert_config(directory: str | Path) -> tuple[AlertsConfig, WorkflowsConfig]:
    """alerts.yaml and workflows.yaml from `directory` (a missing file means defaults)."""
    from config.alerts import AlertsConfig
    from config.workflows import WorkflowsConfig
    from config.yamlmodel import load_model

    root = Path(directory)
    alerts_path, wf_path = root / "alerts.yaml", root / "workflows.yaml"
    alerts = (
        load_model(alerts_path.read_text(encoding="utf-8"), str(alerts_path), AlertsConfig)
        if alerts_path.exists()
        else AlertsConfig()
    )
    workflows = (
        load_model(wf_path.read_text(encoding="utf-8"), str(wf_path), WorkflowsConfig)
        if wf_path.exists()
        else WorkflowsConfig.model_validate({})
    )
    return alerts, workflows


def cmd_replay(args: argparse.Namespace) -> int:
    """Feed a recorded stream through the pipeline on a simulated clock and print what it would send."""
    from agent.alerts.replay import load_events, run_replay

    try:
        alerts, workflows = load_alert_config(args.config)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    try:
        events, errors = load_events(args.events)
    except OSError as exc:
        print(f"{args.events}: {exc.strerror}", file=sys.stderr)
        return 2
    if errors:
        for e in errors:
            print(e, file=sys.stderr)
        return 2
    result = run_replay(events, alerts, workflows)
    if args.json:
        out: dict[str, Any] = {
            "notifications": result.notifications,
            "suppressed": result.suppressed(),
            "summary": result.summary(),
        }
        print(json.dumps(out, ensure_ascii=False, indent=2))
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
    s = result.summary()
    print(
        f"--- {s['events']} events → {s['notifications']} notifications "
        f"(naive: {s['naive_one_per_failure']}); rate-limit violations: {s['rate_limit_violations']}"
    )
    return 0


def register(sub: Any) -> None:
    """Add `alerts` with its subcommands to the `xihe` sub-parsers."""
    alerts = sub.add_parser("alerts", help="alert pipeline tools")
    alerts_sub = alerts.add_subparsers(dest="alerts_command", required=True)
    replay = alerts_sub.add_parser("replay", help="replay a FailureEvent JSONL stream on a simulated clock")
    replay.add_argument("events", metavar="EVENTS.jsonl", help="one FailureEvent JSON object per line")
    replay.add_argument(
        "--config", default=argparse.SUPPRESS, help="YAML directory (alerts.yaml, workflows.yaml)"
    )
    replay.add_argument("--json", action="store_true", help="print one JSON document")
    replay.set_defaults(func=cmd_replay)


def main(argv: list[str] | None = None) -> int:
    """Standalone entry for tests: `python -m agent.cli_alerts alerts replay …`."""
    parser = argparse.ArgumentParser(prog="xihe")
    parser.add_argument("--config", default="config")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
