"""The alert storm benchmark's reference policy: the plainest policy that passes the storm checks,
the anchor `bench_alert_storm` times `xihe alerts replay` against (decisions alone, and whole
process: `python -m tests.bench.alert_reference EVENTS.jsonl CONFIG_DIR` prints one JSON line).

Over the same event lines and the same alerts.yaml / workflows.yaml:
- a line without `at`, `workflow`, `instance_id` or `state` is skipped;
- a repeated report (same instance, task, state, attempt) is dropped;
- only a workflow's own FAILURE (`task` null: its retries are spent) is pushed, one message per
  instance; task attempts, retries, stops, kills and successes are not;
- a failure inside a maintenance window (alerts.yaml `maintenance`, scope host or workflow) is held
  and listed in one message when the window ends;
- the tier is P0 for a core workflow in production, else P1; the channel is the workflow's;
- at most 20 messages per channel in any minute: the rest wait (simulated clock, like the replay).

What it does not do, and xihe does: node storms, same-error folding, P2 aggregation, repeats,
rendered markdown with links and log tails, e-mail fallback. It is a floor for the cost of a
decision, not a competitor for its quality.
"""

from __future__ import annotations

import json
import sys
from collections import deque
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

PER_MINUTE = 20


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


REQUIRED = ("at", "workflow", "instance_id", "state")


def _usable(e: Any) -> bool:
    """A line the policy can act on: an object with the required fields (others are skipped)."""
    return isinstance(e, dict) and all(e.get(k) not in (None, "") for k in REQUIRED)


def decide(
    lines: list[dict[str, Any]], alerts: dict[str, Any], workflows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The messages for `lines` (decoded event objects), each with its send time, tier and channel."""
    wfs = {w["name"]: w for w in workflows}
    windows = [
        (_time(m["start"]), _time(m["end"]), m["scope"]["kind"], m["scope"]["value"], m["name"])
        for m in alerts.get("maintenance", [])
    ]
    held: dict[str, list[int]] = {name: [] for *_, name in windows}
    seen: set[tuple[Any, ...]] = set()
    out: list[tuple[datetime, str, str, str]] = []
    for e in sorted((e for e in lines if _usable(e)), key=lambda e: _time(e["at"])):
        key = (e["instance_id"], e.get("task"), e["state"], e.get("retry_times"))
        if key in seen:
            continue
        seen.add(key)
        if e["state"] != "FAILURE" or e.get("task"):
            continue
        at = _time(e["at"])
        host = (e.get("host") or "").split(":")[0]
        wf = wfs.get(e["workflow"], {})
        covering = next(
            (
                name
                for start, end, kind, value, name in windows
                if start <= at < end and value == (host if kind == "host" else e["workflow"])
            ),
            None,
        )
        if covering is not None:
            held[covering].append(e["instance_id"])
            continue
        tier = "P0" if wf.get("core") and wf.get("environment") == "prod" else "P1"
        text = (
            f"[{tier}] {e['workflow']} instance {e['instance_id']} failed"
            f" on {e.get('host') or '?'}: {e.get('error') or '?'} ({e['at']})"
        )
        out.append((at, tier, wf.get("channel", "default"), text))
    for _start, end, _kind, _value, name in windows:
        if held[name]:
            ids = ", ".join(str(i) for i in held[name])
            out.append((end, "P1", "default", f"maintenance {name} ended; kept quiet: {ids}"))
    sent: dict[str, deque[datetime]] = {}
    notes = []
    for at, tier, channel, text in sorted(out, key=lambda m: m[0]):
        last = sent.setdefault(channel, deque(maxlen=PER_MINUTE))
        if last:
            at = max(at, last[-1])  # first in, first out
        if len(last) == PER_MINUTE and at < last[0] + timedelta(minutes=1):
            at = last[0] + timedelta(minutes=1)
        last.append(at)
        notes.append({"time": at.isoformat(), "tier": tier, "channel": channel, "text": text})
    return notes


def main(argv: list[str]) -> int:
    """`EVENTS.jsonl CONFIG_DIR`: print the messages and counts as one JSON line."""
    import yaml

    events, config = Path(argv[0]), Path(argv[1])
    alerts = yaml.safe_load((config / "alerts.yaml").read_text(encoding="utf-8")) or {}
    workflows = (yaml.safe_load((config / "workflows.yaml").read_text(encoding="utf-8")) or {}).get(
        "workflows", []
    )
    with events.open(encoding="utf-8") as fh:
        lines = [json.loads(line) for line in fh if line.strip()]
    notes = decide(lines, alerts, workflows)
    print(
        json.dumps(
            {"notifications": notes, "summary": {"events": len(lines), "notifications": len(notes)}},
            ensure_ascii=False,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
