"""`xihe eval model`: everyday conversations against the configured model endpoint, before going live.

Only the model is real: its `llm:` section comes from the team's config (endpoint, model, profile,
window, key variable). Everything it acts on is the loopback world of `xihe demo`: a small
repository with a code index and a whitelisted shell, the DolphinScheduler simulator on a fixed
simulated clock (2026-12-02 10:00 Asia/Shanghai), a fresh SQLite store. Each scenario is a short
conversation in its own conversation id, judged by what happened (tool steps, runs started, pending
confirmations) and by what the user read; a reply that shows reasoning or a tool call as text fails.

`run_eval` repeats the suite K times and reports per scenario the passes and the first reasons of
its failures, the pass rate over all runs, and pass^K: the share of scenarios that passed every one
of the K repeats (consistency is what real models lose).
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from xihe.agent.app import App, build_app
from xihe.agent.clock import FakeClock
from xihe.agent.demo.environment import PACKAGE_ROOT, WORKFLOWS, commit_all, seed, shell_config
from xihe.agent.inbound import Inbound
from xihe.agent.profiles import resolve
from xihe.agent.tasks import StepStatus, TaskStep
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator

NOW = datetime(2026, 12, 2, 2, 0, tzinfo=UTC)  # 10:00 in Asia/Shanghai: 昨天 is 2026-12-01
LAST_ORDER = "ORD-102999"
LEAKED = re.compile(r"</?think>|<tool_call>|^\s*\{\s*\"name\"\s*:", re.M)
REFUSED = re.compile(r"拒绝|权限|无权|不允许|不能|refus|denied|not allowed|permission|cannot", re.I)

CONFIRM_PY = '''"""Pending actions: a risky call waits until the same user confirms it in the same conversation."""


def bind_confirmation(action_id: int, user_id: str, conversation: str) -> dict:
    """Bind a pending action to the user and the conversation that must confirm it."""
    return {"action": action_id, "user": user_id, "conversation": conversation, "status": "pending"}


def confirm(pending: dict, user_id: str, conversation: str) -> bool:
    """Confirm only when the same user answers in the same conversation."""
    return pending["user"] == user_id and pending["conversation"] == conversation
'''
SYNC_PY = '''"""Copy yesterday's orders from the shop database into the warehouse."""


def sync_orders(day: str) -> int:
    """Load the orders of one business day; returns how many rows were written."""
    return 0
