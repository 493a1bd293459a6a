"""`xihe fakes up [--dir DIR]`: the loopback fakes on their own, so `xihe chat` and `xihe serve` can be tried
without a model, DolphinScheduler or WeCom.

It writes (or, for a kept demo directory, re-points) DIR/config at the fakes, writes DIR/fakes.env
with the fakes' own secrets and the web UI logins, prints what to type next and runs until Ctrl-C.
The model answers after `--model-delay` seconds (a slow model). The DolphinScheduler simulator follows real time; its runs take `--task-seconds` per task, and its
instance ids go on from the last run in DIR. Whatever the WeCom robot and SMTP sinks receive (the
alerts) is printed as it arrives and appended to DIR/sinks.log.
"""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path
from typing import Any

DEFAULT_DIR = "xihe-fakes"
SINKS_LOG = "sinks.log"  # what the robot and SMTP sinks received, beside the config


def cmd_fakes_up(args: argparse.Namespace) -> int:
    from xihe.agent.clock import FakeClock, utc_now
    from xihe.agent.demo.environment import (
        SIM_STATE,
        WEB_URL,
        point_config_at,
        running_fakes,
        source_repo,
        write_config,
        write_env_file,
    )
    from xihe.integrations.fakes.llm_server import ScriptedLLM, Step, slow
    from xihe.integrations.fakes.rules_llm import respond

    def answer(body: dict[str, Any]) -> Step:
        return slow(respond(body), args.model_delay)  # a slow model, for trying load (0: at once)

    root = Path(args.dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    clock = FakeClock(utc_now())
    llm = ScriptedLLM(model="fake-rules", responder=answer)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    fakes_on = running_fakes(
        clock, llm, task_seconds=args.task_seconds, fail_retries=0, state=root / SIM_STATE
    )
    with fakes_on as fakes, (root / SINKS_LOG).open("a", encoding="utf-8") as sinks:
        config = root / "config"
        if (config / "xihe.yaml").exists():
            point_config_at(config, fakes)
            what = "re-pointed"
        else:
            db = f"sqlite:///{root / 'xihe.db'}"
            write_config(config, fakes, db=db, repo=source_repo(root), index_dir=root / "index")
            what = "wrote"
        write_env_file(root / "fakes.env", fakes.env())
        _index_repos(config)
        print(
            f"fakes up: model {fakes.llm.base_url}, DolphinScheduler {fakes.sim.version} {fakes.sim.url}, "
            f"WeCom robot {fakes.robot.url}, SMTP {fakes.smtp.host}:{fakes.smtp.port}\n"
            f"{what} {config}; secrets for the fakes and the web UI logins in {root / 'fakes.env'}\n"
            "In another terminal:\n"
            f"  set -a; . {root}/fakes.env; set +a\n"
            f"  xihe chat --config {config} --user alice      # try: 把订单同步任务补跑一下昨天的\n"
            f"  xihe serve --config {config}                  # web UI: {WEB_URL}/ui (dave, demo-ui-dave)\n"
            f"What the WeCom robot and SMTP sinks receive shows here and in {root / SINKS_LOG}.\n"
            "Ctrl-C stops the fakes.",
            flush=True,
        )
        seen: dict[str, int] = {}
        while not stop.wait(1.0):  # the simulator follows the wall clock
            fakes.sim.advance(max(0.0, (utc_now() - clock()).total_seconds()))
            fakes.save_state()
            for message in fakes.received(seen):
                print(message, flush=True)
                sinks.write(f"{utc_now().isoformat(timespec='seconds')} {message}\n")
                sinks.flush()
    print("fakes down", flush=True)
    return 0


def _index_repos(config: Path) -> None:
    """Build the code index `xihe serve` would build in the background, so chat can search at once."""
    from xihe.config.code import load_file
    from xihe.tools.codeindex.service import index_repo

    code = load_file(config)
    for repo in code.repos:
        print(f"indexing {repo} …", flush=True)
        index_repo(Path(repo), code)


def register(sub: Any) -> None:
    """Add `fakes up` to the xihe sub-parsers."""
    fakes = sub.add_parser("fakes", help="the loopback fakes (model, DolphinScheduler, WeCom robot, SMTP)")
    fakes_sub = fakes.add_subparsers(dest="fakes_command", required=True)
    up = fakes_sub.add_parser("up", help="run the fakes and write a config for them; Ctrl-C stops")
    up.add_argument(
        "--dir", default=DEFAULT_DIR, help=f"config, store and fakes.env go here (default {DEFAULT_DIR})"
    )
    up.add_argument(
        "--task-seconds", type=int, default=10, help="how long each simulated task runs (default 10)"
    )
    up.add_argument(
        "--model-delay", type=float, default=0.0, help="seconds the model takes per answer (default 0)"
    )
    up.set_defaults(func=cmd_fakes_up)
