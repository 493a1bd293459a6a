"""ChannelHealthStore over table alert_channel: every change one atomic statement."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Connection, or_, select, update

from xihe.agent.alert_tables import alert_channel
from xihe.agent.alerts.deliver import ChannelHealth
from xihe.agent.alerts.sql.stores import SqlAlertStores

_C = alert_channel.c


class SqlChannelHealth:
    """ChannelHealthStore over table alert_channel: shared by replicas, survives restarts."""

    def __init__(self, stores: SqlAlertStores) -> None:
        self.s = stores

    def _ensure(self, conn: Connection, channel: str, now: datetime) -> None:
        conn.execute(
            self.s.insert(alert_channel)
            .values(channel=channel, mode="robot", failures=0, last_probe_at=None, updated_at=now)
            .on_conflict_do_nothing(index_elements=["channel"])
        )

    def _read(self, conn: Connection, channel: str) -> ChannelHealth:
        r = conn.execute(select(alert_channel).where(_C.channel == channel)).first()
        if r is None:
            return ChannelHealth()
        m = r._mapping
        return ChannelHealth(m["mode"], int(m["failures"]), m["last_probe_at"])

    def __getitem__(self, channel: str) -> ChannelHealth:
        with self.s.tx() as conn:
            return self._read(conn, channel)

    def get(self, channel: str) -> ChannelHealth:
        """The channel's health."""
        with self.s.tx() as conn:
            return self._read(conn, channel)

    def all(self) -> dict[str, ChannelHealth]:
        """Every channel with a recorded health, most recently changed first (the web pages)."""
        with self.s.tx() as conn:
            rows = conn.execute(select(alert_channel).order_by(_C.updated_at.desc())).all()
        return {r.channel: ChannelHealth(r.mode, int(r.failures), r.last_probe_at) for r in rows}

    def claim_probe(self, channel: str, now: datetime, every: timedelta) -> bool:
        """Take the probe when one is due (one replica wins)."""
        with self.s.tx() as conn:
            n = conn.execute(
                update(alert_channel)
                .where(
                    _C.channel == channel,
                    _C.mode == "email",
                    or_(_C.last_probe_at.is_(None), _C.last_probe_at <= now - every),
                )
                .values(last_probe_at=now, updated_at=now)
            ).rowcount
        return bool(n == 1)

    def success(self, channel: str, now: datetime) -> None:
        """Back to the robot, failures reset."""
        with self.s.tx() as conn:
            self._ensure(conn, channel, now)
            conn.execute(
                update(alert_channel)
                .where(_C.channel == channel)
                .values(mode="robot", failures=0, updated_at=now)
            )

    def failure(self, channel: str, now: datetime, threshold: int, can_mail: bool) -> ChannelHealth:
        """Count a failed row; switch to e-mail at the threshold (when mail is possible)."""
        with self.s.tx() as conn:
            self._ensure(conn, channel, now)
            conn.execute(
                update(alert_channel)
                .where(_C.channel == channel)
                .values(failures=_C.failures + 1, updated_at=now)
            )
            if can_mail:
                conn.execute(
                    update(alert_channel)
                    .where(_C.channel == channel, _C.mode != "email", _C.failures >= threshold)
                    .values(mode="email", last_probe_at=now)
                )
            return self._read(conn, channel)