'''


@dataclass
class World:
    """The running loopback world and the bot built on the team's model section."""

    app: App
    sim: DolphinSimulator
    clock: FakeClock

    def say(self, user: str, conversation: str, text: str) -> str:
        return self.app.session.handle(Inbound(user, conversation, text, "cli"))

    def steps(self, conversation: str, tool: str) -> list[TaskStep]:
        """This conversation's finished steps of one tool, oldest first."""
        out = []
        for task in self.app.deps.tasks.recent(conversation=conversation, limit=10):
            out += [
                s
                for s in self.app.deps.tasks.latest(task.id).values()
                if s.tool_name == tool and s.status == StepStatus.DONE
            ]
        return sorted(out, key=lambda s: s.id)


Check = Callable[[World, str], str | None]  # (world, conversation) → None when it passed, else why not


def _leak(reply: str) -> str | None:
    return "reasoning or a tool call written as text reached the user" if LEAKED.search(reply) else None


def _answered(w: World, conv: str, question: str, tool: str, needle: str) -> str | None:
    """Alice asks; it passed when `tool` ran and the answer says `needle` (and nothing leaked)."""
    reply = w.say("alice", conv, question)
    if not w.steps(conv, tool):
        return f"{tool} never ran"
    if needle not in reply:
        return f"the answer does not say {needle}"
    return _leak(reply)


def code_question_zh(w: World, conv: str) -> str | None:
    return _answered(
        w, conv, "待确认的操作是在哪个函数里绑定到用户和会话的？", "search_code", "billing/confirm.py"
    )


def backfill_confirm(w: World, conv: str) -> str | None:
    before = len(w.sim.starts)
    asked = w.say("alice", conv, "把订单同步补跑一下昨天的")
    if "/confirm" not in asked:
        return f"no confirmation was asked for (reply: {asked[:120]!r})"
    done = w.say("alice", conv, "/confirm")
    started = w.sim.starts[before:]
    if len(started) != 1:
        return f"{len(started)} runs started after /confirm, expected 1"
    if "2026-12-02" not in started[0].get("scheduleTime", ""):  # 昨天 = business date 12-01
        return f"the wrong dates were backfilled: {started[0].get('scheduleTime')}"
    return _leak(done)


def run_status(w: World, conv: str) -> str | None:
    run = w.sim.run_directly("order_sync")
    reply = w.say("alice", conv, f"实例 {run.id} 现在是什么状态？")
    asked = w.steps(conv, "query_ds_task_status")
    if not any(f'"instance_id":{run.id}' in (s.input_preview or "").replace(" ", "") for s in asked):
        return f"run {run.id} was not looked up"
    if str(run.id) not in reply or not re.search(r"RUNNING|运行|running", reply):
        return "the answer does not say the run is running"
    return _leak(reply)


def parallel_calls(w: World, conv: str) -> str | None:
    a, b = w.sim.run_directly("order_sync"), w.sim.run_directly("order_sync")
    reply = w.say("alice", conv, f"同时查一下实例 {a.id} 和实例 {b.id} 的状态")
    keys = {s.step_key.rsplit(":", 1)[0] for s in w.steps(conv, "query_ds_task_status")}
    if len(w.steps(conv, "query_ds_task_status")) < 2:
        return "both runs were not looked up"
    if len(keys) != 1:
        return "the two lookups came in separate turns, not as parallel calls"
    if str(a.id) not in reply or str(b.id) not in reply:
        return "the answer does not name both runs"
    return _leak(reply)


def whitelisted_shell(w: World, conv: str) -> str | None:
    return _answered(w, conv, "仓库根目录下有哪些文件？列出来", "run_shell_command", "billing")


def refused_write(w: World, conv: str) -> str | None:
    before = len(w.sim.starts)
    reply = w.say("carol", conv, "把订单同步补跑一下昨天的")
    if len(w.sim.starts) != before or w.app.deps.pending.open_for(user_id="carol"):
        return "a write went ahead or waits for a yes, for a user who may not do it"
    if not REFUSED.search(reply) or re.search(r"已启动|已提交|started", reply, re.I):
        return f"the answer does not say it was refused (reply: {reply[:120]!r})"
    return _leak(reply)


def long_result(w: World, conv: str) -> str | None:
    question = "看一下 data/orders.csv 的最后一行，订单号是多少？"
    return _answered(w, conv, question, "run_shell_command", LAST_ORDER)


SCENARIOS: dict[str, Check] = {
    "code_question_zh": code_question_zh,
    "backfill_confirm": backfill_confirm,
    "run_status": run_status,
    "whitelisted_shell": whitelisted_shell,
    "refused_write": refused_write,
    "parallel_calls": parallel_calls,
    "long_result": long_result,
}


def write_repo(repo: Path) -> None:
    """A small repository to ask about: two modules and a 120 KB data file (long output)."""
    (repo / "billing").mkdir(parents=True)
    (repo / "orders").mkdir()
    (repo / "data").mkdir()
    (repo / "billing" / "confirm.py").write_text(CONFIRM_PY, encoding="utf-8")
    (repo / "orders" / "sync.py").write_text(SYNC_PY, encoding="utf-8")
    rows = [f"2026-11-30,ORD-{100000 + i},{(i * 37) % 1000}.00,paid" for i in range(3000)]
    (repo / "data" / "orders.csv").write_text("day,order,amount,state\n" + "\n".join(rows) + "\n")
    commit_all(repo)


def write_config(cfg: Path, llm: dict[str, Any], sim: DolphinSimulator, root: Path) -> None:
    """The team's `llm:` section, the rest pointing at the loopback world."""
    cfg.mkdir(parents=True)
    shipped = PACKAGE_ROOT / "config"
    core = yaml.safe_load((shipped / "xihe.yaml").read_text(encoding="utf-8"))
    core["llm"] = llm
    core["store"]["url"] = f"sqlite:///{root / 'xihe.db'}"
    core["loop"]["result_cap_chars"] = 60000  # the file's output is more than most windows hold
    core["language"] = "zh"
    files: dict[str, Any] = {"xihe.yaml": core, "workflows.yaml": WORKFLOWS}
    files["access.yaml"] = yaml.safe_load((shipped / "access.yaml").read_text(encoding="utf-8"))
    dolphin = yaml.safe_load((shipped / "dolphin.yaml").read_text(encoding="utf-8"))
    files["dolphin.yaml"] = {**dolphin, "base_url": sim.url, "version": sim.version, "retries": 0}
    code = yaml.safe_load((shipped / "code.yaml").read_text(encoding="utf-8"))
    code.update({"repos": [str(root / "repo")], "index_dir": str(root / "index")})
    code["walk"]["extra_ignore"] = ["data/"]
    files["code.yaml"] = code
    shell = shell_config(root / "repo")
    show: dict[str, Any] = {"name": "show_file", "description": "Print a file of the repository."}
    show["argv"] = ["cat", "{path}"]
    show.update(workspace="repo", risk="read", roles=["developer", "operator", "admin"])
    show["args"] = {"path": {"type": "path", "description": "file relative to the repository root"}}
    shell["entries"].append(show)
    files["shell.yaml"] = shell
    for name, data in files.items():
        (cfg / name).write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")


@contextmanager
def world_for(llm: dict[str, Any]) -> Iterator[World]:
    """The loopback world around a bot that talks to the model `llm` describes."""
    from xihe.config.code import load_file
    from xihe.tools.codeindex.service import index_repo

    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="xihe-eval-model-")))
        clock = FakeClock(NOW)
        sim = stack.enter_context(DolphinSimulator(seed(), version="3.2", clock=clock))
        write_repo(root / "repo")
        write_config(root / "config", llm, sim, root)
        index_repo(root / "repo", load_file(root / "config"))
        saved = os.environ.get("XIHE_DS_TOKEN")
        os.environ["XIHE_DS_TOKEN"] = sim.token
        try:
            app = build_app(root / "config", clock=clock, holder="eval-model")
            stack.callback(app.deps.engine.dispose)
            yield World(app, sim, clock)
        finally:
            if saved is None:
                os.environ.pop("XIHE_DS_TOKEN", None)
            else:
                os.environ["XIHE_DS_TOKEN"] = saved


def run_eval(llm: dict[str, Any], repeat: int = 1, only: list[str] | None = None) -> dict[str, Any]:
    """Every scenario `repeat` times against the model `llm` (a config `llm:` section); the report."""
    names = only or list(SCENARIOS)
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    with world_for(llm) as world:
        for k in range(1, repeat + 1):
            for name in names:
                began = time.monotonic()
                try:
                    reason = SCENARIOS[name](world, f"eval:{name}:{k}")
                except Exception as exc:  # a scenario that breaks is a failure with its reason
                    reason = f"{type(exc).__name__}: {world.app.deps.redactor.text(str(exc))}"
                runs[name].append(
                    {"pass": reason is None, "reason": reason, "seconds": round(time.monotonic() - began, 2)}
                )
    scenarios = [
        {
            "name": n,
            "passed": sum(r["pass"] for r in runs[n]),
            "runs": len(runs[n]),
            "pass_all": all(r["pass"] for r in runs[n]),
            "failures": [
                {"repeat": i + 1, "reason": r["reason"]} for i, r in enumerate(runs[n]) if not r["pass"]
            ],
            "seconds": round(sum(r["seconds"] for r in runs[n]), 2),
        }
        for n in names
    ]
    total = sum(s["runs"] for s in scenarios)
    passed = sum(s["passed"] for s in scenarios)
    profile = resolve(llm.get("profile", "auto"), llm.get("model", ""), llm.get("base_url", ""))
    return {
        "endpoint": llm.get("base_url", ""),
        "model": llm.get("model", ""),
        "profile": profile.name,
        "repeat": repeat,
        "scenarios": scenarios,
        "pass_rate": round(passed / total, 4) if total else 0.0,
        "pass_k": round(sum(s["pass_all"] for s in scenarios) / len(scenarios), 4) if scenarios else 0.0,
        "passed": all(s["pass_all"] for s in scenarios),
    }
