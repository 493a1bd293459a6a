"""Benchmark: `load_dir` on hostile inputs at the size cap, as a ratio to parsing a flat file.

Run: python -m tests.bench.bench_config_check  (prints JSON). Each case writes one xihe.yaml just
under `MAX_BYTES` and times the whole check (read, compose, key index, validation, error lines)
against libyaml's event parse of a flat file of the same size, in the same process. A linear check is
a small constant ratio; the old per-error line lookup was quadratic (> 120 s for 5 MB).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from xihe.agent.app import load_config
from xihe.agent.errors import ConfigError
from xihe.config.yamlmodel import MAX_BYTES


def _fill(line: Callable[[int], str]) -> str:
    out, size, i = [], 0, 0
    while size + len(line(i)) < MAX_BYTES:
        out.append(line(i))
        size += len(line(i))
        i += 1
    return "".join(out)


CASES = {
    "unknown_top_level_keys": _fill(lambda i: f"unknown_{i}: {i}\n"),
    "unknown_nested_keys": "loop:\n" + _fill(lambda i: f"  unknown_{i}: {i}\n"),
    "long_unknown_list": "tools:\n" + _fill(lambda i: f"  - tool_{i}\n"),
    "deep_flow_nesting": "llm: " + "[" * (MAX_BYTES // 2 - 8) + "]" * (MAX_BYTES // 2 - 8) + "\n",
}


def _time(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    with contextlib.suppress(ConfigError):
        fn()
    return time.perf_counter() - start


def run() -> dict[str, dict[str, float]]:
    """Seconds and ratio (check / libyaml event parse of a flat file of that size) per case."""
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        flat = CASES["unknown_top_level_keys"]
        events = _time(lambda: sum(1 for _ in yaml.parse(flat, Loader=yaml.CSafeLoader)))
        for name, text in CASES.items():
            (d / "xihe.yaml").write_text(text, encoding="utf-8")
            check = _time(lambda: load_config(d))
            report[name] = {
                "bytes": len(text),
                "parse_s": round(events, 3),
                "check_s": round(check, 3),
                "ratio": round(check / events, 1),
            }
    return report


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
