"""`xihe demo`: the whole product on loopback fakes, as a transcript.

Everything is real except the outside services: the `openai` client talks to a scripted model
server, the DolphinScheduler client to the simulator, the alert deliverer to a WeCom robot sink and
an SMTP sink. The store is SQLite in a temporary directory; time is a simulated clock shared by the
bot and the fakes, so polling and alert windows play out in seconds.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from xihe.agent.app import App, build_app
from xihe.agent.clock import FakeClock, utc_now
from xihe.agent.demo.alert_card import scene_alert_card
from xihe.agent.demo.alert_life import scene_alert_lifecycle
from xihe.agent.demo.cards import scene_cards
from xihe.agent.demo.environment import (
    SIM_STATE,
    Fakes,
    running_fakes,
    source_repo,
    write_config,
    write_env_file,
)
from xihe.agent.demo.mcp import scene_mcp
from xihe.agent.errors import BotError
from xihe.agent.inbound import Inbound
from xihe.agent.web.ui.run_facts import read_run
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say, slow
from xihe.tools.dolphin.names import names_of
from xihe.tools.dolphin.store import SqlCatalogStore


@dataclass
class Demo:
    """The running fakes, the bot, and what the bot posted outside a reply."""

    root: Path
    clock: FakeClock
    fakes: Fakes
    config: Path
    db: str
    app: App | None = None
    posted: list[tuple[str, str]] = field(default_factory=list)
    verbose: bool = True

    @property
    def llm(self) -> ScriptedLLM:
        return self.fakes.llm

    @property
    def sim(self) -> DolphinSimulator:
        return self.fakes.sim

    def out(self, text: str = "") -> None:
        if self.verbose:
            print(text, flush=True)

    def scene(self, title: str) -> None:
        self.out(f"\n=== {title} ===")

    def bot(self) -> App:
        if self.app is None:
            self.app = build_app(
                self.config,
                clock=self.clock,
                database_url=self.db,
                holder="demo",
                notify=lambda c, t: self._posted(c, t),
            )
        return self.app

    def _posted(self, conversation: str, text: str) -> None:
        self.posted.append((conversation, text))
        self.out(_indent(f"[xihe → {conversation}] {text}"))

    def say(self, user: str, text: str, conversation: str | None = None) -> str:
        self.out(f"{user}> {text}")
        reply = self.bot().session.handle(Inbound(user, conversation or f"cli:{user}", text, "cli"))
        self.out(_indent(f"xihe> {reply}"))
        return reply

    def jobs(self, *ids: str) -> None:
        """Run the bot's scheduler jobs `ids` once each, the way the scheduler does."""
        from xihe.agent.scheduler import all_jobs, run_job

        jobs = {j.id: j for j in all_jobs(self.bot())}
        for job_id in ids:
            run_job(self.bot(), jobs[job_id])

    def tool_results(self, since: int) -> list[str]:
        """Tool results the model received in requests after `since`."""
        return [
            m["content"]
            for request in self.llm.requests[since:]
            for m in request.get("messages", [])[-1:]
            if m.get("role") == "tool"
        ]


def _indent(text: str) -> str:
    return textwrap.indent(text, "    ", lambda line: True)


@contextmanager
def demo_environment(verbose: bool = True, keep: Path | None = None) -> Iterator[Demo]:
    """Start every fake, write a config pointing at them, and clean up afterwards.

    With `keep`, the directory (config, SQLite store, code index, fakes.env) stays for `xihe chat`,
    `xihe serve` and `xihe fakes up --dir` to use afterwards.
    """
    with ExitStack() as stack:
        if keep is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="xihe-demo-")))
        else:
            root = keep.resolve()
            if root.exists() and any(root.iterdir()):
                raise BotError(f"--keep {keep}: the directory is not empty; name a new or empty one")
            root.mkdir(parents=True, exist_ok=True)
        # simulated time starts in the past so it can be moved to the real now before the crash scene,
        # where a separate process writes step times with the real clock
        clock = FakeClock(utc_now().replace(microsecond=0) - timedelta(hours=3))
        # the model server plays Qwen3 on vLLM without parsers: <think> and <tool_call> come as text
        state = root / SIM_STATE if keep is not None else None  # `fakes up --dir` goes on from its ids
        llm = ScriptedLLM(model="scripted-demo", mode="qwen")
        fakes = stack.enter_context(running_fakes(clock, llm, state=state))
        saved = {k: os.environ.get(k) for k in fakes.env()}
        os.environ.update(fakes.env())
        db = f"sqlite:///{root / 'xihe.db'}"
        demo = Demo(root, clock, fakes, root / "config", db, verbose=verbose)
        write_config(demo.config, fakes, db=db, repo=source_repo(root), index_dir=root / "index")
        if keep is not None:
            write_env_file(root / "fakes.env", fakes.env())
        try:
            yield demo
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            if demo.app is not None:
                demo.app.deps.engine.dispose()


