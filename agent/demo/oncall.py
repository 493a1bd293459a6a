"""The demo's on-call scene: who is on call for the payments team (its rotation in the demo's
oncall.yaml, `environment.ONCALL`), and a maintenance window the alert channel hears about when it
opens and when it ends."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xihe.agent.demo.scenes import Demo


def scene_oncall_and_maintenance(d: Demo) -> None:
    d.scene("3b. Who is on call, and maintenance the alert channel sees start and end")
    seen: dict[str, int] = {}
    d.fakes.received(seen)  # what the sinks had before this scene
    d.say("carol", "/oncall")
    d.say("dave", "/maint on 30m workflow:payment_reconcile")
    d.jobs("alerts_deliver")
    _show(d, d.fakes.received(seen))
    d.clock.advance(minutes=10)
    d.say("dave", "/maint off workflow:payment_reconcile")
    d.jobs("alerts_flush", "alerts_deliver")
    _show(d, d.fakes.received(seen))


def _show(d: Demo, messages: list[str]) -> None:
    for message in messages:
        d.out(textwrap.indent(message, "    "))
