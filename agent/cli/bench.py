"""`xihe bench core`: what the spine adds to one tool call (validate + gate + task_step + audit).

The same echo call is timed bare (the tool's run function alone) and through the full path,
in the same process, and reported as medians, p99s and their ratio.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from xihe.agent.gate import decide, identify
from xihe.agent.registry import ToolContext, ToolSpec


class _EchoArgs(BaseModel):
    text: str = Field(description="text to echo")


def _echo(args: _EchoArgs, ctx: ToolContext) -> dict[str, str]:
    return {"echo": args.text}


ECHO = ToolSpec(name="bench_echo", description="echo", args=_EchoArgs, run=_echo)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _one_backend(url: str, n: int, workdir: Path) -> dict[str, Any]:
    from xihe.agent.app import build_app

    cfg = workdir / "cfg"
    cfg.mkdir(exist_ok=True)
    (cfg / "xihe.yaml").write_text(yaml.safe_dump({"plugins": ["xihe.agent.cli.bench:ECHO"]}))
    (cfg / "access.yaml").write_text(
        yaml.safe_dump(
            {
                "roles": {"dev": {"tools": ["*"], "environments": ["test"]}},
                "users": {"bench": {"roles": ["dev"]}},
            }
        )
    )
    app = build_app(cfg, database_url=url, holder="bench")
    deps, registry = app.deps, app.registry
    task = deps.tasks.create(
        kind="bench", owner="bench", conversation="bench", goal="bench", now=deps.clock()
    )
    who = identify("bench", deps.settings.access)
    raw = '{"text": "hello"}'
    spec = registry.get("bench_echo")
    ctx = ToolContext(deps, task.id, "bare", "bench", "bench", deps.clock())
    bare, full = [], []
    for i in range(n + n // 10):  # the first tenth warms caches and connections
        t0 = time.perf_counter()
        spec.run(spec.args.model_validate_json(raw), ctx)
        t1 = time.perf_counter()
        call = registry.parse("bench_echo", raw)
        decision = decide(
            call.spec.name,
            call.spec.risk_for(call.subject, deps),
            call.spec.environment(call.subject, deps),
            who,
            deps.settings.access,
        )
        app.agent.executor.run(task, f"tool:{i}:0", call, intent="bench", reason=decision.reason)
        t2 = time.perf_counter()
        if i >= n // 10:
            bare.append(t1 - t0)
            full.append(t2 - t1)
    app.deps.engine.dispose()
    med_bare, med_full = statistics.median(bare), statistics.median(full)
    return {
        "backend": url.split(":", 1)[0],
        "calls": n,
        "bare_median_ms": round(med_bare * 1000, 4),
        "full_median_ms": round(med_full * 1000, 4),
        "bare_p99_ms": round(_pct(bare, 0.99) * 1000, 4),
        "full_p99_ms": round(_pct(full, 0.99) * 1000, 4),
        "overhead_median_ms": round((med_full - med_bare) * 1000, 4),
        "ratio_median": round(med_full / med_bare, 1),
        "target_median_ms_sqlite": 1.0,
    }


def bench_core(n: int = 2000, database_url: str | None = None) -> dict[str, Any]:
    """Run on a temporary SQLite file, plus PostgreSQL when a URL is given (or XIHE_TEST_PG_URL is set)."""
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "sqlite").mkdir()
        results.append(_one_backend(f"sqlite:///{work / 'bench.db'}", n, work / "sqlite"))
        pg = database_url or os.environ.get("XIHE_TEST_PG_URL")
        if pg:
            (work / "pg").mkdir()
            results.append(_one_backend(pg, n, work / "pg"))
    return {
        "benchmark": "core per-call overhead (validate + gate + task_step x2 + audit)",
        "results": results,
    }