def _follow_run(d: Demo, seconds: int = 900, step: int = 30) -> None:
    """Move simulated time and let the poll job follow the run (what `xihe serve` does on its own)."""
    for _ in range(seconds // step):
        d.clock.advance(step)
        d.jobs("ds_poll")


def scene_code_question(d: Demo) -> None:
    d.scene("1. Where is it in the code? (read tools: no confirmation, cited paths are checked)")
    d.jobs("code_reconcile")
    d.llm.add(
        call("search_code", query="confirm pending action bound to user conversation", k=5),
        say(
            "确认绑定在 `agent/pending.py` 的 `PendingStore.confirm` 里：只有同一用户、同一会话、未过期时，"
            "一次条件 UPDATE 才会把 pending 改成 confirmed。"
        ),
    )
    before = len(d.llm.requests)
    d.say("alice", "确认操作是在哪里绑定到用户和会话的？")
    wrote = " ".join(str(d.llm.answers[0]["content"]).split())
    d.out(_indent(f"(the model server wrote, as Qwen3 on vLLM without parsers does)\n{wrote[:150]}…"))
    for shown in d.tool_results(before):
        head = "\n".join(shown.splitlines()[:6])
        d.out(_indent(f"(the model saw)\n{head}\n…"))
    # who calls it: the symbol graph resolves `deps.pending.confirm(...)` through the types it reads
    d.llm.add(
        call("find_callers", symbol="PendingStore.confirm"),
        say("`PendingStore.confirm` 由 `agent/action_commands.py` 的 `confirm`（/confirm 命令）调用。"),
    )
    before = len(d.llm.requests)
    d.say("alice", "谁调用了 PendingStore.confirm？")
    for shown in d.tool_results(before):
        d.out(_indent(f"(the model saw)\n{chr(10).join(shown.splitlines()[:4])}"))


def scene_backfill(d: Demo) -> None:
    d.scene("2. Backfill by natural date (a write: the gate asks, /confirm releases it, the run is followed)")
    d.llm.add(
        call("trigger_dolphinscheduler", workflow="订单同步", dates="昨天"),
        say("已提交订单同步（order_sync）昨天的补数，我会跟踪到结束。"),
    )
    d.say("alice", "把订单同步任务补跑一下昨天的")
    d.say("alice", "/confirm")
    start = d.sim.starts[-1] if d.sim.starts else None
    if start is not None:
        d.out(_indent(f"(DolphinScheduler received scheduleTime={start.get('scheduleTime')})"))
    _follow_run(d)


def scene_prod_failure(d: Demo) -> None:
    d.scene(
        "3. A production run: an approver releases it, it fails, on-call gets one P0 alert "
        "(the link in DolphinScheduler's error arrives as text, not as a link)"
    )
    d.say("bob", "/run 支付对账 2026-12-01")
    d.say("bob", "/confirm")
    pending = d.bot().deps.pending.open_for(user_id="bob", statuses=("pending", "confirmed"))
    if pending:
        d.say("carol", f"/approve {pending[0].id}", conversation="cli:carol")
    _follow_run(d, seconds=1200)
    for _ in range(4):  # alert windows on the simulated clock
        d.clock.advance(15)
        d.jobs("alerts_flush", "alerts_deliver")
    received = d.fakes.received({})
    for message in received:
        d.out(_indent(message))
    _open_run_page(d, received)


def _open_run_page(d: Demo, alerts: list[str]) -> None:
    """Follow the alert's 运行详情 link: what the run page (`/ui/runs/ID`, run_facts.py) says failed."""
    found = next((m for a in alerts if (m := re.search(r"\((http[^)\s]*/ui/runs/(\d+))\)", a))), None)
    if found is None:
        d.out(_indent("[run page] the alert has no /ui/runs/ link"))
        return
    facts = read_run(d.bot().deps, int(found.group(2)))
    lines = [f"[run page {found.group(1)}] state {facts.state or '-'} {facts.problem}".rstrip()]
    lines += [f"  failed task {t.name} on {t.host or '-'}: {t.error}" for t in facts.failed]
    d.out(_indent("\n".join(lines)))


def scene_oncall_and_maintenance(d: Demo) -> None:
    d.scene("3b. Who is on call (oncall.yaml), and maintenance the alert channel sees start and end")
    seen: dict[str, int] = {}
    d.fakes.received(seen)  # what the sinks had before this scene
    d.say("carol", "/oncall")
    d.say("dave", "/maint on 30m workflow:payment_reconcile")
    d.jobs("alerts_deliver")
    d.clock.advance(minutes=10)
    d.say("dave", "/maint off workflow:payment_reconcile")
    d.jobs("alerts_flush", "alerts_deliver")
    for message in d.fakes.received(seen):
        d.out(_indent(message))


def scene_what_failed(d: Demo) -> None:
    d.scene("9. What failed, and its log (read tools: no confirmation; the log is shown as text, encoded)")
    reply = d.say("carol", "/failed 昨天", conversation="cli:carol")
    found = re.search(r"#(\d+) ", reply)
    if found:
        d.say("carol", f"/log {found.group(1)}", conversation="cli:carol")


def scene_pause_resume(d: Demo) -> None:
    d.scene("10. Pause a run and resume it (writes: each asks first, the run is followed to its new state)")
    d.say("alice", "/run order_sync")
    d.say("alice", "/confirm")
    for _ in range(10):  # DolphinScheduler 3.2 makes the run a moment later; its first task starts
        d.clock.advance(5)
        d.jobs("ds_poll")
        runs = d.sim.instances_of("order_sync")
        if runs and runs[-1].state == "RUNNING_EXECUTION" and runs[-1].tasks:
            break
    run = d.sim.instances_of("order_sync")[-1].id
    d.say("alice", f"/pause {run}")
    d.say("alice", "/confirm")
    _follow_run(d, seconds=120)  # the running task finishes, nothing new starts: PAUSE
    d.say("alice", f"/resume {run}")
    d.say("alice", "/confirm")
    _follow_run(d, seconds=300)
    d.say("alice", "/runs order_sync 3")


def scene_shell(d: Demo) -> None:
    d.scene(
        "4. Whitelisted shell: typed arguments, no shell, a sandbox; anything else is refused with a reason"
    )
    d.say("alice", "/sh ls agent/alerts")
    d.say("alice", "/sh ls ../../etc")
    d.say("alice", "/sh rm -rf agent")


def scene_crash(d: Demo) -> None:
    d.scene("5. A crash in the middle of a task, then `xihe task resume`: finished steps are not redone")
    d.llm.add(
        call("run_shell_command", command="git_log", args={"count": 3, "path": "agent"}),
        slow(call("search_code", query="resume first unfinished step", k=3), 60),
    )
    env = {**os.environ, "XIHE_DATABASE_URL": d.db}  # the same xihe as this process (PYTHONPATH kept)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "xihe.agent.cli.main",
            "--config",
            str(d.config),
            "chat",
            "--user",
            "alice",
            "--conversation",
            "cli:alice-crash",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=d.root,
    )
    assert proc.stdin is not None
    d.out("alice> 看看 agent 目录最近的提交，再找一下恢复任务的代码   (in a separate `xihe chat` process)")
    asked = len(d.llm.requests)
    proc.stdin.write("看看 agent 目录最近的提交，再找一下恢复任务的代码\n")
    proc.stdin.flush()
    task_id = _wait_for_model_turn(d, asked + 2, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    d.clock.now = max(d.clock.now, utc_now())
    d.out(_indent(f"(the chat process was killed with SIGKILL while task #{task_id} waited for the model)"))
    d.llm.add(
        say(
            "最近的提交见上面的 git log；恢复逻辑在 `agent/loop.py` 的 `Agent.resume`：从第一个未完成的步骤继续。"
        )
    )
    d.out(f"$ xihe task resume {task_id}")
    outcome = d.bot().agent.resume(task_id, take_over=True)
    d.out(_indent(f"task {outcome.task_id} {outcome.status}: {outcome.reply}"))
    d.say("alice", f"/task {task_id}", conversation="cli:alice-crash")


def _wait_for_model_turn(d: Demo, requests: int, proc: subprocess.Popen[str], timeout: float = 60) -> int:
    """Wait until the model server has received `requests` requests in all (process synchronisation)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            said = proc.stdout.read() if proc.stdout else ""
            raise RuntimeError(f"the demo chat process ended early (exit {proc.returncode}):\n{said[-2000:]}")
        if len(d.llm.requests) >= requests:
            tasks = d.bot().deps.tasks.recent(conversation="cli:alice-crash", limit=1)
            if tasks:
                return tasks[0].id
        time.sleep(0.05)
    raise RuntimeError("the demo chat process never asked the model for its second turn")


def scene_web(d: Demo) -> None:
    d.scene("6. The web pages: guessed tokens lock the login; a logout ends the session on every replica")
    # carol, not dave: the kept demo's store keeps the lockout, and README's tour logs in as dave
    from starlette.testclient import TestClient

    from xihe.agent.demo.environment import UI_LOGINS
    from xihe.agent.web.server import create_server

    def browser(address: str) -> TestClient:  # `xihe serve`'s app, in process; no scheduler
        return TestClient(create_server(d.bot(), with_scheduler=False), client=(address, 40000))

    def log_in(c: TestClient, token: str) -> int:
        form = re.search(r'name="csrf" value="([^"]+)"', c.get("/ui/login").text)
        data = {"csrf": form.group(1) if form else "", "user": "carol", "token": token}
        return c.post("/ui/login", data=data, follow_redirects=False).status_code

    guesser = browser("203.0.113.9")
    codes = [log_in(guesser, f"guess-{n}") for n in range(8)]
    d.out(_indent(f"POST /ui/login as carol with 8 guessed tokens from 203.0.113.9 → {codes}"))
    right = UI_LOGINS["XIHE_UI_TOKEN_CAROL"]
    d.out(
        _indent(
            f"... then carol's real token → {log_in(browser('198.51.100.4'), right)} (carol is locked out)"
        )
    )
    d.clock.advance(minutes=15)
    carol = browser("198.51.100.4")
    d.out(
        _indent(
            f"15 minutes later → {log_in(carol, right)}; GET /ui/tasks → {carol.get('/ui/tasks').status_code}"
        )
    )
    other = browser("198.51.100.4")  # another replica: its own server over the same store
    other.cookies.set("xihe_ui", carol.cookies["xihe_ui"])
    before = other.get("/ui/tasks", follow_redirects=False).status_code
    form = re.search(r'name="csrf" value="([^"]+)"', carol.get("/ui/tasks").text)
    carol.post("/ui/logout", data={"csrf": form.group(1) if form else ""}, follow_redirects=False)
    after = other.get("/ui/tasks", follow_redirects=False)
    d.out(_indent(f"carol's cookie on another replica → {before}; after POST /ui/logout → {after.status_code} "
                  f"{after.headers['location']}"))  # fmt: skip


def scene_audit(d: Demo) -> None:
    d.scene("7. What happened, afterwards: the audit trail")
    rows = d.bot().deps.audit.search(limit=200)
    kinds: dict[str, int] = {}
    for r in rows:
        kinds[f"{r['kind']}/{r['outcome']}"] = kinds.get(f"{r['kind']}/{r['outcome']}", 0) + 1
    d.out(_indent(", ".join(f"{k}: {v}" for k, v in sorted(kinds.items()))))
    gate = [r for r in rows if r["kind"] == "gate"][:3]
    for r in gate:
        d.out(_indent(f"gate {r['outcome']:8} {r['actor']:6} {r['tool']}: {r['reason']}"))
    # bob typed 支付对账; the admin searches by the name they know (what `xihe audit search --workflow` runs)
    bot = d.bot()
    names = names_of("payment_reconcile", bot.settings.workflows, SqlCatalogStore(bot.deps.engine).entries())
    found = bot.deps.audit.search(workflow=names, limit=50)
    typed = sorted({r["args_redacted"]["workflow"] for r in found})
    d.out(
        f"$ xihe audit search --workflow payment_reconcile   # {len(found)} events, typed as {', '.join(typed)}"
    )
    for r in found:
        d.out(_indent(f"{r['kind']:9} {r['actor']:6} {r['tool']} {r['outcome']}"))
    d.say("dave", "/policy trigger_dolphinscheduler prod")  # who may start it there: the gate's own answer


SCENES = (
    scene_code_question,
    scene_backfill,
    scene_prod_failure,
    scene_oncall_and_maintenance,
    scene_shell,
    scene_crash,
    scene_web,
    scene_audit,
    scene_cards,
    scene_what_failed,
    scene_pause_resume,
    scene_alert_card,
    scene_mcp,
    scene_alert_lifecycle,
)


def run_demo(verbose: bool = True, keep: Path | None = None) -> int:
    """Play every scene; exit 0 when the script was consumed exactly."""
    with demo_environment(verbose, keep) as d:
        d.out(
            "xihe demo — loopback fakes: scripted LLM (openai client; it answers like Qwen3 on vLLM "
            "without parsers, read by llm.profile auto), DolphinScheduler 3.2 simulator, "
            "WeCom robot sink, SMTP sink; SQLite in a temp dir; simulated clock"
        )
        for scene in SCENES:
            scene(d)
        d.llm.assert_consumed()
        d.out("\nDone. Every reply above came through the real loop, gate, executor and stores.")
        if keep is not None:
            d.out(kept_directory_help(d.root))
    return 0


def kept_directory_help(root: Path) -> str:
    """What to type next with a kept demo directory."""
    return (
        f"\nKept in {root}: config/, xihe.db, index/, fakes.env. To go on with the demo's data:\n"
        f"  xihe fakes up --dir {root}            # the fakes again (leave it running)\n"
        f"  set -a; . {root}/fakes.env; set +a\n"
        f"  xihe chat --config {root}/config --user alice\n"
        f"  xihe serve --config {root}/config     # web UI at http://127.0.0.1:8080/ui"
    )


def main(argv: Any = None) -> int:
    """Run the demo (for `python -m xihe.agent.demo.scenes`)."""
    return run_demo()


if __name__ == "__main__":
    raise SystemExit(main())
