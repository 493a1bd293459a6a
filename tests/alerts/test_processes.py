"""Two pipeline processes on one database, fed the same events, deliver every alert exactly once.

Each process is a real OS process (`tests.alerts.replica_proc`) with its own engine and FakeClock.
The test steps both at once over their stdin and waits for both before moving time on, so the
robot sink (in this process, on the test's clock) sees the time the pipelines decided on: the
20 messages/minute limit is checked on one time line, and no decision waits for real time.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import IO

import yaml

from tests.alerts.feature_support import KEY, Sinks, failure, merge, svc
from tests.alerts.test_replicas import delivered_exactly_once
from tests.conftest import CORE_FILES, REPO, write_config
from xihe.agent.alert_event import AlertEvent
from xihe.agent.app import build_app
from xihe.agent.clock import FakeClock

STEPS, DRAIN = 30, 45  # 5 minutes of events in 10-second steps, then 7.5 minutes to drain
STEP_TIMEOUT = 60.0  # seconds of real time one step may take before the test gives up


def alerts_config(directory: Path, sinks: Sinks) -> Path:
    """xihe.yaml + access.yaml + workflows.yaml + alerts.yaml pointed at the sinks."""
    cfg = write_config(directory, files=(*CORE_FILES, "workflows.yaml"))
    shipped = yaml.safe_load((REPO / "config" / "alerts.yaml").read_text())
    alerts = merge(
        shipped,
        {
            "instance_wait_seconds": 10,
            "maintenance": [],
            "delivery": {"robot_base_url": sinks.robot.url, "timeout_seconds": 5, "tries_per_run": 1},
            "smtp": {
                "host": sinks.smtp.host,
                "port": sinks.smtp.port,
                "starttls": False,
                "admins": ["ops@t"],
            },
        },
    )
    (cfg / "alerts.yaml").write_text(yaml.safe_dump(alerts, allow_unicode=True))
    return cfg


def storm(clock: FakeClock) -> list[list[AlertEvent]]:
    """A burst of 30 failures (more than a robot minute), then 2 per step; every fifth one P0."""
    prod = {"project": "etl", "workflow": "order_sync", "workflow_code": 1001, "environment": "prod"}
    batches = []
    for step in range(STEPS):
        at = clock() + timedelta(seconds=10 * step)
        batches.append(
            [
                failure(
                    clock,
                    at=at,
                    instance_id=100 * step + j,
                    host=f"10.3.{step}.{j}:1",
                    error=f"boom {'x' * step} {'y' * j}",  # letters: digits would be normalised away
                    **(prod if j % 5 == 0 else {}),
                )
                for j in range(30 if step == 0 else 2)
            ]
        )
    return batches


class Replica:
    """One child process and the protocol lines it printed."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.alerts.replica_proc", *args],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        assert self.proc.stdout is not None and self.proc.stderr is not None
        threading.Thread(target=self._read, args=(self.proc.stdout, True), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, False), daemon=True).start()

    def _read(self, stream: IO[str], protocol: bool) -> None:
        for line in stream:
            if protocol and line.startswith("@@"):
                self.lines.put(line[2:].strip())
            else:
                self.stderr.append(line)
        if protocol:
            self.lines.put("eof")

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, prefix: str) -> list[str]:
        try:
            line = self.lines.get(timeout=STEP_TIMEOUT)
        except queue.Empty:
            raise AssertionError(
                f"no '{prefix}' within {STEP_TIMEOUT} s; stderr:\n{''.join(self.stderr)}"
            ) from None
        assert line.startswith(prefix), f"{line!r}; stderr:\n{''.join(self.stderr[-40:])}"
        return line.split()

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(timeout=10)


def test_two_processes_fed_the_same_events_send_each_alert_once(
    sinks: Sinks, clock: FakeClock, db_url: str, tmp_path: Path
) -> None:
    cfg = alerts_config(tmp_path / "config", sinks)
    observer = build_app(cfg, clock=clock, database_url=db_url, holder="observer")  # migrates first
    batches = storm(clock)
    events_file = tmp_path / "events.jsonl"
    events_file.write_text(
        "".join(
            json.dumps({"step": k, "event": e.to_dict()}) + "\n" for k, b in enumerate(batches) for e in b
        )
    )
    t0 = clock()
    replicas = [
        Replica([str(cfg), db_url, holder, str(events_file), t0.isoformat()])
        for holder in ("proc-a", "proc-b")
    ]
    try:
        for r in replicas:
            r.expect("ready")
        for step in range(STEPS + DRAIN):
            clock.now = t0 + timedelta(seconds=10 * step)
            for r in replicas:
                r.send(f"step {step} {clock().isoformat()}")
            for r in replicas:
                _, done, job_errors = r.expect("done")
                assert int(done) == step and job_errors == "0", "".join(r.stderr[-40:])
    finally:
        for r in replicas:
            r.stop()

    keys = delivered_exactly_once(observer, sinks)  # each row sent, each text arrived once, no 45009
    fed = [e for b in batches for e in b]
    assert sum(1 for k in keys if k.startswith("inst:")) == len(fed)  # one message per failed instance
    records = svc(observer).records.rows()
    decisions = [r for r in records if r["kind"] == "decision"]
    firsts = Counter(r["event_key"] for r in decisions if r["reason"] != "duplicate_event")
    assert len(firsts) == len(fed) and set(firsts.values()) == {1}  # each event decided by one process
    assert sum(1 for r in decisions if r["reason"] == "duplicate_event") == len(fed)  # the other saw it
    senders = Counter(r["holder"] for r in records if r["reason"] == "sent")
    assert sum(senders.values()) == len(keys) and set(senders) <= {"proc-a", "proc-b"}
    sent_at = sorted(m.at for m in sinks.robot.messages.get(KEY, []))
    assert len(sent_at) > 20  # the burst needed more than one minute of robot slots
    assert all(b - a >= timedelta(minutes=1) for a, b in zip(sent_at, sent_at[20:], strict=False))
    observer.deps.engine.dispose()
