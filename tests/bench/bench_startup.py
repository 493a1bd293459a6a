"""CLI start-up: wall time of `xihe --help`, one `xihe search` and `xihe chat`; prints JSON.

Run: python -m tests.bench.bench_startup [--runs 10]
Each command runs as a fresh process (what a user waits for), against a bare `python -c pass` in the
same run as the baseline, so the report shows both the absolute medians (targets: `--help` ≤ 0.25 s,
`search` ≤ 0.4 s) and how much xihe adds to the interpreter's own start-up. The index is built with the
shipped `config/code.yaml`; the report says which channels it holds (the multilingual one is on by
default and its question vector is part of every search) and times the same search on a copy indexed
with the channel switched off, in the same run. `xihe chat` (target ≤ 0.4 s) runs on the shipped
`xihe.yaml` and `access.yaml` with a loopback model URL and no code index, twice: on a terminal (a
pseudo-terminal), the time to its first prompt and to the reply to `/tasks` typed the moment the
prompt shows (the bot is made behind the prompt: agent/cli/chat.py); and with stdin a pipe that says
`/quit`, where nothing is read before the bot is ready, the time until it has read that line and
shut down (the whole start-up).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.cli.terminals import chat_on_a_terminal, end_input, read_until

ROOT = Path(__file__).resolve().parents[2]
XIHE = [sys.executable, "-m", "xihe.agent.cli.main"]


def _median_seconds(
    cmd: list[str], runs: int, cwd: Path, env: dict[str, str], stdin: bytes | None = None
) -> tuple[float, float]:
    """Median (wall, CPU) seconds of a fresh process; CPU (user + system) is steadier on a loaded machine."""
    subprocess.run(cmd, cwd=cwd, env=env, input=stdin, check=True, capture_output=True)  # warm the page cache
    times, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, env=env, input=stdin, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return round(statistics.median(times), 3), round(statistics.median(cpu), 3)


def _prompt_seconds(cmd: list[str], runs: int, cwd: Path, env: dict[str, str]) -> dict[str, float]:
    """On a pseudo-terminal: median wall seconds to the first prompt and to the reply of `/tasks` typed
    the moment it shows, and the CPU of the whole session (Ctrl-D ends it)."""
    prompts, replies, cpus = [], [], []
    for i in range(runs + 1):  # the first warms the page cache
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        leader, proc = chat_on_a_terminal(cmd, env, cwd)
        try:
            seen = bytearray()
            read_until(leader, b"> ", seen)
            prompt = time.perf_counter() - start
            os.write(leader, b"/tasks\r")
            read_until(leader, b"no tasks yet", seen)
            reply = time.perf_counter() - start
            after_reply = bytearray(seen[seen.index(b"no tasks yet") :])
            read_until(leader, b"> ", after_reply)  # the next prompt: Ctrl-D then ends the input
            end_input(leader, proc, timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
            os.close(leader)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if i:
            prompts.append(prompt)
            replies.append(reply)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return {
        "prompt_s": round(statistics.median(prompts), 3),
        "first_reply_s": round(statistics.median(replies), 3),
        "session_cpu_s": round(statistics.median(cpus), 3),
    }


def _search_setup(tmp: Path, name: str, multilingual: bool, env: dict[str, str]) -> tuple[Path, list[str]]:
    """A copy of xihe's agent/ folder indexed with the shipped code.yaml (the channel on or off)."""
    repo = tmp / name
    shutil.copytree(ROOT / "agent", repo / "agent", ignore=shutil.ignore_patterns("__pycache__"))
    config = tmp / f"config-{name}"
    config.mkdir()
    text = (ROOT / "config" / "code.yaml").read_text(encoding="utf-8")
    if not multilingual:
        switched = text.replace("\n  multilingual: true ", "\n  multilingual: false")
        assert switched != text, "config/code.yaml no longer has `  multilingual: true`"
        text = switched
    (config / "code.yaml").write_text(text, encoding="utf-8")
    args = ["--config", str(config)]
    subprocess.run(
        [*XIHE, *args, "index", "--quiet", "--repo", str(repo)],
        cwd=repo,
        env=env,
        check=True,
        capture_output=True,
    )
    return repo, args


