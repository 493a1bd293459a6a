"""Long tasks that keep their goal: plans with checked evidence, memory, budget, recovery.

Active when `config/longtask.yaml` exists. It adds

- tools: plan_view / plan_add / plan_claim / plan_complete / plan_fail / plan_revise, remember / recall;
- context blocks by priority: the open plan, the user's latest corrections, needed facts
  (`xihe.agent.context.build` keeps them ahead of older turns within the token budget);
- the token budget (tiktoken offline where the encoding is known, else a labelled estimate), recovery
  of timed-out tool calls against the task's stored retry budget, an optional plan reminder;
- a reply check: the bot may not say an item (or the whole task) is done while the plan disagrees;
- chat commands `/plan [TASK]` and `/memory [KEY]`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from xihe.agent.budget import counter_for
from xihe.agent.context import PRIORITY, Block
from xihe.agent.errors import TaskStateError
from xihe.agent.feature import Context, Feature, Installed
from xihe.agent.help import HelpEntry
from xihe.agent.hooks import ContextBudget, Hooks
from xihe.agent.i18n import Lang, Text, say, say_md
from xihe.agent.inbound import reply_lang
from xihe.agent.recovery import RetryPolicy
from xihe.agent.registry import ToolSpec
from xihe.agent.tasks import Task
from xihe.agent.timefmt import show
from xihe.agent.tool_names import LONGTASK_TOOLS
from xihe.config.longtask import LONGTASK_SECTION, LongTaskConfig
from xihe.tools.longtask import memory_tools, plan_tools
from xihe.tools.longtask.memory import MemoryStore
from xihe.tools.longtask.messages import CHANGE, MEMORY, PLAN
from xihe.tools.longtask.plan_store import PlanStore
from xihe.tools.longtask.plan_workers import active_plan
from xihe.tools.longtask.plans import OPEN, open_count, render

if TYPE_CHECKING:
    from xihe.agent.commands import Command
    from xihe.agent.deps import Deps
    from xihe.agent.gate import Who
    from xihe.agent.inbound import Inbound

HELP = [
    HelpEntry("/plan [TASK]", "the plan of your current long task: items, owners, evidence", "/plan",
              "当前长任务的计划：事项、负责人、证据"),
    HelpEntry("/memory [KEY]", "what I remember about you (with sources)", "/memory", "我记住的关于你的事（含来源）"),
]  # fmt: skip


class LongTasks:
    """The feature's state for one app: stores and config, and the hooks it gives the loop."""

    def __init__(self, deps: Deps, cfg: LongTaskConfig) -> None:
        self.deps = deps
        self.cfg = cfg
        self.plans = PlanStore(deps.engine)
        self.memory = MemoryStore(deps.engine)

    def tools(self) -> list[ToolSpec]:
        """The plan and memory tools."""
        return [
            *plan_tools.specs(self.plans, self.cfg.plan.claim_lease_seconds),
            *memory_tools.specs(
                self.memory, self.cfg.memory.fact_tools, self.deps.settings.core.loop.history_tasks
            ),
        ]

    # ---- context blocks
    def plan_block(self, task: Task) -> Block | None:
        plan = active_plan(self.plans, self.deps.tasks, task)
        items = self.plans.items(plan)
        if not items:
            return None
        now = self.deps.clock()
        goal = task.goal if plan == task.id else self.deps.tasks.get(plan).goal
        head = (
            f"Plan (task {plan}; goal: {goal[:200]}). {open_count(items)} item(s) open. "
            "An item is completed only through plan_complete with checked evidence; never say it is done otherwise."
        )
        open_first = [i for i in items if i.status in OPEN] + [i for i in items if i.status not in OPEN]
        return Block("plan", head + "\n" + render(open_first, now), PRIORITY["plan"])

    def corrections_block(self, task: Task) -> Block | None:
        corrected = self.memory.corrected_keys(task.owner)
        if not corrected:
            return None
        lines = []
        for key in sorted(corrected):
            history = self.memory.history(task.owner, key)
            if len(history) < 2:
                continue
            now, before = history[-1], history[-2]
            lines.append(f"- {key} = {now.value} (corrected from: {before.value}; source: {now.source})")
        if not lines:
            return None
        return Block(
            "corrections",
            "The user's latest corrections (they replace the earlier values):\n" + "\n".join(lines),
            PRIORITY["corrections"],
        )

    def facts_block(self, task: Task) -> Block | None:
        if self.cfg.context.facts == 0:
            return None
        corrected = self.memory.corrected_keys(task.owner)
        facts = [f for f in self.memory.facts(task.owner, limit=200) if f.key not in corrected]
        if not facts:
            return None
        words = set(re.findall(r"\w+", task.goal.casefold()))

        def relevant(key: str) -> int:
            return -len(words & set(re.findall(r"\w+", key.casefold())))

        chosen = sorted(facts, key=lambda f: relevant(f.key))[: self.cfg.context.facts]
        return Block(
            "facts",
            "Remembered facts of this user (recall gives the source; re-check live states):\n"
            + "\n".join(f"- {f.line(self.deps.settings.core.timezone)}" for f in chosen),
            PRIORITY["facts"],
        )

    # ---- loop hooks
    def remind(self, task: Task, messages: list[dict[str, Any]]) -> str | None:
        """A note when the plan has open items and no plan tool was called for N turns."""
        n = self.cfg.plan.remind_after_turns
        if n <= 0:
            return None
        quiet = 0
        for m in reversed(messages):
            if m.get("role") != "assistant" or m.get("_history"):
                continue
            if any(tc["function"]["name"].startswith("plan_") for tc in m.get("tool_calls") or ()):
                break
            quiet += 1
        if quiet < n:
            return None
        items = [
            i for i in self.plans.items(active_plan(self.plans, self.deps.tasks, task)) if i.status in OPEN
        ]
        if not items:
            return None
        return (
            f"[Plan reminder] The plan has not been updated for {quiet} turn(s); still open:\n"
            + render(items, self.deps.clock())
            + "\nContinue with the next item or update the plan. This reminder does not complete anything."
        )

    def stop_note(self, task: Task) -> str | None:
        """What is still open, for a task that stops unfinished."""
        plan = active_plan(self.plans, self.deps.tasks, task)
        items = self.plans.items(plan)
        if not items:
            return None
        lang = self.deps.lang(task.goal, task.conversation)
        head = say(PLAN, "stop_note", lang, task=plan, open=open_count(items))
        return head + "\n" + render(items, self.deps.clock(), lang)


