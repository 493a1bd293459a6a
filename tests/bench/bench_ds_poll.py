"""Benchmark: HTTP requests per poll cycle for 500 watched runs, batched poller vs one GET per run.

Run: python -m tests.bench.bench_ds_poll  (prints JSON). Everything runs in one process against the
loopback DolphinSimulator; the simulator counts every request it answers.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace

import tenacity

from xihe.integrations.dolphinscheduler import DolphinClient
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator, Scenario, SimDefinition, SimProject
from xihe.tools.dolphin.poll import poll_once
from xihe.tools.dolphin.watch import PollPolicy, Watch

PROJECTS, DEFS_PER_PROJECT, RUNS = 5, 4, 500
POLICY = PollPolicy(interval=15, max_interval=15, backoff=1.0)  # every watch due every cycle: worst case


def _seed() -> list[SimProject]:
    projects = []
    for p in range(PROJECTS):
        defs = [
            SimDefinition(
                f"wf_{p}_{d}", 2000000000000 + p * 100 + d, scenario=Scenario(task_seconds=1800 + 60 * d)
            )
            for d in range(DEFS_PER_PROJECT)
        ]
        projects.append(SimProject(f"proj_{p}", 1000000000000 + p, defs))
    return projects


def _requests(sim: DolphinSimulator) -> int:
    return sum(sim.counts.values())


def bench(version: str, cycles: int = 5) -> dict[str, object]:
    """Measure one API version; returns the numbers as a dict."""
    sim = DolphinSimulator(_seed(), version=version).start()
    try:
        client = DolphinClient(sim.url, token=sim.token, version=version, wait=tenacity.wait_none())
        watches: list[Watch] = []
        now = sim.clock()
        for i in range(RUNS):
            project = list(sim.projects.values())[i % PROJECTS]
            d = project.definitions[(i // PROJECTS) % DEFS_PER_PROJECT]
            marker = f"task{i}:run"
            sim.run_directly(d.name, marker=marker)
            watches.append(
                Watch(
                    key=marker,
                    task_id=f"task{i}",
                    conversation="c",
                    project=project.name,
                    project_code=project.code,
                    workflow=d.name,
                    definition_code=d.code,
                    started_at=now,
                    next_poll_at=now,
                )
            )
        # cycle 0: discovery (ids unknown, as after a 3.1/3.2 start); then steady polling
        sim.advance(15)
        sim.reset_counts()
        t0 = time.perf_counter()
        result = poll_once(watches, client, sim.clock(), POLICY)
        discovery = _requests(sim)
        watches = result.watches
        assert all(len(w.instance_ids) == 1 for w in watches), "discovery missed runs"
        ours = []
        for _ in range(cycles):
            sim.advance(15)
            sim.reset_counts()
            watches = [
                replace(w, next_poll_at=sim.clock())
                for w in poll_once(watches, client, sim.clock(), POLICY).watches
            ]
            ours.append(_requests(sim))
        ours_seconds = time.perf_counter() - t0
        naive = []
        t1 = time.perf_counter()
        for _ in range(cycles):
            sim.advance(15)
            sim.reset_counts()
            for w in watches:
                for instance_id in w.instance_ids:
                    client.get_instance(w.project_code, instance_id)
            naive.append(_requests(sim))
        naive_seconds = time.perf_counter() - t1
        ours_avg, naive_avg = sum(ours) / len(ours), sum(naive) / len(naive)
        return {
            "version": version,
            "watched_runs": RUNS,
            "projects": PROJECTS,
            "cycles": cycles,
            "page_size": client.page_size,
            "poller_requests_per_cycle": ours_avg,
            "naive_requests_per_cycle": naive_avg,
            "ratio_percent": round(100 * ours_avg / naive_avg, 2),
            "discovery_cycle_requests": discovery,
            "poller_wall_seconds": round(ours_seconds, 2),
            "naive_wall_seconds": round(naive_seconds, 2),
        }
    finally:
        sim.stop()


def main() -> int:
    """Run the benchmark for each profile and print JSON; exit 1 if the 5% target is missed."""
    results = [bench(v) for v in ("3.1", "3.2", "3.3")]
    print(json.dumps({"target_percent": 5.0, "results": results}, indent=2))
    return 0 if all(float(str(r["ratio_percent"])) <= 5.0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
