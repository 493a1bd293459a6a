"""Benchmark: the store read behind `/status ID` (and the run tools), CPU per call by table size.

Run: python -m tests.bench.bench_status_store [--database-url URL] [--sizes 100,1000,10000,100000]
(prints JSON). For each number of `ds_watch` rows it times `SqlWatchStore.with_instance` (one
indexed lookup in `ds_watch_instance`) against its anchor in the same run, `get(key)` (a primary-key
read of the same row), and the read it replaced (decode up to the 2,000 newest rows and look for the
instance in each): CPU per call (process time, so other load on the machine counts less) and the ratio.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

from sqlalchemy import Engine, delete, insert, select

from tests.conftest import reset_postgres
from xihe.agent.db import open_store_engine
from xihe.agent.dolphin_tables import ds_watch, ds_watch_instance
from xihe.tools.dolphin.store import SqlWatchStore, _watch
from xihe.tools.dolphin.watch import Watch

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
CALLS = 200


def _fill(engine: Engine, upto: int, have: int) -> None:
    """Add watches `have`..`upto`-1, each following instance 10,000,000 + i, the newest last."""
    for start in range(have, upto, 5000):
        rows, links = [], []
        for i in range(start, min(upto, start + 5000)):
            at = T0 + timedelta(seconds=i)
            state = {"instance_ids": [10_000_000 + i], "states": [[10_000_000 + i, "SUCCESS"]]}
            rows.append(
                {
                    "key": f"{i}:run", "task_id": str(i), "conversation": "wecom:alice", "project": "etl",
                    "project_code": 1, "workflow": "order_sync", "definition_code": 2, "started_at": at,
                    "next_poll_at": at, "done": True, "state": state, "schema_version": 1,
                    "created_at": at, "updated_at": at,
                }
            )  # fmt: skip
            links.append({"instance_id": 10_000_000 + i, "watch_key": f"{i}:run"})
        with engine.begin() as conn:
            conn.execute(insert(ds_watch), rows)
            conn.execute(insert(ds_watch_instance), links)


def _old_read(store: SqlWatchStore, instance_id: int, limit: int = 2000) -> Watch | None:
    """The read `/status` did before: the newest rows decoded one by one."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(ds_watch).order_by(ds_watch.c.updated_at.desc(), ds_watch.c.key).limit(limit)
        ).all()
    for row in rows:
        w = _watch(row)
        if instance_id in w.instance_ids:
            return w
    return None


def _cpu_ms(call: Callable[[], object], calls: int = CALLS) -> float:
    call()  # warm
    t0 = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - t0) / calls * 1000


def bench(engine: Engine, sizes: list[int]) -> list[dict[str, object]]:
    store, have, out = SqlWatchStore(engine), 0, []
    for size in sizes:
        _fill(engine, size, have)
        have = size
        target = 10_000_000 + size // 2  # a run in the middle: older than the newest 2,000 from 10,000 on
        found = store.with_instance(target)
        assert found is not None and found.key == f"{size // 2}:run"
        by_key = _cpu_ms(partial(store.get, f"{size // 2}:run"))
        indexed = _cpu_ms(partial(store.with_instance, target))
        old = _cpu_ms(partial(_old_read, store, target), calls=max(5, CALLS // 20))
        out.append(
            {
                "rows": size,
                "get_by_key_ms": round(by_key, 3),
                "with_instance_ms": round(indexed, 3),
                "ratio_to_get": round(indexed / by_key, 2),
                "old_read_ms": round(old, 3),
                "old_found_it": _old_read(store, target) is not None,
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{Path(tmp) / 'status.db'}"
        if url.startswith("postgresql"):
            reset_postgres(url)
        engine = open_store_engine(url)
        try:
            print(
                json.dumps(
                    {"backend": engine.dialect.name, "calls": CALLS, "sizes": bench(engine, sizes)}, indent=2
                )
            )
        finally:
            with engine.begin() as conn:
                conn.execute(delete(ds_watch_instance))
                conn.execute(delete(ds_watch))
            engine.dispose()


if __name__ == "__main__":
    main()
