"""Benchmark: many people at once, with a slow model, through real `xihe serve` processes.

Run: python -m tests.bench.bench_load [--only burst,slow,replicas,replicas-slow] [--users 600]
     [--chat-users 200] [--model-delay 5] [--database-url URL] [--model-concurrency N]
     [--replica-model-concurrency 16]   (prints JSON)

Every message is a signed, encrypted WeCom app callback (the fake's `CallbackSender`) posted to a
replica; replies are the app messages the loopback WeCom fake receives, timed on arrival. The model
is the loopback scripted server answering every request after `--model-delay` seconds.

- `burst`: `--users` users send one command (`/help`) each, at once, to one replica: how many replies
  came within 5 s, p50/p99/max, lost and duplicated.
- `slow`: `--chat-users` users each ask the model one question (it takes `--model-delay` s per turn)
  while half of them also send a command spread over the first seconds: commands p50/p99, free-text
  answers per second (first question sent → last answer), lost and duplicated.
- `replicas`: the same burst of commands to one replica, then split over two on PostgreSQL: messages
  per second each way, the ratio, and the CPU the replicas used (cores = CPU seconds / wall seconds)
  beside the benchmark's own (the posting clients and the WeCom fake) and PostgreSQL's: on a small
  machine the cores, not the replicas, bound this ratio.
- `replicas-slow`: `--chat-users` free-text questions to one replica, then over two on PostgreSQL,
  each replica allowed `--replica-model-concurrency` model turns at once and the model taking
  `--model-delay` s: a replica's own capacity is the limit here, so this ratio shows whether a second
  replica adds its share (0 lost, 0 duplicated checked each way).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from tests.conftest import PG_URL, reset_postgres
from tests.serve.harness import AGENT_ID, CORP_ID, SECRET, Replica, serve_config
from xihe.integrations.fakes.llm_server import ScriptedLLM, Step, say, slow
from xihe.integrations.fakes.loopback import Request, Response
from xihe.integrations.wecom.fake import FakeWeCom

MODEL_SAYS = "Nothing failed last night."
NOTE = "⏳"  # progress and "queued" notes: not answers
CLIENTS = 48  # posting threads (WeCom's own fan-out is far wider; 48 keeps 2 cores for the servers)


class TimedWeCom(FakeWeCom):
    """The WeCom fake, with the arrival time of every message it accepts, per user."""

    def __init__(self) -> None:
        super().__init__()
        self.arrivals: dict[str, list[tuple[float, str]]] = {}
        self._times = threading.Lock()

    def _send(self, req: Request) -> Response:
        resp = super()._send(req)
        now = time.monotonic()
        body = req.json() if req.body else {}
        content = (body.get(body.get("msgtype", "")) or {}).get("content", "")
        with self._times:
            for user in str(body.get("touser", "")).split("|"):
                if user:
                    self.arrivals.setdefault(user, []).append((now, content))
        return resp

    def answers(self, user: str) -> list[tuple[float, str]]:
        with self._times:
            return [a for a in self.arrivals.get(user, []) if not a[1].startswith(NOTE)]


def _all_answered(fake: TimedWeCom, users: list[str]) -> bool:
    return all(fake.answers(u) for u in users)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3) if ordered else float("nan")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _postgres_cpu() -> dict[int, float]:
    """CPU seconds of every PostgreSQL process on the machine (server and backends), by pid."""
    out: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the process ended meanwhile
            continue
        if "(postgres)" in text:
            out[int(stat.parent.name)] = _cpu_seconds(int(stat.parent.name))
    return out


def _post_all(replicas: list[Replica], messages: list[tuple[str, str, str]], sent: dict[str, float]) -> int:
    """POST (user, text, msgid) callbacks, round robin over `replicas`; records send times by msgid."""
    local = threading.local()
    failures = 0

    def post(i: int, item: tuple[str, str, str]) -> None:
        nonlocal failures
        user, text, msgid = item
        replica = replicas[i % len(replicas)]
        senders = getattr(local, "senders", None) or {}
        local.senders = senders
        sender = senders.setdefault(replica.url, replica.app_sender())
        sent[msgid] = time.monotonic()
        if sender.post_app_text(user, text, msgid, AGENT_ID).status_code != 200:
            failures += 1

    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(post, range(len(messages)), messages))
    return failures


def _wait(check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:
        time.sleep(0.1)  # waiting on other processes, not timing a window


WECOM: dict[str, Any] = {}  # wecom.yaml settings over the shipped ones (`--model-concurrency`)


def _start(
    root: Path,
    fake: FakeWeCom,
    llm: ScriptedLLM,
    db: str,
    names: Iterable[str],
    wecom: dict[str, Any] | None = None,
) -> list[Replica]:
    cfg = serve_config(root / "cfg", fake, llm_url=llm.base_url, wecom={**WECOM, **(wecom or {})})
    return [Replica(cfg, db, root, name).wait_ready() for name in names]


def _stop(replicas: list[Replica]) -> None:
    for r in replicas:
        r.terminate()


def burst(root: Path, llm: ScriptedLLM, db: str, users: int) -> dict[str, Any]:
    with TimedWeCom() as fake:
        fake.add_app(CORP_ID, SECRET, AGENT_ID)
        (replica,) = _start(root, fake, llm, db, ["burst"])
        sent: dict[str, float] = {}
        names = [f"u{i:04d}" for i in range(users)]
        started = time.monotonic()
        failures = _post_all([replica], [(u, "/help", f"b{u}") for u in names], sent)
        _wait(partial(_all_answered, fake, names), 180)
        time.sleep(1)  # a late duplicate would arrive now
        waits = [fake.answers(u)[0][0] - sent[f"b{u}"] for u in names if fake.answers(u)]
        out = {
            "users": users,
            "callbacks_failed": failures,
            "answered": len(waits),
            "within_5s": sum(w <= 5 for w in waits),
            "p50_s": _pct(waits, 0.5),
            "p99_s": _pct(waits, 0.99),
            "max_s": round(max(waits, default=float("nan")), 3),
            "duplicated": sum(len(fake.answers(u)) > 1 for u in names),
            "queued_notes": sum(len(fake.arrivals.get(u, [])) - len(fake.answers(u)) for u in names),
            "wall_s": round(time.monotonic() - started, 2),
            "cpu_s": round(_cpu_seconds(replica.proc.pid), 2),
        }
        _stop([replica])
        return out


def slow_model(root: Path, llm: ScriptedLLM, db: str, users: int) -> dict[str, Any]:
    with TimedWeCom() as fake:
        fake.add_app(CORP_ID, SECRET, AGENT_ID)
        (replica,) = _start(root, fake, llm, db, ["slow"])
        names = [f"s{i:04d}" for i in range(users)]
        commanders = names[::2]
        sent: dict[str, float] = {}
        questions = [(u, f"question from {u}: what failed last night?", f"q{u}") for u in names]
        commands = [(u, "/tasks", f"c{u}") for u in commanders]
        started = time.monotonic()
        asking = threading.Thread(target=_post_all, args=([replica], questions, sent))
        asking.start()
        for i in range(0, len(commands), 10):  # commands keep coming while the model works
            _post_all([replica], commands[i : i + 10], sent)
            time.sleep(0.3)
        asking.join()

        wanted = {u: 2 if u in commanders else 1 for u in names}
        _wait(lambda: all(len(fake.answers(u)) >= wanted[u] for u in names), 300)
        time.sleep(1)
        command_waits, chat_done = [], []
        slowest: list[tuple[float, float]] = []  # (sent, waited) seconds, from the start
        duplicated = 0
        for u in names:
            got = fake.answers(u)
            duplicated += len(got) > wanted[u]
            for at, content in got:
                if MODEL_SAYS in content:
                    chat_done.append(at)
                else:
                    command_waits.append(at - sent[f"c{u}"])
                    slowest.append((round(sent[f"c{u}"] - started, 2), round(at - sent[f"c{u}"], 3)))
        chat_span = max(chat_done, default=started) - started
        out = {
            "users": users,
            "commands": len(commands),
            "commands_answered": len(command_waits),
            "commands_p50_s": _pct(command_waits, 0.5),
            "commands_p99_s": _pct(command_waits, 0.99),
            "commands_slowest": sorted(slowest, key=lambda sw: -sw[1])[:5],  # [sent, waited]
            "free_text_answered": len(chat_done),
            "free_text_msg_per_s": round(len(chat_done) / chat_span, 2) if chat_span else None,
            "duplicated": duplicated,
            "cpu_s": round(_cpu_seconds(replica.proc.pid), 2),
        }
        _stop([replica])
        return out


def replicas(root: Path, llm: ScriptedLLM, db: str, users: int) -> dict[str, Any]:
    """The command burst on one replica, then on two: bound by the machine's cores (reported)."""
    out: dict[str, Any] = {"users": users}
    for count in (1, 2):
        out[f"{count}_replica"] = _spread(root / f"r{count}", llm, db, count, users, "/help", {})
    return _ratio(out)


