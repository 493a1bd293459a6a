"""The alert pipeline's tables (migration 2): its state, outbox, maintenance windows, channel
health, robot rate and decisions.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, String, Table, Text

from xihe.agent.lease import lease_columns
from xihe.agent.tables import Id, UTCDateTime, metadata

# What does the alert pipeline remember between events? (held instance messages, open windows,
# host hit lists, dedupe keys; `due_at` drives window ends and expiry; `token` changes on every put)
alert_state = Table(
    "alert_state",
    metadata,
    Column("ns", String(16), primary_key=True),  # seen|inst|host|node|fp|p2
    Column("key", String(500), primary_key=True),
    Column("payload", Text, nullable=False),  # JSON of the record (agent.alerts.state)
    Column("due_at", UTCDateTime),
    Column("token", String(32), nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    *lease_columns(),  # a scan marker's claim: the replica reporting that run (migration 9)
)
Index("ix_alert_state_due", alert_state.c.due_at)

# Which notification waits to go out, which went, how and when? One row per (instance or window, tier, channel).
alert_outbox = Table(
    "alert_outbox",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("key", String(500), nullable=False, unique=True),
    Column("kind", String(20), nullable=False),  # instance|aggregate|summary|node|manual
    Column("tier", String(4), nullable=False),
    Column("channel", String(80), nullable=False),
    Column("subject", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("due_at", UTCDateTime, nullable=False),
    Column("status", String(10), nullable=False),  # pending|sent
    Column("attempts", Integer, nullable=False, default=0),
    *lease_columns(),  # the replica sending it now
    Column("last_error", Text, nullable=False, default=""),
    Column("sent_at", UTCDateTime),
    Column("sent_via", String(10), nullable=False, default=""),  # robot|email
    Column("force_email", Boolean, nullable=False, default=False),
    Column(
        "to_user", String(120)
    ),  # an escalation page: the person an app channel sends it to (migration 14)
)
Index("ix_alert_outbox_due", alert_outbox.c.status, alert_outbox.c.due_at)

# Which maintenance windows were opened in chat, by whom, over what, and when did they close?
alert_maintenance = Table(
    "alert_maintenance",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),  # the number /maint shows and /maint off takes
    Column("window_id", String(300), nullable=False, unique=True),
    Column("start_at", UTCDateTime, nullable=False),
    Column("end_at", UTCDateTime, nullable=False),
    Column("scope_kind", String(20), nullable=False),  # all|project|workflow|host
    Column("scope_value", String(200), nullable=False, default=""),
    Column("source", String(20), nullable=False),  # chat
    Column("created_by", String(120), nullable=False, default=""),
    Column("note", Text, nullable=False, default=""),
    Column("closed_at", UTCDateTime),  # /maint off or expiry (audited once)
    Column("closed_by", String(120)),  # a user, or "expired"
)
Index("ix_alert_maintenance_end", alert_maintenance.c.end_at)

# Is a channel's robot answering, or do its alerts go by e-mail? (shared by replicas, survives restarts)
alert_channel = Table(
    "alert_channel",
    metadata,
    Column("channel", String(80), primary_key=True),
    Column("mode", String(10), nullable=False),  # robot|email
    Column("failures", Integer, nullable=False),  # consecutive failed rows
    Column("last_probe_at", UTCDateTime),
    Column("updated_at", UTCDateTime, nullable=False),
)

# Which pushes went to each robot in the last minute? (WeCom's 20/min, shared by replicas)
alert_robot = Table(
    "alert_robot",
    metadata,
    Column("robot", String(120), primary_key=True),  # the env variable naming the robot key
    Column("sent", Text, nullable=False),  # JSON list of ISO attempt times within the last window
    Column("updated_at", UTCDateTime, nullable=False),
)

# What happened to every failure event and every notification, and why? (pushed, folded, suppressed, sent)
alert_event = Table(
    "alert_event",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("at", UTCDateTime, nullable=False),
    Column("kind", String(20), nullable=False),  # decision|delivery|lifecycle
    Column("event_key", String(500), nullable=False, default=""),
    Column("instance_id", BigInteger),
    Column("workflow", String(200), nullable=False, default=""),
    Column("task", String(200), nullable=False, default=""),
    Column("reason", String(40), nullable=False),  # agent.alerts.model.Reason, or sent|send_failed
    Column("tier", String(4)),
    Column("detail", Text, nullable=False, default=""),
    Column("notification_key", String(500), nullable=False, default=""),
    Column("holder", String(120), nullable=False, default=""),
)
Index("ix_alert_event_at", alert_event.c.at)
Index("ix_alert_event_instance", alert_event.c.instance_id)

# Which alerts are still open, who acknowledged them, what resolved them? One row per failed
# instance (migration 14; agent.alerts.lifecycle): firing → acknowledged → resolved | expired.
alert_life = Table(
    "alert_life",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),  # shown as A<id>; /ack A<id>
    Column("instance_id", BigInteger, nullable=False, unique=True),
    Column("project", String(200), nullable=False, default=""),
    Column("workflow", String(200), nullable=False),
    Column("business_date", String(10), nullable=False, default=""),  # ISO date, "" unknown
    Column("tier", String(4), nullable=False),
    Column("channel", String(80), nullable=False),
    Column("state", String(16), nullable=False),  # firing|acknowledged|resolved|expired
    Column("fired_at", UTCDateTime, nullable=False),
    Column("notification_key", String(500), nullable=False, default=""),
    Column("acked_at", UTCDateTime),
    Column("acked_by", String(120), nullable=False, default=""),
    Column("resolved_at", UTCDateTime),
    Column("resolved_by", String(120), nullable=False, default=""),
    Column("resolved_how", String(40), nullable=False, default=""),
    Column("resolved_instance", BigInteger, nullable=False, default=0),
    Column("pages", Integer, nullable=False, default=0),
    Column("steps_done", String(200), nullable=False, default=""),
    Column("next_page_at", UTCDateTime),
)
Index("ix_alert_life_state", alert_life.c.state, alert_life.c.next_page_at)
Index("ix_alert_life_fired", alert_life.c.fired_at)

# Which step of which alert's escalation chain was paged, whom, when, by which replica? The unique
# (alert, step) is the claim: a step is paged once, whichever replica gets there first.
alert_page = Table(
    "alert_page",
    metadata,
    Column("alert_id", BigInteger, primary_key=True),
    Column(
        "fired", BigInteger, primary_key=True
    ),  # the firing (epoch seconds): a re-fired alert escalates anew
    Column("step", String(20), primary_key=True),  # oncall|secondary|owner|fallback[N]
    Column("person", String(120), nullable=False),
    Column("number", Integer, nullable=False),  # 1 = the first escalation
    Column("paged_at", UTCDateTime, nullable=False),
    Column("holder", String(120), nullable=False, default=""),
)
