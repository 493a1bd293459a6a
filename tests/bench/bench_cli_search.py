"""`xihe search` as a fresh process vs ripgrep over the same tree, English and Chinese; prints JSON.

Run: python -m tests.bench.bench_cli_search [--cache var/eval-src] [--runs 10] [--no-serve]
Needs `rg` (apt-get install -y ripgrep). The tree is React Native 0.71.19 from npm (2,973 indexed
files, 16k units), copied into a temporary git repository and indexed once with the shipped
`config/code.yaml` (`xihe index`, which also prebuilds the Chinese dictionaries in the shared cache).
Then a real `xihe serve` (shipped xihe.yaml and access.yaml, a SQLite store in the work dir, no
model, `repos: [the tree]`) is started in the tree, and each question runs three ways, interleaved
so all see the same load: `xihe search` answered by the serve over `<index_dir>/search.sock`,
`xihe search --local` (loads the index itself), a bare `python -c pass` (the floor of any client
started with this interpreter), and ripgrep. The served search also runs as deployed
(deploy/Dockerfile, deploy/xihe.service): the `xihe` console script of a plain venv with xihe
installed from a wheel, not editable, without this interpreter's site-packages. That venv is
built with `--no-deps`, because a served search imports nothing beyond the standard library (the
bench checks its output equals the editable install's). The difference is `site`: an editable
install's finder (and any `.pth` files of the machine's Python) run at every start-up; a deployed
venv's `site` is ~2 ms. The report gives each command's median,
min and max wall seconds and the ratios of the medians (target: xihe ≤ rg). `--no-serve` times the
local path alone (as before the socket).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from xihe.tools.codeindex.heldout import fetch, load_set
from xihe.tools.codeindex.searchsock import SOCKET_NAME, ask, index_dir_named, request_line

ROOT = Path(__file__).resolve().parents[2]
XIHE = [sys.executable, "-m", "xihe.agent.cli.main"]
QUESTIONS = {
    # question -> what a person would grep for instead
    "english": ("where do we retry a failed job", ["rg", "-n", "-i", "retry|failed|job"]),
    "chinese": ("弹出警告对话框", ["rg", "-n", "-i", "alert|dialog|警告"]),
}


def _git(repo: Path, *args: str) -> None:
    cmd = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@example.invalid", *args]
    subprocess.run(cmd, check=True, capture_output=True)


def _setup(
    tmp: Path, cache: Path, env: dict[str, str], corpus: str = "react-native"
) -> tuple[Path, list[str]]:
    """A git copy of the corpus (React Native, or `jdk-ds`: bench_build's DolphinScheduler-sized
    Java tree) indexed with the shipped code.yaml (`repos` naming it, for the serve); (repo, config
    args). Kept in a `--workdir` from an earlier run: only updated."""
    repo, config = tmp / "repo", tmp / "config"
    args = ["--config", str(config)]
    if not ((repo / ".git").is_dir() and (config / "code.yaml").is_file()):
        if corpus == "jdk-ds":
            from tests.bench.bench_build import jdk_sample

            shutil.copytree(jdk_sample(ROOT / "var" / "bench-build"), repo)
        else:
            shutil.copytree(fetch(load_set("react-native-android").source, cache), repo)
        (repo / ".gitignore").write_text("var/\n", encoding="utf-8")
        _git(repo, "init", "-q")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", "corpus")
        config.mkdir()
    for name in ("xihe.yaml", "access.yaml"):
        shutil.copy(ROOT / "config" / name, config / name)
    shipped = (ROOT / "config" / "code.yaml").read_text(encoding="utf-8")
    code_yaml = shipped.replace("\nrepos: []", f"\nrepos: [{json.dumps(str(repo))}]", 1)
    assert code_yaml != shipped, "config/code.yaml has no `repos: []` line to fill"
    if (
        not (config / "code.yaml").is_file()
        or (config / "code.yaml").read_text(encoding="utf-8") != code_yaml
    ):
        (config / "code.yaml").write_text(code_yaml, encoding="utf-8")
    index = [*XIHE, *args, "index", "--quiet", "--repo", str(repo)]
    subprocess.run(index, cwd=repo, env=env, check=True, stdout=sys.stderr)  # stdout: the JSON report
    return repo, args


@contextlib.contextmanager
def _serve(
    tmp: Path, repo: Path, config: list[str], env: dict[str, str]
) -> Iterator[subprocess.Popen[bytes]]:
    """A real `xihe serve` in the tree (its relative index_dir is the CLI's), answering on the socket."""
    serve_env = env | {"XIHE_DATABASE_URL": f"sqlite:///{tmp / 'serve.db'}"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(tmp / "serve.log", "wb")  # noqa: SIM115 (closed below)
    cmd = [*XIHE, *config, "serve", "--port", str(port)]
    proc = subprocess.Popen(cmd, cwd=repo, env=serve_env, stdout=log, stderr=subprocess.STDOUT)
    try:
        sock = repo / "var" / "index" / SOCKET_NAME
        raw = (Path(config[1]) / "code.yaml").read_bytes()
        index_dir = str(sock.parent)
        assert index_dir_named(raw) == "var/index", "the serve's index_dir is var/index in the tree"
        warm = request_line(str(repo.resolve()), "warm up", 1, False, "var/index", raw.decode("utf-8"))
        assert warm is not None
        deadline = time.monotonic() + 600  # the start-up reconcile hashes every file first
        while ask(index_dir, warm, answer_seconds=120) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"xihe serve did not answer on {sock}: see {tmp / 'serve.log'}")
            time.sleep(0.5)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _deployed(tmp: Path) -> Path:
    """The `xihe` console script of a venv as deploy/Dockerfile builds it (non-editable, no system
    site-packages; `--no-deps`: a served search is standard library only). Reused from a workdir."""
    venv = tmp / "deployed-venv"
    script = venv / "bin" / "xihe"
    if not script.is_file():
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
        src = tmp / "deployed-src"  # a copy: the wheel's build writes build/ into its source tree
        shutil.rmtree(src, ignore_errors=True)
        skip = shutil.ignore_patterns(".git", ".venv", "var", "build", "*.egg-info", "test-artifacts")
        shutil.copytree(ROOT, src, ignore=skip)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", str(src)]
        subprocess.run(pip, check=True, stdout=sys.stderr)
    return script


def _same_answer(commands: dict[str, list[str]], cwd: Path, env: dict[str, str]) -> None:
    """Every served variant prints exactly what the first one prints (no silent fallback)."""
    outputs = {
        name: subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=True).stdout
        for name, cmd in commands.items()
    }
    first = next(iter(outputs.values()))
    differ = [name for name, out in outputs.items() if out != first]
    assert first and not differ, f"served searches disagree: {differ}"