_ALL_DONE = re.compile(
    r"\b(all (items|steps|tasks|work)\b[^.\n]{0,20}\b(done|complete|completed|finished)|everything (is )?(done|complete)"
    r"|(task|plan|work) (is )?(fully )?(done|complete|completed|finished))\b|全部完成|都已完成|已全部完成|任务已完成",
    re.IGNORECASE,
)
_ITEM_DONE = re.compile(
    r"#(\d+)\b[^#\n]{0,60}?\b(done|completed|complete|finished)\b|#(\d+)[^#\n]{0,30}?(已完成|完成了)",
    re.IGNORECASE,
)
_NOT = re.compile(r"\b(not|isn't|is not|no|never|yet to be|未|没有)\b[^.\n]{0,12}$", re.IGNORECASE)


class PlanClaims:
    """Reply check: no item (and not the whole task) may be called done unless the plan says completed."""

    def __init__(self, lt: LongTasks) -> None:
        self.lt = lt

    def _unbacked(self, task: Task, reply: str) -> list[str]:
        plan = active_plan(self.lt.plans, self.lt.deps.tasks, task)
        items = {i.seq: i for i in self.lt.plans.items(plan)}
        if not items:
            return []
        wrong: list[str] = []
        for m in _ITEM_DONE.finditer(reply):
            if _NOT.search(reply[max(0, m.start() - 30) : m.start()] + m.group(0)[:2]):
                continue
            seq = int(m.group(1) or m.group(3))
            item = items.get(seq)
            if item is None or item.status != "completed":
                wrong.append(f"#{seq} is {item.status if item else 'not in the plan'}")
        still_open = [i for i in items.values() if i.status in OPEN]
        if still_open and _ALL_DONE.search(reply):
            wrong.append("the plan still has open items: " + ", ".join(f"#{i.seq}" for i in still_open))
        return wrong

    def complaint(self, task: Task, reply: str) -> str | None:
        wrong = self._unbacked(task, reply)
        if not wrong:
            return None
        return (
            "Your answer calls work done that the plan does not show as completed with checked evidence ("
            + "; ".join(wrong)
            + "). Say what is actually completed (with its evidence) and what remains."
        )

    def mark(self, task: Task, reply: str) -> str:
        note = self.lt.stop_note(task) or ""
        lang = self.lt.deps.lang(task.goal, task.conversation)
        return f"{reply}\n\n" + say(PLAN, "overclaim", lang, note=note)


