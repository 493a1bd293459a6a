"""Alert storm benchmark: 10,000 events over 500 instances with retries on 3 hosts, through the replay machinery.

Run: `python -m tests.bench.bench_alert_storm [--seed N]`; prints one JSON object. Reports the decision
core's events/s (pipeline feed + tick, rendering included), notifications vs the naive
one-alert-per-failure count, node alerts, and rate-limit violations (must be 0).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent.alerts.outbox import InMemoryOutbox
from agent.alerts.pipeline import Pipeline
from agent.alerts.replay import run_replay
from agent.alerts.state import InMemoryAlertStateStore
from agent.events import FailureEvent
from config.alerts import AlertsConfig
from config.workflows import WorkflowsConfig
from config.yamlmodel import load_model

CONFIG = Path(__file__).resolve().parents[2] / "config" / "alerts.yaml"
HOSTS = ["10.0.0.11:1234", "10.0.0.12:1234", "10.0.0.13:1234"]
ERRORS = [
    "Connection refused to 10.2.{n}.{m}:5432",
    "java.lang.OutOfMemoryError: Java heap space (pid {n})",
    "No such file /data/etl/{n}/{m}/part-0000.csv",
    "Table dw.t_{n} doesn't exist",
    "exit code {n}",
    "HTTP 503 from http://api.internal:{m}/v1/job/{n}",
    "disk quota exceeded on /mnt/{n}",
    "Task {n} timed out after {m}s",
    "Permission denied: user etl_{n}",
    "Kafka offset {n}{m} out of range",
    "Deadlock found when trying to get lock; txn {n}",
    "spark job 0x{n:x}{m:x} lost executor {m}",
]


def workflows() -> WorkflowsConfig:
    """50 workflows: every 10th production core, every 3rd production, the rest test."""
    items = []
    for i in range(50):
        env = "prod" if i % 10 == 0 or i % 3 == 0 else "test"
        items.append(
            {
                "name": f"wf_{i:02d}",
                "project": "etl",
                "code": 5000 + i,
                "environment": env,
                "core": i % 10 == 0,
                "oncall": ["oncall_a"] if i % 10 == 0 else [],
            }
        )
    return WorkflowsConfig.model_validate({"workflows": items})


def storm(seed: int = 7, instances: int = 500, per_instance: int = 20) -> list[FailureEvent]:
    """Per instance: two tasks fail 3 retries then for good, one fails without retries; finals re-polled."""
    rnd = random.Random(seed)
    start = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
    events: list[FailureEvent] = []
    for k in range(instances):
        wf = rnd.randrange(50)
        t0 = start + timedelta(seconds=k * 30 + rnd.randrange(20))
        env = "prod" if wf % 10 == 0 or wf % 3 == 0 else "test"
        base = {
            "project": "etl",
            "workflow": f"wf_{wf:02d}",
            "workflow_code": 5000 + wf,
            "instance_id": 10_000 + k,
            "environment": env,
        }
        inst: list[FailureEvent] = []
        for t, retries in (("extract", 3), ("transform", 3), ("load", 0)):
            host = rnd.choice(HOSTS)
            err = rnd.choice(ERRORS).format(n=rnd.randrange(1000), m=rnd.randrange(100))
            for r in range(retries + 1):
                final = r == retries
                inst.append(
                    FailureEvent(
                        at=t0 + timedelta(seconds=60 * r + rnd.randrange(5)),
                        state="FAILURE" if final else "RUNNING_EXECUTION",
                        task=t,
                        host=host,
                        error=err,
                        retry_times=r,
                        max_retry_times=retries,
                        task_state="FAILURE",
                        log_tail=f"... stack ...\nERROR {err}",
                        source="replay",
                        **base,
                    )
                )
        finals = [e for e in inst if e.state == "FAILURE"]
        while len(inst) < per_instance:  # the poller sees the same rows again
            e = rnd.choice(finals if rnd.random() < 0.6 else inst)
            inst.append(FailureEvent(**{**e.__dict__, "at": e.at + timedelta(seconds=rnd.randrange(1, 30))}))
        events.extend(inst[:per_instance])
    return sorted(events, key=lambda e: e.at)


def main() -> None:
    """Run and print the JSON report."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    cfg = load_model(CONFIG.read_text(encoding="utf-8"), str(CONFIG), AlertsConfig)
    wfs = workflows()
    events = storm(args.seed)
    instances = len({e.instance_id for e in events})

    # 1) the decision core alone, as fast as it goes
    p = Pipeline(cfg, wfs, InMemoryAlertStateStore(), InMemoryOutbox())
    t = time.perf_counter()
    for e in events:
        p.feed(e, e.at)
    p.tick(events[-1].at + timedelta(hours=1))
    core_only = time.perf_counter() - t

    # 2) the full replay: simulated clock, rate-limited simulated robot, e-mail fallback
    t = time.perf_counter()
    res = run_replay(events, cfg, wfs)
    wall = time.perf_counter() - t
    s = res.summary()
    node_alerts = s["by_kind"].get("node", 0)
    print(
        json.dumps(
            {
                "events": len(events),
                "instances": instances,
                "hosts": len(HOSTS),
                "decision_core_events_per_s": round(len(events) / core_only),
                "replay_core_events_per_s": round(len(events) / res.core_seconds),
                "replay_wall_seconds": round(wall, 3),
                "notifications": s["notifications"],
                "by_kind": s["by_kind"],
                "node_alerts": node_alerts,
                "naive_one_per_failure": s["naive_one_per_failure"],
                "bound_instances_plus_node_alerts": instances + node_alerts,
                "within_bound": s["notifications"] <= instances + node_alerts,
                "rate_limit_violations": s["rate_limit_violations"],
                "unsent": s["unsent"],
                "via": s["via"],
                "by_reason": s["by_reason"],
                "simulated_span_minutes": round((events[-1].at - events[0].at).total_seconds() / 60),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
