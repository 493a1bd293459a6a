"""The demo's alert lifecycle scene: a P0 nobody answers is paged up its escalation chain (the
on-call of oncall.yaml, then the secondary), acknowledged with `/ack`, and resolved when its rerun
succeeds; then the measures `xihe alerts stats` prints. Only this run's messages are shown (an older
alert of the tour may be paged or expire meanwhile)."""

from __future__ import annotations

import re
import textwrap
from datetime import timedelta
from typing import Any, Protocol

from xihe.agent.alerts.measures import measures, span
from xihe.agent.alerts.sql.life import SqlLifeStore
from xihe.agent.alerts.sql.stores import SqlAlertStores
from xihe.agent.app import App
from xihe.agent.clock import FakeClock
from xihe.config.alerts import ALERTS_SECTION
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator


class Demo(Protocol):
    """What the scene uses of `xihe.agent.demo.scenes.Demo`."""

    clock: FakeClock
    fakes: Any

    @property
    def sim(self) -> DolphinSimulator: ...

    def bot(self) -> App: ...

    def out(self, text: str = "") -> None: ...

    def scene(self, title: str) -> None: ...

    def say(self, user: str, text: str, conversation: str | None = None) -> str: ...

    def jobs(self, *ids: str) -> None: ...


def _indent(text: str) -> str:
    return textwrap.indent(text, "    ", lambda line: True)


def _follow(d: Demo, seconds: int = 600, step: int = 30) -> None:
    for _ in range(seconds // step):
        d.clock.advance(step)
        d.jobs("ds_poll")


def _approve(d: Demo) -> None:
    pending = d.bot().deps.pending.open_for(user_id="bob", statuses=("pending", "confirmed"))
    if pending:
        d.say("carol", f"/approve {pending[0].id}", conversation="cli:carol")


def scene_alert_lifecycle(d: Demo) -> None:
    d.scene(
        "13. A P0 nobody answers is escalated up its chain, acknowledged with /ack, then resolved by "
        "a rerun (the alert channel hears each step)"
    )
    seen: dict[str, int] = {}
    d.fakes.received(seen)  # what the sinks had before this scene
    before = {i.id for i in d.sim.instances_of("payment_reconcile")}
    d.say("bob", "/run 支付对账 2026-12-03")
    d.say("bob", "/confirm")
    _approve(d)
    _follow(d)
    new = [i.id for i in d.sim.instances_of("payment_reconcile") if i.id not in before] or [0]
    instance = new[-1]

    def flush(minutes: int) -> None:
        for _ in range(max(1, minutes // 5)):
            d.clock.advance(min(minutes, 5) * 60)
            d.jobs("alerts_flush", "alerts_deliver")
        for message in d.fakes.received(seen):
            if re.search(rf"(?<!首次：)实例(?: ID：| ){instance}(?!\d)", message):
                d.out(_indent(message))

    flush(1)
    cfg = d.bot().settings.get(ALERTS_SECTION)
    after = cfg.lifecycle.policy("P0").escalate_after if cfg is not None else 15
    d.out(_indent(f"(nobody answers: every {after} minutes the next step of the chain is paged)"))
    flush(2 * after)
    d.say("carol", f"/ack {instance}")
    flush(1)
    d.say("bob", f"/rerun {instance}")
    d.say("bob", "/confirm")
    _approve(d)
    _follow(d)
    flush(1)
    d.out("$ xihe alerts stats --since 2h")
    life = SqlLifeStore(SqlAlertStores(d.bot().deps.engine))
    for m in measures(life.since(d.clock() - timedelta(hours=2))):
        if m.workflow == "payment_reconcile":
            d.out(_indent(f"{m.tier} {m.workflow}: {m.alerts} alert(s), {m.acked} acknowledged in "
                          f"{span(m.ack_median)}, {m.resolved} resolved in {span(m.resolve_median)}"))  # fmt: skip