def replicas_slow(root: Path, llm: ScriptedLLM, db: str, users: int) -> dict[str, Any]:
    """Free text with the slow model, each replica holding `REPLICA_SLOW` model_concurrency turns at once:
    the replica's own capacity is the limit, not the cores, so two replicas should do twice the work."""
    out: dict[str, Any] = {"users": users, "model_concurrency_per_replica": REPLICA_SLOW["model_concurrency"]}
    text = "what failed last night?"
    for count in (1, 2):
        out[f"{count}_replica"] = _spread(root / f"s{count}", llm, db, count, users, text, REPLICA_SLOW)
    return _ratio(out)


REPLICA_SLOW: dict[str, Any] = {"model_concurrency": 16}  # `--replica-model-concurrency`


def _spread(
    root: Path, llm: ScriptedLLM, db: str, count: int, users: int, text: str, wecom: dict[str, Any]
) -> dict[str, Any]:
    """`users` messages of `text`, round robin over `count` replicas on `db`: msg/s, exactly once, cores."""
    if db.startswith("postgresql"):
        reset_postgres(db)
    with TimedWeCom() as fake:
        fake.add_app(CORP_ID, SECRET, AGENT_ID)
        running = _start(root, fake, llm, db, [f"{root.name}-{i}" for i in range(count)], wecom)
        cpu0 = sum(_cpu_seconds(r.proc.pid) for r in running)
        own0 = time.process_time()
        pg0 = _postgres_cpu()
        names = [f"{root.name}u{i:04d}" for i in range(users)]
        sent: dict[str, float] = {}
        started = time.monotonic()
        _post_all(running, [(u, text, f"m{u}") for u in names], sent)
        _wait(partial(_all_answered, fake, names), 300)
        wall = max((fake.answers(u)[0][0] for u in names if fake.answers(u)), default=started) - started
        cpu = sum(_cpu_seconds(r.proc.pid) for r in running) - cpu0
        own = time.process_time() - own0
        pg = sum(cpu - pg0.get(pid, 0.0) for pid, cpu in _postgres_cpu().items())
        time.sleep(1)  # a late duplicate would arrive now
        result = {
            "msg_per_s": round(users / wall, 2),
            "answered": sum(bool(fake.answers(u)) for u in names),
            "duplicated": sum(len(fake.answers(u)) > 1 for u in names),
            "cores_used": round(cpu / wall, 2),
            "bench_cores": round(own / wall, 2),  # the posting clients and the WeCom fake
            "postgres_cores": round(pg / wall, 2) if db.startswith("postgresql") else None,
        }
        _stop(running)
        return result


