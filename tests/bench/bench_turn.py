"""Benchmark: the CPU one free-text turn costs, in-process, without load.

Run: python -m tests.bench.bench_turn [--messages 200] [--rounds 2] [--profile FILE] [--serve] (prints JSON)

Builds the bot `xihe serve` builds (the `bench_load` config: core + WeCom + ops) over the loopback
scripted model answering `say(...)` at once, and hands `Session.handle` one free-text message from each
of `--messages` distinct users (a WeCom conversation each), `--rounds` times (the second round has one
earlier task per conversation in its history). CPU is the calling thread's (`time.thread_time`): the
model fake's own thread does not count. `--profile FILE` writes a cProfile of the measured turns.

`--serve`: the same messages through a real `xihe serve` process instead, each a signed, encrypted
WeCom callback (`--batch` at once, the next batch when all are answered): the process's CPU
(/proc, every thread) per free-text message, the WeCom gateway, inbox, lanes and reply included.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from tests.bench.bench_load import TimedWeCom, _all_answered, _cpu_seconds, _post_all, _start, _stop, _wait
from tests.serve.harness import AGENT_ID, CORP_ID, SECRET, WECOM_ENV, serve_config
from xihe.agent.app import build_app
from xihe.agent.inbound import Inbound
from xihe.integrations.fakes.llm_server import ScriptedLLM, Step, say
from xihe.integrations.wecom.fake import FakeWeCom

MODEL_SAYS = "Nothing failed last night."


def _answer(body: dict[str, Any]) -> Step:
    return say(MODEL_SAYS)


def run(messages: int, rounds: int, profile: str | None) -> dict[str, Any]:
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    os.environ.update(WECOM_ENV)
    with tempfile.TemporaryDirectory() as tmp, FakeWeCom() as fake, ScriptedLLM(responder=_answer) as llm:
        root = Path(tmp)
        cfg = serve_config(root / "cfg", fake, llm_url=llm.base_url)
        app = build_app(cfg, database_url=f"sqlite:///{root / 'xihe.db'}", holder="bench-turn")
        # warm-up: imports, the token encoding, compiled statements, the HTTP pool
        app.session.handle(Inbound("warm", "wecom:warm", "what failed last night?", channel="wecom"))
        prof = cProfile.Profile() if profile else None
        out: dict[str, Any] = {"messages": messages, "rounds": rounds}
        for r in range(rounds):
            cpu: list[float] = []
            wall = time.perf_counter()
            for i in range(messages):
                user = f"u{i:04d}"
                msg = Inbound(user, f"wecom:{user}", f"what failed last night? ({r})", channel="wecom")
                t0 = time.thread_time()
                if prof:
                    prof.enable()
                reply = app.session.handle(msg)
                if prof:
                    prof.disable()
                cpu.append(time.thread_time() - t0)
                assert MODEL_SAYS in reply, reply
            out[f"round{r + 1}"] = {
                "cpu_ms_p50": round(statistics.median(cpu) * 1000, 2),
                "cpu_ms_mean": round(statistics.fmean(cpu) * 1000, 2),
                "wall_ms_per_turn": round((time.perf_counter() - wall) / messages * 1000, 2),
            }
        if prof:
            prof.dump_stats(profile)
        out["load_average"] = [round(x, 2) for x in os.getloadavg()]
        return out


def serve(messages: int, rounds: int, batch: int) -> dict[str, Any]:
    """CPU of a `xihe serve` process per free-text message through its WeCom callback."""
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    out: dict[str, Any] = {"messages": messages, "rounds": rounds, "batch": batch}
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLM(responder=_answer) as llm, TimedWeCom() as fake:
        fake.add_app(CORP_ID, SECRET, AGENT_ID)
        root = Path(tmp)
        (replica,) = _start(root, fake, llm, f"sqlite:///{root / 'x.db'}", ["turn"])
        warm = ["warm"]
        _post_all([replica], [("warm", "what failed last night?", "warm")], {})
        _wait(partial(_all_answered, fake, warm), 60)
        for r in range(rounds):
            cpu0, wall0 = _cpu_seconds(replica.proc.pid), time.monotonic()
            for start in range(0, messages, batch):
                names = [f"u{i:04d}" for i in range(start, min(messages, start + batch))]
                items = [(u, f"what failed last night? ({r})", f"m{r}{u}") for u in names]
                _post_all([replica], items, {})
                _wait(lambda: all(len(fake.answers(u)) > r for u in names), 120)  # noqa: B023
            out[f"round{r + 1}"] = {
                "cpu_ms_per_message": round((_cpu_seconds(replica.proc.pid) - cpu0) / messages * 1000, 2),
                "wall_ms_per_message": round((time.monotonic() - wall0) / messages * 1000, 2),
                "answered": sum(len(fake.answers(f"u{i:04d}")) > r for i in range(messages)),
            }
        _stop([replica])
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--profile", default=None)
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--batch", type=int, default=20)
    args = ap.parse_args()
    if args.serve:
        print(json.dumps(serve(args.messages, args.rounds, args.batch), indent=2))
    else:
        print(json.dumps(run(args.messages, args.rounds, args.profile), indent=2))


if __name__ == "__main__":
    main()
