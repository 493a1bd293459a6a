"""Where alert lifecycles are kept: the `LifeStore` contract and its in-memory form (replay, tests).
The SQL form (table alert_life and its pages, shared by replicas) is `sql/life.py`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from operator import attrgetter
from typing import Protocol

from xihe.agent.alerts.lifecycle import Alert


@dataclass(frozen=True)
class PageRow:
    """An escalation page as stored: the claim of one step of one alert."""

    alert_id: int
    fired: int  # the firing, as epoch seconds of its fired_at
    step: str
    person: str
    number: int
    paged_at: datetime
    holder: str = ""


class LifeStore(Protocol):
    """Alert lifecycles, one per failed instance, and the escalation pages sent for them."""

    def get(self, instance_id: int) -> Alert | None:
        """The alert of `instance_id`, or None."""

    def by_id(self, alert_id: int) -> Alert | None:
        """The alert with short id A<alert_id>, or None."""

    def save(self, alert: Alert) -> Alert:
        """Insert (id 0: gets its id) or replace the alert of its instance; returns it as stored."""

    def open_alerts(self) -> list[Alert]:
        """Firing and acknowledged alerts, oldest first."""

    def earliest(self) -> tuple[datetime | None, datetime | None]:
        """When the clock next matters: the earliest `next_page_at` of a firing alert and the
        earliest `fired_at` of an open one (None: no such alert)."""

    def latest(self, channels: Iterable[str] | None = None) -> Alert | None:
        """The newest alert (of these channels, when given) that is still open."""

    def since(self, start: datetime) -> list[Alert]:
        """Alerts that fired at or after `start`, oldest first (the measures)."""

    def claim_page(self, page: PageRow) -> bool:
        """Record a page of (alert, step); False when that step was paged already (by any replica)."""

    def pages(self, alert_id: int) -> list[PageRow]:
        """The pages of one alert, in order."""


_OLDEST_FIRST = attrgetter("fired_at", "id")


@dataclass
class InMemoryLifeStore:
    """LifeStore in dicts."""

    _alerts: dict[int, Alert] = field(default_factory=dict)  # by instance id
    _pages: dict[tuple[int, int, str], PageRow] = field(default_factory=dict)
    _next: int = 1
    # open alerts oldest first and `earliest()`, kept until the next save (ticks read them often)
    _open: list[Alert] | None = field(default=None, repr=False, compare=False)
    _earliest: tuple[datetime | None, datetime | None] | None = field(default=None, repr=False, compare=False)

    def get(self, instance_id: int) -> Alert | None:
        """The alert of `instance_id`, or None."""
        return self._alerts.get(instance_id)

    def by_id(self, alert_id: int) -> Alert | None:
        """The alert A<alert_id>, or None."""
        return next((a for a in self._alerts.values() if a.id == alert_id), None)

    def save(self, alert: Alert) -> Alert:
        """Insert or replace."""
        if alert.id == 0:
            alert = replace(alert, id=self._next)
            self._next += 1
        self._alerts[alert.instance_id] = alert
        self._open = self._earliest = None
        return alert

    def open_alerts(self) -> list[Alert]:
        """Firing and acknowledged alerts, oldest first."""
        if self._open is None:
            self._open = sorted((a for a in self._alerts.values() if a.open), key=_OLDEST_FIRST)
        return list(self._open)

    def earliest(self) -> tuple[datetime | None, datetime | None]:
        """The earliest page due of a firing alert, the earliest firing of an open one."""
        if self._earliest is None:
            alerts = self.open_alerts()
            pages = [a.next_page_at for a in alerts if a.state == "firing" and a.next_page_at is not None]
            self._earliest = (min(pages, default=None), alerts[0].fired_at if alerts else None)
        return self._earliest

    def latest(self, channels: Iterable[str] | None = None) -> Alert | None:
        """The newest open alert (of `channels`)."""
        wanted = None if channels is None else set(channels)
        found = [a for a in self.open_alerts() if wanted is None or a.channel in wanted]
        return found[-1] if found else None

    def since(self, start: datetime) -> list[Alert]:
        """Alerts fired at or after `start`."""
        return sorted(
            (a for a in self._alerts.values() if a.fired_at >= start), key=lambda a: (a.fired_at, a.id)
        )

    def claim_page(self, page: PageRow) -> bool:
        """Record the page unless its step was paged."""
        key = (page.alert_id, page.fired, page.step)
        if key in self._pages:
            return False
        self._pages[key] = page
        return True

    def pages(self, alert_id: int) -> list[PageRow]:
        """The pages of one alert, in order."""
        return sorted(
            (p for p in self._pages.values() if p.alert_id == alert_id), key=lambda p: (p.fired, p.number)
        )
