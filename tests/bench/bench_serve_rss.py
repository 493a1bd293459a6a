"""Benchmark: the memory of a `xihe serve` with a large code index loaded, before and after 1,000 messages.

Run: python -m tests.bench.bench_serve_rss [--messages 1000] [--users 100] [--batch 50]
     [--corpus react-native|jdk-ds] [--workdir DIR] [--cache var/eval-src] [--no-baseline] [--probe-trim]

The index is React Native 0.71.19 from npm (2,973 files, 16k units), the tree and index of
`bench_cli_search` (a git copy indexed once with the shipped `config/code.yaml`; kept in `--workdir`),
or with `--corpus jdk-ds` bench_build's DolphinScheduler-sized Java tree (4,513 files, 23,832 units).
A real `xihe serve` (the `bench_load` config: core + WeCom + ops over the loopback fakes, SQLite) gets
that code.yaml (`repos` naming the tree, `index_dir` absolute) and, once its search socket answers
(the index loaded, one search done), `--messages` signed, encrypted WeCom callbacks from `--users`
people, `--batch` at a time: a third `/help`, a third `/status` (not configured here: the reply says
so), a third questions about the code, which the scripted model answers by calling `search_code`
(varied questions, English and Chinese) and then a short reply. VmRSS and VmHWM (/proc) of the serve
are read at start and after the messages; the baseline is the same serve and the same messages without
code.yaml (no code feature: the model's `search_code` calls come back as unknown tools, then it
answers). Target: ≤ 300 MiB after.
`--probe-trim`: then `gdb` makes the serve call glibc's `malloc_trim(0)` and memory is read again (what
of `after` is freed C heap memory not yet given back to the system).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from tests.bench.bench_cli_search import _setup
from tests.bench.bench_load import TimedWeCom, _cpu_seconds, _post_all, _wait
from tests.serve.harness import AGENT_ID, CORP_ID, SECRET, Replica, serve_config
from xihe.integrations.fakes.llm_server import ScriptedLLM, Step, call, say
from xihe.tools.codeindex.searchsock import ask, index_dir_named, request_line

ROOT = Path(__file__).resolve().parents[2]
TOPICS = [
    "where do we retry a failed job",
    "how is a headless JS task started",
    "which class measures text layout",
    "where are touch events dispatched to views",
    "how does the bridge call a native module method",
    "where is the image cache cleared",
    "how are animated values interpolated",
    "which code reads the accessibility settings",
    "弹出警告对话框",
    "网络请求超时重试",
    "滚动视图的惯性滑动",
    "键盘弹出时调整布局",
]
SAID = "Here is what the code search found."


def _answer(body: dict[str, Any]) -> Step:
    """The model fake: a code question is searched once, then answered; anything else answered at once."""
    last = body["messages"][-1]
    if last.get("role") == "tool":
        return say(SAID)
    text = str(last.get("content") or "")
    for topic in TOPICS:
        if topic in text:
            return call("search_code", query=text, k=10)
    return say("Nothing failed last night.")


def _memory(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of a process, MiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[f"{key}_MiB"] = round(int(value.split()[0]) / 1024, 1)
    return out


def _messages(n: int, users: int) -> list[tuple[str, str, str]]:
    """(user, text, msgid): /help, /status and code questions in turn, users round robin."""
    out = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            text = "/help"
        elif kind == 1:
            text = "/status 1024"
        else:
            topic = TOPICS[(i // 3) % len(TOPICS)]
            text = f"{topic} ({i})" if (i // 3) % 5 else topic  # the same question asked again, and new ones
        out.append((f"u{i % users:03d}", text, f"m{i:05d}"))
    return out


def _config(root: Path, fake: TimedWeCom, llm: ScriptedLLM, repo: Path | None) -> Path:
    cfg = serve_config(root / "cfg", fake, llm_url=llm.base_url)
    access = yaml.safe_load((cfg / "access.yaml").read_text(encoding="utf-8"))
    access["unknown_user_roles"] = ["viewer"]  # the bench's people may search the code
    (cfg / "access.yaml").write_text(yaml.safe_dump(access), encoding="utf-8")
    if repo is not None:
        shipped = (ROOT / "config" / "code.yaml").read_text(encoding="utf-8")
        text = shipped.replace("\nrepos: []", f"\nrepos: [{json.dumps(str(repo))}]", 1)
        text = text.replace(
            "\nindex_dir: var/index", f"\nindex_dir: {json.dumps(str(repo / 'var' / 'index'))}", 1
        )
        assert text.count(str(repo)) == 2, (
            "config/code.yaml lacks the `repos: []` or `index_dir: var/index` line"
        )
        (cfg / "code.yaml").write_text(text, encoding="utf-8")
    return cfg


def _index_loaded(cfg: Path, repo: Path, proc_alive: Any) -> None:
    """Until the serve's search socket answers (its index is loaded and searched once)."""
    raw = (cfg / "code.yaml").read_bytes()
    index_dir = index_dir_named(raw)
    assert index_dir is not None
    request = request_line(str(repo.resolve()), "warm up", 1, False, index_dir, raw.decode("utf-8"))
    assert request is not None
    deadline = time.monotonic() + 900  # the start-up reconcile hashes every file first
    while ask(index_dir, request, answer_seconds=120) is None:
        if not proc_alive() or time.monotonic() > deadline:
            raise SystemExit("xihe serve's search socket never answered")
        time.sleep(0.5)


