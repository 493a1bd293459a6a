"""The alert pipeline: AlertEvent → classify → tier → group → render → outbox → deliver.

Events arrive in one shape, `xihe.agent.alert_event.AlertEvent`: the DolphinScheduler feature emits
them (its watcher, webhook and failed-run scan), and a replay file's lines are validated into them
(event.py: the documented JSON-line format). Decisions are pure functions of (event, state,
config, now) that return a `Reason`; the pipeline applies them to stores behind Protocols (in memory,
or SQL in sql/). Messages are rendered before the outbox in the markup of the channel's notifier and
sent by the notifier of the channel's kind (notify/), with e-mail as every channel's fallback.
Each alerted instance then lives on (lifecycle.py, life.py, lifestore.py): acknowledged with `/ack`,
escalated up its chain, resolved by a SUCCESS, measured (measures.py).
"""
