"""A storm generator in the documented event format, with the truth about every instance.

Used by the storm test and by tests/bench/bench_alert_storm.py. Each instance starts (workflow
RUNNING_EXECUTION, task null), dispatches its tasks one after another (task RUNNING_EXECUTION per
attempt) and ends in one of:
- success, possibly after intermediate failures that recover on a retry;
- a final failure: a task fails every attempt (the last with retry_times == max_retry_times), then
  the workflow FAILURE carrying that task's host, error and retry fields;
- a stop: the running attempt is KILLed and the workflow ends STOP.
During the node burst every attempt dispatched to the bad host fails, so instances landing there
fail for good. Maintenance windows (one on a host, one on a P0 core workflow) hide some final
failures. Some events are sent twice (a re-poll), and null fields are common.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

START = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
HOSTS = ["10.0.0.11:1234", "10.0.0.12:1234", "10.0.0.13:1234", "10.0.0.14:1234"]
BAD_HOST = "10.0.0.13:1234"
MAINT_HOST = "10.0.0.14:1234"
P0_WORKFLOW = "wf_00"  # production core; a maintenance window covers it for a while
ERRORS = [
    "Connection refused to 10.2.{n}.{m}:5432",
    "java.lang.OutOfMemoryError: Java heap space (pid {n})",
    "No such file /data/etl/{n}/{m}/part-0000.csv",
    "Table dw.t_{n} doesn't exist",
    "exit code {n}",
    "HTTP 503 from http://api.internal:{m}/v1/job/{n}",
    "Task {n} timed out after {m}s",
    "Kafka offset {n}{m} out of range",
]


def workflows() -> list[dict[str, Any]]:
    """50 workflows: every 10th production core (P0), every 3rd production, the rest test."""
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
                "channel": "prod" if env == "prod" else "default",
            }
        )
    return items


def alerts_config(start: datetime = START) -> dict[str, Any]:
    """alerts.yaml for the storm: two robots, node storms at 5, two maintenance windows."""
    return {
        "timezone": "Asia/Shanghai",
        "instance_wait_seconds": 15,
        "window_minutes": 10,
        "node_storm": {"threshold": 5, "window_minutes": 10, "channel": "default"},
        "public_base_url": "https://xihe.example.com",
        "dolphinscheduler_instance_url": "http://ds.example.com:12345/dolphinscheduler/ui/projects/{project}/workflow/instances/{instance_id}",
        "channels": {
            "default": {"robot_key_env": "XIHE_ROBOT_KEY"},
            "prod": {"robot_key_env": "XIHE_ROBOT_KEY_PROD"},
        },
        "maintenance": [
            {
                "name": "host-maint",
                "start": (start + timedelta(minutes=20)).isoformat(),
                "end": (start + timedelta(minutes=50)).isoformat(),
                "scope": {"kind": "host", "value": MAINT_HOST.split(":")[0]},
            },
            {
                "name": "core-maint",
                "start": (start + timedelta(minutes=60)).isoformat(),
                "end": (start + timedelta(minutes=80)).isoformat(),
                "scope": {"kind": "workflow", "value": P0_WORKFLOW},
            },
        ],
    }


@dataclass
class Storm:
    """The event lines (dicts, time-ordered) and what really happened to each instance."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    final_at: dict[int, datetime] = field(default_factory=dict)  # failed for good → its final failure
    failed_host: dict[int, str] = field(default_factory=dict)
    workflow_of: dict[int, str] = field(default_factory=dict)
    not_failed: set[int] = field(default_factory=set)  # succeeded (maybe after retries) or stopped

    def jsonl(self) -> str:
        """The stream as JSON lines."""
        return "".join(json.dumps(line) + "\n" for line in self.lines)


def _at(t: datetime) -> str:
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z") if t.second % 2 else t.isoformat()