def run_one(
    repo: Path | None, messages: int, users: int, batch: int, probe_trim: bool = False
) -> dict[str, Any]:
    """One serve (with the code index when `repo` is given): memory at start and after the messages."""
    with tempfile.TemporaryDirectory(prefix="xihe-bench-rss-") as tmp, ScriptedLLM(responder=_answer) as llm:
        root = Path(tmp)
        with TimedWeCom() as fake:
            fake.add_app(CORP_ID, SECRET, AGENT_ID)
            cfg = _config(root, fake, llm, repo)
            replica = Replica(cfg, f"sqlite:///{root / 'x.db'}", root, "rss").wait_ready(timeout=120)
            try:
                if repo is not None:
                    _index_loaded(cfg, repo, lambda: replica.proc.poll() is None)
                pid = replica.proc.pid
                out: dict[str, Any] = {"code_index": repo is not None, "start": _memory(pid)}
                items = _messages(messages, users)
                sent: dict[str, int] = {}
                cpu0, wall0 = _cpu_seconds(pid), time.monotonic()
                for first in range(0, len(items), batch):
                    part = items[first : first + batch]
                    for user, _, _ in part:
                        sent[user] = sent.get(user, 0) + 1
                    _post_all([replica], part, {})
                    users_now = {u for u, _, _ in part}
                    _wait(lambda: all(len(fake.answers(u)) >= sent[u] for u in users_now), 120)  # noqa: B023
                    if first == 0:
                        out["after_first_batch"] = _memory(pid)
                out["after"] = _memory(pid)
                if probe_trim:  # how much of `after` is the C heap's free memory not given back
                    trim = ["gdb", "-p", str(pid), "-batch", "-ex", "call (int) malloc_trim(0)"]
                    subprocess.run(trim, capture_output=True, timeout=120, check=False)
                    out["after_malloc_trim"] = _memory(pid)
                out["answered"] = sum(min(len(fake.answers(u)), n) for u, n in sent.items())
                out["messages"] = len(items)
                out["serve_cpu_s"] = round(_cpu_seconds(pid) - cpu0, 2)
                out["wall_s"] = round(time.monotonic() - wall0, 1)
                out["model_requests"] = len(llm.requests)
                out["search_code_calls"] = sum(
                    1
                    for a in llm.answers
                    for c in a.get("tool_calls") or []
                    if c["function"]["name"] == "search_code"
                )
            finally:
                replica.terminate()
    return out


def run(
    cache: Path,
    workdir: Path,
    messages: int,
    users: int,
    batch: int,
    baseline: bool,
    probe_trim: bool,
    corpus: str = "react-native",
) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    repo, _ = _setup(workdir, cache, env, corpus)
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    out: dict[str, Any] = {"load_before": round(os.getloadavg()[0], 2)}
    if baseline:
        out["without_code_index"] = run_one(None, messages, users, batch, probe_trim)
    out["with_code_index"] = run_one(repo, messages, users, batch, probe_trim)
    if baseline:
        out["rss_over_baseline_after_MiB"] = round(
            out["with_code_index"]["after"]["VmRSS_MiB"] - out["without_code_index"]["after"]["VmRSS_MiB"], 1
        )
    out["target_MiB"] = 300
    out["met"] = out["with_code_index"]["after"]["VmRSS_MiB"] <= 300
    out["load_after"] = round(os.getloadavg()[0], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--cache", default="var/eval-src", type=Path)
    parser.add_argument(
        "--corpus",
        default="react-native",
        choices=("react-native", "jdk-ds"),
        help="the indexed tree: React Native, or bench_build's DolphinScheduler-sized Java tree",
    )
    parser.add_argument(
        "--workdir", type=Path, help="the tree and index (default var/bench-cli, or var/bench-cli-jdk-ds)"
    )
    parser.add_argument("--no-baseline", action="store_true", help="only the serve with the code index")
    parser.add_argument(
        "--probe-trim", action="store_true", help="then gdb calls malloc_trim(0) in the serve: memory again"
    )
    args = parser.parse_args()
    workdir = args.workdir or Path(
        "var/bench-cli" if args.corpus == "react-native" else f"var/bench-cli-{args.corpus}"
    )
    report = run(
        args.cache.resolve(),
        workdir.resolve(),
        args.messages,
        args.users,
        args.batch,
        not args.no_baseline,
        args.probe_trim,
        args.corpus,
    )
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
