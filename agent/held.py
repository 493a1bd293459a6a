"""The lease rule in Python, for rows already read (`xihe.agent.lease` writes the same rule in SQL).

Its own module so that code which only reads leases (the in-memory outbox of `xihe alerts replay`)
does not import SQLAlchemy with `xihe.agent.lease`.
"""

from __future__ import annotations

from datetime import datetime


def is_held(until: datetime | None, now: datetime) -> bool:
    """Whether a lease that runs until `until` is still held at `now` (the rule `held` writes in SQL)."""
    return until is not None and now <= until