def generate(
    seed: int = 7,
    instances: int = 500,
    spacing_seconds: int = 12,
    burst: tuple[int, int] = (30, 38),  # minutes after START when BAD_HOST fails everything
    p_fail: float = 0.12,
    p_fail_core: float = 0.5,  # production core workflows (P0) fail more often, so pages are tested
    p_stop: float = 0.05,
    p_retry_recovers: float = 0.25,
    p_duplicate: float = 0.05,
    p_core_extra: float = 0.05,  # extra runs of P0_WORKFLOW, so its maintenance window hides some
    extra_hosts: int = 0,  # more healthy workers: fewer failures fold into node storms
) -> Storm:
    """A storm over `instances` runs, one starting every `spacing_seconds` (±)."""
    rnd = random.Random(seed)
    s = Storm()
    hosts = HOSTS + [f"10.0.1.{i}:1234" for i in range(extra_hosts)]
    wfs = workflows()
    burst_from, burst_to = START + timedelta(minutes=burst[0]), START + timedelta(minutes=burst[1])
    for k in range(instances):
        iid = 700_000 + k
        wf = wfs[0] if rnd.random() < p_core_extra else wfs[rnd.randrange(len(wfs))]
        t = START + timedelta(seconds=k * spacing_seconds + rnd.randrange(spacing_seconds))
        base = {
            "project": "etl",
            "workflow": wf["name"],
            "workflow_code": wf["code"] if rnd.random() > 0.1 else None,
            "instance_id": iid,
            "environment": wf["environment"] if rnd.random() > 0.2 else None,
        }
        s.workflow_of[iid] = wf["name"]
        out: list[dict[str, Any]] = []

        def emit(
            at: datetime, state: str, base: dict[str, Any] = base, out: list[Any] = out, **kw: Any
        ) -> None:
            row = {"at": _at(at), **base, "state": state, "task": None, "host": None, "error": None}
            row.update({"retry_times": 0, "max_retry_times": 0})
            row.update(kw)
            out.append(row)

        emit(t, "RUNNING_EXECUTION")
        fate = rnd.random()
        fail_p = p_fail_core if wf["core"] else p_fail
        stop_task = rnd.randrange(3) if fate < p_stop else -1
        failed = False
        for ti, task in enumerate(("extract", "transform", "load")):
            max_retry = rnd.choice((0, 1, 3))
            err = rnd.choice(ERRORS).format(n=rnd.randrange(1000), m=rnd.randrange(100))
            doomed = p_stop <= fate < p_stop + fail_p and ti == 1
            recovers = not doomed and rnd.random() < p_retry_recovers and max_retry > 0
            for attempt in range(max_retry + 1):
                t += timedelta(seconds=1 + rnd.randrange(3))
                host = rnd.choice(hosts)
                on_bad = host == BAD_HOST and burst_from <= t < burst_to
                common = {"task": task, "host": host, "retry_times": attempt, "max_retry_times": max_retry}
                emit(t, "RUNNING_EXECUTION", **common)
                t += timedelta(seconds=5 + rnd.randrange(20))
                if ti == stop_task:
                    emit(t, "KILL", **common)
                    emit(t + timedelta(seconds=1), "STOP")
                    break
                fails = doomed or on_bad or (recovers and attempt == 0)
                if not fails:
                    emit(t, "SUCCESS", **common)
                    break
                emit(t, "FAILURE", **common, error=err)
                if attempt == max_retry:  # retries exhausted: the workflow fails with this task's fields
                    t += timedelta(seconds=1)
                    emit(t, "FAILURE", host=host, error=err, retry_times=attempt, max_retry_times=max_retry)
                    s.final_at[iid] = t - timedelta(seconds=1)
                    s.failed_host[iid] = host
                    failed = True
                t += timedelta(seconds=10)
            if failed or ti == stop_task:
                break
        else:
            emit(t + timedelta(seconds=1), "SUCCESS")
        if iid not in s.final_at:
            s.not_failed.add(iid)
        for row in list(out):
            if rnd.random() < p_duplicate:
                out.append(dict(row))  # the same report again
        s.lines.extend(out)
    s.lines.sort(key=lambda r: datetime.fromisoformat(r["at"].replace("Z", "+00:00")))
    return s


def in_maintenance(storm: Storm, iid: int, config: dict[str, Any]) -> bool:
    """Whether the final failure of `iid` fell inside a maintenance window covering it."""
    at = storm.final_at[iid]
    for m in config["maintenance"]:
        start, end = datetime.fromisoformat(m["start"]), datetime.fromisoformat(m["end"])
        scope = m["scope"]
        hit = (scope["kind"] == "host" and storm.failed_host[iid].split(":")[0] == scope["value"]) or (
            scope["kind"] == "workflow" and storm.workflow_of[iid] == scope["value"]
        )
        if hit and start <= at < end:
            return True
    return False
