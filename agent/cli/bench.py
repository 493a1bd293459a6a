"""`xihe bench core`: what the spine adds to one tool call (validate + gate + task_step + audit).

The same echo call is timed bare (the tool's run function alone) and through the full path,
in the same process, and reported as medians, p99s and their ratio. On SQLite its anchors run in the
same loop (`bench_anchors`): LangGraph's durable step and the plain sqlite3 floor, with xihe's ratio
to each (wall and CPU).
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

from xihe.agent.cli.bench_anchors import Step, langgraph_step, sqlite_floor
from xihe.agent.gate import decide, identify
from xihe.agent.registry import ToolContext, ToolSpec


class _EchoArgs(BaseModel):
    text: str = Field(description="text to echo")


def _echo(args: _EchoArgs, ctx: ToolContext) -> dict[str, str]:
    return {"echo": args.text}


ECHO = ToolSpec(name="bench_echo", description="echo", args=_EchoArgs, run=_echo)
BLOCK = 50  # calls of one contender in a row before the next one's turn


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _timed(step: Step, i: int, wall: list[float], cpu: list[float]) -> None:
    w0, c0 = time.perf_counter(), time.process_time()
    step(i)
    cpu.append(time.process_time() - c0)
    wall.append(time.perf_counter() - w0)


def _summary(wall: list[float], cpu: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(wall) * 1000, 4),
        "p99_ms": round(_pct(wall, 0.99) * 1000, 4),
        "cpu_median_ms": round(statistics.median(cpu) * 1000, 4),
    }


def _one_backend(url: str, n: int, workdir: Path, anchors: dict[str, Step] | None = None) -> dict[str, Any]:
    """Time the bare call, xihe's full path and each anchor, interleaved in blocks of `BLOCK` calls.

    Blocks rather than single calls: one contender's garbage and threads (LangGraph's executor) do
    not land in another's timings, and the machine's load is still shared evenly.
    """
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

    def bare() -> None:
        spec.run(spec.args.model_validate_json(raw), ctx)

    def full(i: int) -> None:
        call = registry.parse("bench_echo", raw)
        decision = decide(
            call.spec.name,
            call.spec.risk_for(call.subject, deps),
            call.spec.environment(call.subject, deps),
            who,
            deps.settings.access,
        )
        app.agent.executor.run(task, f"tool:{i}:0", call, intent="bench", reason=decision.reason)

    others = anchors or {}
    contenders: dict[str, Step] = {"bare": lambda i: bare(), "xihe": full, **others}
    times: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in contenders}
    warm = max(1, n // 10)
    for start in range(0, n + warm, BLOCK):  # round robin in blocks: the same load for all, each one warm
        for name, step in contenders.items():
            for i in range(start, min(start + BLOCK, n + warm)):
                wall, cpu = times[name] if i >= warm else ([], [])  # the first tenth warms caches
                _timed(step, i, wall, cpu)
    app.deps.engine.dispose()
    bare_s, full_s = _summary(*times["bare"]), _summary(*times["xihe"])
    out: dict[str, Any] = {
        "backend": url.split(":", 1)[0],
        "calls": n,
        "bare_median_ms": bare_s["median_ms"],
        "full_median_ms": full_s["median_ms"],
        "bare_p99_ms": bare_s["p99_ms"],
        "full_p99_ms": full_s["p99_ms"],
        "full_cpu_median_ms": full_s["cpu_median_ms"],
        "overhead_median_ms": round(full_s["median_ms"] - bare_s["median_ms"], 4),
        "ratio_median": round(full_s["median_ms"] / bare_s["median_ms"], 1),
        "target_median_ms_sqlite": 1.0,
    }
    for name in others:
        s = _summary(*times[name])
        out[name] = {
            **s,
            "xihe_ratio_median": round(full_s["median_ms"] / s["median_ms"], 2),
            "xihe_ratio_cpu_median": round(full_s["cpu_median_ms"] / s["cpu_median_ms"], 2),
        }
    return out


def bench_core(n: int = 2000, database_url: str | None = None) -> dict[str, Any]:
    """Run on a temporary SQLite file, plus PostgreSQL when a URL is given (or XIHE_TEST_PG_URL is set).

    On SQLite the anchors run in the same loop (see `bench_anchors`): LangGraph's durable step when the
    `bench` extra is installed, and the plain sqlite3 floor.
    """
    results = []
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "sqlite").mkdir()
        anchors: dict[str, Step] = {}
        langgraph, langgraph_note = langgraph_step(work / "langgraph.db")
        if langgraph is not None:
            anchors["langgraph"] = langgraph
        anchors["sqlite3_floor"] = sqlite_floor(work / "floor.db")
        one = _one_backend(f"sqlite:///{work / 'bench.db'}", n, work / "sqlite", anchors)
        one["langgraph_anchor"] = langgraph_note
        results.append(one)
        pg = database_url or os.environ.get("XIHE_TEST_PG_URL")
        if pg:
            (work / "pg").mkdir()
            results.append(_one_backend(pg, n, work / "pg"))
    return {
        "benchmark": "core per-call overhead (validate + gate + task_step x2 + audit)",
        "load_average": [round(x, 2) for x in load],
        "results": results,
    }
