"""A bot process for the two-process alert test, stepped by the test over stdin/stdout.

    python -m tests.alerts.replica_proc CONFIG_DIR DATABASE_URL HOLDER EVENTS.jsonl START_ISO

It builds the app from CONFIG_DIR on a FakeClock starting at START_ISO and answers `@@ready`.
Then, for every line `step K ISO` it sets its clock to ISO, feeds the events of step K from
EVENTS.jsonl (lines `{"step": K, "event": {...}}`) to `deps.alerts`, runs the alerts_flush
and alerts_deliver jobs the way the scheduler does, and answers `@@done K <job errors so far>`.
`quit` ends it. Protocol lines start with `@@`; everything else (logs) goes to stderr.
"""

from __future__ import annotations

import json
import logging
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from xihe.agent.alert_event import AlertEvent
from xihe.agent.app import build_app
from xihe.agent.clock import FakeClock
from xihe.agent.scheduler import all_jobs, run_job


def main(argv: list[str]) -> int:
    config_dir, db_url, holder, events_file, start = argv
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    steps: dict[int, list[AlertEvent]] = defaultdict(list)
    for line in Path(events_file).read_text().splitlines():
        row = json.loads(line)
        steps[int(row["step"])].append(AlertEvent.from_dict(row["event"]))
    clock = FakeClock(datetime.fromisoformat(start))
    app = build_app(Path(config_dir), clock=clock, database_url=db_url, holder=holder)
    jobs = {j.id: j for j in all_jobs(app)}
    alerts = app.deps.alerts
    registry = app.deps.metrics.registry
    print("@@ready", flush=True)
    for command in sys.stdin:
        parts = command.split()
        if not parts or parts[0] == "quit":
            break
        step, clock.now = int(parts[1]), datetime.fromisoformat(parts[2])
        if steps.get(step):
            alerts.feed(steps[step])
        run_job(app, jobs["alerts_flush"])
        run_job(app, jobs["alerts_deliver"])
        failed = sum(
            registry.get_sample_value("xihe_job_runs_total", {"job": j, "outcome": "error"}) or 0
            for j in ("alerts_flush", "alerts_deliver")
        )
        print(f"@@done {step} {int(failed)}", flush=True)
    app.deps.engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
