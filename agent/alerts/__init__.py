"""The alert pipeline: FailureEvent → classify → tier → group → render → outbox → deliver.

Decisions are pure functions of (event, state, config, now) that return a `Reason`; the pipeline
applies them to stores behind Protocols, so the lead can back them with database tables.
"""
