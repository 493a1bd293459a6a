"""The replay's in-process cost, for `bench_alert_storm --base`: reading and decoding the events plus
`run_replay` (decisions, lifecycle, rendering, simulated delivery), without the interpreter's start-up,
the imports, the config or the output.

Run: `python tests/bench/replay_phase.py EVENTS CONFIG_DIR RUNS`; prints one JSON object of medians.
Imports only `xihe`, so it times whichever xihe is on the path (an export of an earlier one on
`PYTHONPATH`), whose `load_alert_config`, `load_events` and `run_replay` it calls as they were then.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time


def main() -> None:
    """Time `load_events` and `run_replay` RUNS times after one warm-up; print the medians."""
    events, config_dir, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    from xihe.agent.alerts.replay import load_events, run_replay
    from xihe.agent.cli.alerts import load_alert_config

    alerts, workflows, production = load_alert_config(config_dir)
    parse: list[float] = []
    replay: list[float] = []
    notes = 0
    for i in range(runs + 1):
        gc.collect()
        gc.disable()  # the collector's pauses land on either phase at random
        t = time.process_time()
        loaded = load_events(events)
        t1 = time.process_time()
        res = run_replay(loaded.events, alerts, workflows, production)
        t2 = time.process_time()
        gc.enable()
        notes = len(res.notifications)
        if i:  # the first run warms the caches (templates, compiled expressions)
            parse.append(t1 - t)
            replay.append(t2 - t1)
    total = [p + r for p, r in zip(parse, replay, strict=True)]
    print(
        json.dumps(
            {
                "parse_cpu_s": round(statistics.median(parse), 4),
                "replay_cpu_s": round(statistics.median(replay), 4),
                "in_process_cpu_s": round(statistics.median(total), 4),
                "notifications": notes,
            }
        )
    )


if __name__ == "__main__":
    main()