def install(ctx: Context) -> Installed:
    """Tools, context providers, budget, recovery, reminder, reply check and commands (nothing when
    longtask.yaml is absent)."""
    cfg = ctx.settings.get(LONGTASK_SECTION)
    if cfg is None:
        return Installed()
    lt = LongTasks(ctx.deps, cfg)
    if ctx.offline:
        return Installed(tools=lt.tools())
    c = cfg.context
    rec = cfg.recovery
    hooks = Hooks(
        reply_checks=(PlanClaims(lt),),
        context_providers=(lt.plan_block, lt.corrections_block, lt.facts_block),
        reminders=(lt.remind,),
        stop_notes=(lt.stop_note,),
        context_budget=ContextBudget(
            counter=counter_for(ctx.model, c.encoding, c.encodings_dir),
            total_tokens=c.budget_tokens,
            reply_tokens=c.reply_tokens,
            summary_tokens=c.summary_tokens,
            emergency_shrink=c.emergency_shrink,
        ),
        recovery=RetryPolicy(rec.attempts, rec.call_limit_seconds, rec.max_wait_seconds),
        retry_budget=rec.retry_budget,
    )
    return Installed(
        tools=lt.tools(),
        commands={
            "plan": lambda s, who, msg, cmd: _plan_command(lt, who, msg, cmd, reply_lang(s, msg)),
            "memory": lambda s, who, msg, cmd: _memory_command(lt, who, cmd, reply_lang(s, msg)),
        },
        help=list(HELP),
        hooks=hooks,
    )


FEATURE = Feature("longtask", LONGTASK_SECTION, install, LONGTASK_TOOLS)


def _plan_command(lt: LongTasks, who: Who, msg: Inbound, cmd: Command, lang: Lang) -> str:
    tasks = lt.deps.tasks
    if cmd.args and cmd.args[0].isdigit():
        try:
            task = tasks.get(int(cmd.args[0]))
        except TaskStateError:
            return say(PLAN, "no_task", lang, task=cmd.args[0])
        if task.owner != who.user:
            return say(PLAN, "not_yours", lang, task=task.id)
        plan = active_plan(lt.plans, tasks, task)
    else:
        mine = tasks.recent(owner=who.user, conversation=msg.conversation, limit=30)
        with_open = lt.plans.plans_with_open_items([t.id for t in mine])
        with_items = [t.id for t in mine if lt.plans.items(t.id)]
        if not with_open and not with_items:
            return say(PLAN, "none_here", lang)
        plan = max(with_open) if with_open else max(with_items)
    items = lt.plans.items(plan)
    if not items:
        return say(PLAN, "no_plan", lang, task=plan)
    now = lt.deps.clock()
    goal = tasks.get(plan).goal
    lines: list[str] = [
        say_md(PLAN, "head", lang, task=plan, goal=goal[:100]),  # the goal and items are outside text
        say(PLAN, "open", lang, open=open_count(items), total=len(items)),
        "",
    ]
    lines += [f"- {i.line(now, lang, markdown=True)}" for i in items]
    changes = [
        c for c in lt.plans.history(plan) if c.change in ("replaced", "dropped", "failed", "reclaimed")
    ]
    if changes:
        tz = lt.deps.settings.core.timezone
        lines += ["", say(PLAN, "changes", lang)]
        lines += [
            "- "
            + say(
                PLAN,
                "change",
                lang,
                seq=c.seq,
                change=Text(CHANGE, c.change),
                actor=c.actor,
                at=show(c.at, tz, seconds=False),
            )
            + (say_md(PLAN, "change_reason", lang, reason=c.reason) if c.reason else "")
            for c in changes[-10:]
        ]
    return "\n".join(lines)


def _memory_command(lt: LongTasks, who: Who, cmd: Command, lang: Lang) -> str:
    tz = lt.deps.settings.core.timezone
    if cmd.rest.strip():
        history = lt.memory.history(who.user, cmd.rest)
        if not history:
            return say(MEMORY, "nothing_under", lang, key=cmd.rest.strip())
        current = say(MEMORY, "current", lang)
        return "\n".join(f"- {current if f.current else ''}{f.line(tz, lang)}" for f in history)
    facts = lt.memory.facts(who.user)
    if not facts:
        return say(MEMORY, "nothing", lang)
    return "\n".join(f"- {f.line(tz, lang)}" for f in facts)
