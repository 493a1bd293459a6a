"""`xihe eval model --config DIR [--repeat K] [--json]`: the model check a team runs before going live.

It reads only the `llm:` section of DIR/xihe.yaml (validated like any config) and runs the scenario
suite of `xihe.agent.demo.model_eval` against that endpoint. Exit 0 when every scenario passed all
K repeats, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def cmd_eval_model(args: argparse.Namespace) -> int:
    from xihe.agent.app import load_config
    from xihe.agent.demo.model_eval import SCENARIOS, run_eval
    from xihe.agent.errors import ConfigError

    settings = load_config(args.config)
    llm = settings.core.llm
    if not llm.base_url:
        raise ConfigError("no model endpoint: llm.base_url is empty", "xihe.yaml", key="llm.base_url")
    only = [s.strip() for s in args.only.split(",") if s.strip()] if args.only else None
    unknown = [s for s in only or () if s not in SCENARIOS]
    if unknown:
        raise ConfigError(
            f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(SCENARIOS)}", "--only"
        )
    report = run_eval(llm.model_dump(mode="json"), repeat=args.repeat, only=only)
    print(json.dumps(report, ensure_ascii=False, indent=2) if args.json else render(report), flush=True)
    return 0 if report["passed"] else 1


def render(report: dict[str, Any]) -> str:
    """The report for people: one line per scenario with the first reason it failed, then the rates."""
    k = report["repeat"]
    lines = [f"model {report['model']} at {report['endpoint']} (profile {report['profile']}), {k} repeat(s)"]
    for s in report["scenarios"]:
        mark = "PASS" if s["pass_all"] else "FAIL"
        why = f"  — {s['failures'][0]['reason']}" if s["failures"] else ""
        lines.append(f"{mark} {s['name']:<18} {s['passed']}/{s['runs']}{why}")
    n = len(report["scenarios"])
    runs = sum(s["runs"] for s in report["scenarios"])
    passed = sum(s["passed"] for s in report["scenarios"])
    all_k = sum(s["pass_all"] for s in report["scenarios"])
    lines.append(
        f"pass rate {report['pass_rate']:.0%} ({passed}/{runs} runs); "
        f"pass^{k} {report['pass_k']:.0%} ({all_k}/{n} scenarios passed every repeat)"
    )
    return "\n".join(lines)


def _positive(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError("K must be 1 or more")
    return n


def register(evals: Any) -> None:
    """Add `eval model` to the `xihe eval` sub-parsers."""
    em = evals.add_parser("model", help="everyday conversations against the configured model endpoint")
    em.add_argument(
        "--repeat", type=_positive, default=1, metavar="K", help="run every scenario K times (pass^K)"
    )
    em.add_argument("--json", action="store_true", help="print the report as JSON")
    em.add_argument("--only", default="", help="comma-separated scenarios (default: all)")
    em.add_argument("--config", default=argparse.SUPPRESS, help="directory of YAML files (default: config)")
    em.set_defaults(func=cmd_eval_model)