def _chat_setup(tmp: Path, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """`xihe chat` on the shipped core config (a loopback model that is never asked, no code index)."""
    config = tmp / "config-chat"
    config.mkdir()
    shutil.copy(ROOT / "config" / "access.yaml", config / "access.yaml")
    text = (ROOT / "config" / "xihe.yaml").read_text(encoding="utf-8")
    pointed = text.replace('\n  base_url: ""', '\n  base_url: "http://127.0.0.1:9/v1"', 1)
    assert pointed != text, 'config/xihe.yaml no longer has `  base_url: ""`'
    (config / "xihe.yaml").write_text(pointed, encoding="utf-8")
    chat_env = env | {"XIHE_DATABASE_URL": f"sqlite:///{tmp / 'chat.db'}"}
    return [*XIHE, "chat", "--config", str(config), "--user", "alice"], chat_env


def run(runs: int) -> dict[str, object]:
    """Index xihe's own agent/ folder (with and without the multilingual channel), then time the commands."""
    # PYTHONPATH (a worktree's root) is kept: the xihe being measured; .pyc files are written and used,
    # as in an installed copy (a development shell may set PYTHONDONTWRITEBYTECODE)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory(prefix="xihe-bench-startup-") as tmp:
        repo, config = _search_setup(Path(tmp), "repo", True, env)
        meta = json.loads(next((repo / "var" / "index").glob("*/meta.json")).read_text(encoding="utf-8"))
        plain, plain_config = _search_setup(Path(tmp), "plain", False, env)
        (bare, bare_cpu) = _median_seconds([sys.executable, "-c", "pass"], runs, repo, env)
        (help_s, help_cpu) = _median_seconds([*XIHE, "--help"], runs, repo, env)
        question = "resume the first unfinished step"
        (search, search_cpu) = _median_seconds(
            [*XIHE, *config, "search", "--repo", str(repo), question], runs, repo, env
        )
        (plain_s, plain_cpu) = _median_seconds(
            [*XIHE, *plain_config, "search", "--repo", str(plain), question], runs, plain, env
        )
        chat_cmd, chat_env = _chat_setup(Path(tmp), env)
        (chat_s, chat_cpu) = _median_seconds(chat_cmd, runs, Path(tmp), chat_env, b"/quit\n")
        history = {"TERM": "xterm", "XIHE_HISTORY": str(Path(tmp) / "history")}  # not the user's own
        terminal = _prompt_seconds(chat_cmd, runs, Path(tmp), chat_env | history)
    return {
        "runs": runs,
        "index_channels": {"embedder": meta["embedder"], "multilingual": meta.get("multilingual")},
        "python_bare_s": bare,
        "xihe_help_s": help_s,
        "xihe_search_s": search,
        "xihe_search_without_multilingual_s": plain_s,
        "python_bare_cpu_s": bare_cpu,
        "xihe_help_cpu_s": help_cpu,
        "xihe_search_cpu_s": search_cpu,
        "xihe_search_without_multilingual_cpu_s": plain_cpu,
        "xihe_chat_prompt_s": terminal["prompt_s"],
        "xihe_chat_first_reply_s": terminal["first_reply_s"],
        "xihe_chat_terminal_session_cpu_s": terminal["session_cpu_s"],
        "xihe_chat_s": chat_s,
        "xihe_chat_cpu_s": chat_cpu,
        "chat_target_s": 0.4,
        "help_target_s": 0.25,
        "search_target_s": 0.4,
        "help_over_bare": round(help_s / bare, 1),
        "search_over_bare": round(search / bare, 1),
        "chat_over_bare": round(chat_s / bare, 1),
        "chat_prompt_over_bare": round(terminal["prompt_s"] / bare, 1),
        "load": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    print(json.dumps(run(parser.parse_args().runs), indent=2))


if __name__ == "__main__":
    main()