def _wall(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run; CPU (user + system) is steadier on a loaded machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # stdin: nothing (ripgrep reads a piped stdin instead of the tree)
    devnull = subprocess.DEVNULL
    subprocess.run(cmd, cwd=cwd, env=env, stdin=devnull, stdout=devnull, stderr=devnull, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _summary(runs: list[tuple[float, float]]) -> dict[str, float]:
    times = [w for w, _ in runs]
    return {
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "max_s": round(max(times), 3),
        "cpu_median_s": round(statistics.median(c for _, c in runs), 3),
    }


def _question(
    commands: dict[str, list[str]], grep: list[str], repo: Path, env: dict[str, str], runs: int
) -> dict[str, object]:
    """Each xihe command and ripgrep interleaved `runs` times (after one warm-up each)."""
    timed: dict[str, list[tuple[float, float]]] = {name: [] for name in [*commands, "ripgrep"]}
    everything = {**commands, "ripgrep": grep}
    for cmd in everything.values():
        _wall(cmd, repo, env)  # warm the page cache
    for _ in range(runs):
        for name, cmd in everything.items():
            timed[name].append(_wall(cmd, repo, env))
    out: dict[str, object] = {name: _summary(t) for name, t in timed.items()}
    out["ripgrep"] = _summary(timed["ripgrep"]) | {"command": " ".join(grep)}
    rg_wall = statistics.median(w for w, _ in timed["ripgrep"])
    rg_cpu = statistics.median(c for _, c in timed["ripgrep"])
    for name in commands:
        out[f"{name}_ratio_of_medians"] = round(statistics.median(w for w, _ in timed[name]) / rg_wall, 2)
        out[f"{name}_cpu_ratio_of_medians"] = round(statistics.median(c for _, c in timed[name]) / rg_cpu, 2)
    return out


def run(
    cache: Path, runs: int, workdir: Path | None, with_serve: bool = True, corpus: str = "react-native"
) -> dict[str, object]:
    """Index once, start a serve, then time each question's `xihe search` through the serve and
    locally, interleaved with its ripgrep anchor."""
    if shutil.which("rg") is None:
        raise SystemExit("ripgrep (rg) is not installed: apt-get install -y ripgrep")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as installed: .pyc kept
    out: dict[str, object] = {"runs": runs, "load_before": round(os.getloadavg()[0], 2)}
    with contextlib.ExitStack() as stack:
        tmp = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="xihe-bench-cli-")))
        tmp.mkdir(parents=True, exist_ok=True)
        repo, config = _setup(tmp, cache, env, corpus)
        out["corpus"] = corpus
        if with_serve:
            stack.enter_context(_serve(tmp, repo, config, env))
            deployed = _deployed(tmp)
        for name, (question, grep) in QUESTIONS.items():
            search = [*XIHE, *config, "search", "--repo", str(repo)]
            commands = {
                "xihe_search_local": [*search, "--local", question],
                "python_floor": [sys.executable, "-c", "pass"],  # any Python client's start-up
            }
            if with_serve:
                # the console script as installed (`xihe = xihe.agent.cli.main:main`), without runpy
                script = Path(sys.executable).with_name("xihe")
                served = [*config, "search", "--repo", str(repo), question]
                scripted = {"xihe_script_serve": [str(script), *served]}
                commands = {
                    "xihe_search_serve": [*search, question],
                    **(scripted if script.is_file() else {}),
                    "xihe_deployed_serve": [str(deployed), *served],
                    **commands,
                    "python_floor_deployed": [str(deployed.with_name("python")), "-c", "pass"],
                }
                _same_answer({k: v for k, v in commands.items() if k.endswith("_serve")}, repo, env)
            out[name] = {"question": question, **_question(commands, grep, repo, env, runs)}
    out["load_after"] = round(os.getloadavg()[0], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default="var/eval-src", type=Path)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--workdir", type=Path, help="keep the indexed copy here for later runs")
    parser.add_argument("--no-serve", action="store_true", help="time the local path only (no serve)")
    parser.add_argument(
        "--corpus",
        default="react-native",
        choices=("react-native", "jdk-ds"),
        help="React Native, or bench_build's DolphinScheduler-sized Java tree",
    )
    args = parser.parse_args()
    workdir = args.workdir.resolve() if args.workdir else None
    report = run(args.cache.resolve(), args.runs, workdir, with_serve=not args.no_serve, corpus=args.corpus)
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
