"""Index build and query speed on a ~15k-unit repository (React Native 0.71.19 from npm); prints JSON.

Run: python -m tests.bench.bench_index [--cache var/eval-src] [--repeat 1]
Not collected by pytest: it fetches the package once (npm) and takes about a minute.

Targets: full index <= 60 s on 2 cores, query p50 <= 50 ms in-process. The machine is shared, so
wall time moves with the load: the report gives wall and CPU seconds, the load average, and the
build's ratio to a parse-only pass (tree-sitter units of every file, no tokens or vectors) timed in
the same process, which moves with the load too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from xihe.config.code import CodeConfig
from xihe.tools.codeindex.embed import WordLlamaEmbedder
from xihe.tools.codeindex.heldout import docstring_questions, fetch, hand_written, load_set
from xihe.tools.codeindex.index import CodeIndex
from xihe.tools.codeindex.languages import Parsers
from xihe.tools.codeindex.units import units_for_file
from xihe.tools.codeindex.walk import read_source, walk_repo


def _parse_only(root: Path, cfg: CodeConfig) -> tuple[float, float, int]:
    """(wall, cpu, units) of parsing every indexed file into units and nothing else."""
    parsers, n = Parsers(), 0
    t, c = time.perf_counter(), time.process_time()
    for rel in walk_repo(root, cfg.walk):
        text = read_source(root / rel, cfg.walk.max_file_bytes)
        if text is not None:
            with contextlib.suppress(ValueError, RecursionError):  # the index falls back to windows
                n += len(units_for_file(rel, text, parsers, cfg.walk.window_lines, cfg.walk.window_overlap))
    return time.perf_counter() - t, time.process_time() - c, n


def run(cache: Path, repeat: int = 1) -> dict[str, Any]:
    """Build the index `repeat` times (best kept), then time every evaluation question as a query."""
    es = load_set("react-native-android")
    root = fetch(es.source, cache)
    cfg = CodeConfig()
    embedder = WordLlamaEmbedder()
    embedder.embed(["load the model outside the timings"])
    load_before = os.getloadavg()
    parse_wall, parse_cpu, _ = _parse_only(root, cfg)
    builds = []
    with tempfile.TemporaryDirectory(prefix="xihe-bench-") as tmp:
        for _ in range(repeat):
            idx = CodeIndex(root, Path(tmp) / "index", cfg, embedder)
            t, c = time.perf_counter(), time.process_time()
            stats = idx.build()
            builds.append((time.perf_counter() - t, time.process_time() - c))
        questions = docstring_questions(idx, es.docstring_langs, 300, skip=("template/",)) + hand_written(
            es, idx
        )
        idx.search("预热 warm up", 1)
        walls, cpus = [], []
        for q in questions:
            t, c = time.perf_counter(), time.process_time()
            idx.search(q.text, 10)
            walls.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
    wall, cpu = min(builds)
    ms = sorted(w * 1000 for w in walls)
    return {
        "repository": f"{es.source['package']} {es.source['version']} ({es.source['registry']})",
        "units": stats.units_added,
        "build_wall_seconds": round(wall, 2),
        "build_cpu_seconds": round(cpu, 2),
        "parse_only_wall_seconds": round(parse_wall, 2),
        "parse_only_cpu_seconds": round(parse_cpu, 2),
        "build_to_parse_cpu_ratio": round(cpu / parse_cpu, 2) if parse_cpu else None,
        "query_wall_ms": {
            "p50": round(statistics.median(ms), 2),
            "p95": round(ms[int(0.95 * (len(ms) - 1))], 2),
        },
        "query_cpu_ms_p50": round(statistics.median(cpus) * 1000, 2),
        "queries": len(ms),
        "load_average_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "cores": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run, print the report."""
    p = argparse.ArgumentParser(prog="bench_index")
    p.add_argument("--cache", default="var/eval-src", help="where the fetched package is kept")
    p.add_argument("--repeat", type=int, default=1, help="full builds to time (the fastest is reported)")
    args = p.parse_args(argv)
    print(json.dumps(run(Path(args.cache), args.repeat), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