def _ratio(out: dict[str, Any]) -> dict[str, Any]:
    out["ratio"] = round(out["2_replica"]["msg_per_s"] / out["1_replica"]["msg_per_s"], 2)
    out["cores_on_machine"] = os.cpu_count()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", default="burst,slow,replicas,replicas-slow")
    parser.add_argument("--users", type=int, default=600)
    parser.add_argument("--chat-users", type=int, default=200)
    parser.add_argument("--model-delay", type=float, default=5.0)
    parser.add_argument("--database-url", default="")
    parser.add_argument(
        "--model-concurrency", type=int, default=0, help="wecom.yaml model_concurrency (0: as shipped)"
    )
    parser.add_argument(
        "--replica-model-concurrency",
        type=int,
        default=REPLICA_SLOW["model_concurrency"],
        help="replicas-slow: each replica's model_concurrency",
    )
    args = parser.parse_args()
    REPLICA_SLOW["model_concurrency"] = args.replica_model_concurrency
    if args.model_concurrency:
        WECOM["model_concurrency"] = args.model_concurrency
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")

    def answer(_body: dict[str, Any]) -> Step:
        return slow(say(MODEL_SAYS), args.model_delay)

    report: dict[str, Any] = {"load_average": os.getloadavg(), "model_delay_s": args.model_delay}
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLM(responder=answer) as llm:
        root = Path(tmp)
        sqlite = f"sqlite:///{root / 'x.db'}"
        pg = args.database_url or PG_URL
        for name in args.only.split(","):
            db = pg if name.startswith("replicas") else (args.database_url or sqlite)
            if db.startswith("postgresql"):
                reset_postgres(db)
            run = {"burst": burst, "slow": slow_model, "replicas": replicas, "replicas-slow": replicas_slow}[
                name
            ]
            users = args.chat_users if name in ("slow", "replicas-slow") else args.users
            report[name] = run(root / name, llm, db, users)
            print(json.dumps({name: report[name]}), flush=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
