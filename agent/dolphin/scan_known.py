"""Which failed runs are the bot's own: the poller reports them, so the failed-run scan skips them.

The bot's `ds_watch` rows name the instances they found (ids) and the marker of each run they
started. On DolphinScheduler 3.1, whose instance list rows carry no params (so no marker), a run of
a definition whose watch is still discovering its instances waits for the poller.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, or_, select

from xihe.agent.dolphin_tables import ds_watch
from xihe.integrations.dolphinscheduler.models import Instance
from xihe.integrations.dolphinscheduler.runs import DISCOVERY_SKEW


@dataclass(frozen=True)
class Known:
    """What the bot's own watches cover: their instances are the poller's to report."""

    instance_ids: frozenset[int] = frozenset()
    markers: frozenset[str] = frozenset()
    discovering: tuple[tuple[int, datetime], ...] = ()  # (definition code, started_at) still looking

    def why_not_ours(self, inst: Instance) -> str:
        """ "" when the scan should report `inst`; else why it is skipped."""
        if inst.id in self.instance_ids or (inst.marker and inst.marker in self.markers):
            return "watched"
        if inst.marker is None:  # 3.1 list rows carry no params: a watch may be about to find it
            start = inst.start_time
            for code, started_at in self.discovering:
                if code == inst.definition_code and (start is None or start >= started_at - DISCOVERY_SKEW):
                    return "discovering"
        return ""


def known_from_watches(engine: Engine, since: datetime) -> Known:
    """Instance ids and markers of watches not done, or touched since `since` (one query)."""
    w = ds_watch.c
    query = select(w.key, w.definition_code, w.started_at, w.done, w.state).where(
        or_(w.done.is_(False), w.updated_at >= since, w.started_at >= since)
    )
    ids: set[int] = set()
    markers: set[str] = set()
    discovering: list[tuple[int, datetime]] = []
    with engine.connect() as conn:
        for key, definition_code, started_at, done, state in conn.execute(query):
            st = state if isinstance(state, dict) else json.loads(state or "{}")
            found = [int(i) for i in st.get("instance_ids", ())]
            ids.update(found)
            markers.add(str(key))
            if not done and len(found) < int(st.get("expected_runs", 1)):
                discovering.append((int(definition_code), started_at))
    return Known(frozenset(ids), frozenset(markers), tuple(discovering))
