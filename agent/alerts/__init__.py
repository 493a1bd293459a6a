"""The alert pipeline: AlertEvent → classify → tier → group → render → outbox → deliver.

Events arrive in one model (`xihe.agent.alerts.event`: the documented JSON-line format; the product's
own FailureEvents are mapped onto it at the edge). Decisions are pure functions of (event, state,
config, now) that return a `Reason`; the pipeline applies them to stores behind Protocols.
"""
