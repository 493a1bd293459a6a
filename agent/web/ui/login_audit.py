"""What failed and refused logins leave behind: few audit rows, each with a count and an actor
marked unverified, and the `xihe_ui_logins_total` counter.

Anyone can post the login form, so nothing here may grow with the number of tries: a client's first
failure in the throttle window is audited (count 1), the lockout that ends the burst is audited with
the number of failures, and the tries in between and during the lockout are only counted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xihe.agent.web.ui.throttle import Attempt, Lock, bounded

if TYPE_CHECKING:
    from xihe.agent.web.ui.page import Pages

ACTOR_CHARS = 64


def unverified(user: str | None) -> str:
    """The audit actor of a name nobody proved: bounded, printable and marked."""
    return f"unverified:{bounded((user or '').strip(), ACTOR_CHARS) or '-'}"


def login_failed(
    ui: Pages, attempt: Attempt, user: str | None, reason: str, via: str, *, verified: bool = False
) -> None:
    """Count a failed try; audit the first of a burst and any lockout it starts. A `verified` user id
    (WeCom proved it, access.yaml does not list it) is audited every time, under that id."""
    now = ui.app.deps.clock()
    ui.app.deps.metrics.ui_logins.labels(outcome="failed").inc()
    if verified:
        ui.audit(user or "-", "login_failed", reason, via=via, client=attempt.client, count=1)
    elif attempt.client_count == 1:
        ui.audit(
            unverified(user),
            "login_failed",
            f"{reason}; further failures from this address are counted, not logged one by one",
            via=via,
            client=attempt.client,
            count=1,
        )
    for lock in ui.throttles.failed(attempt, now, ui.config.login_throttle):
        _audit_lock(ui, lock, user, via)


def locked_out(ui: Pages, lock: Lock, user: str | None, via: str) -> None:
    """A try was refused by a lockout: counted; audited once, when this try started the lock."""
    ui.app.deps.metrics.ui_logins.labels(outcome="locked").inc()
    if lock.new:
        _audit_lock(ui, lock, user, via)


def _audit_lock(ui: Pages, lock: Lock, user: str | None, via: str) -> None:
    what = "user id" if lock.scope == "user" else "client address"
    ui.audit(
        unverified(lock.key if lock.scope == "user" else user),
        "login_locked",
        f"{lock.failures} failed logins for this {what} within the window: locked until {ui.when(lock.until)}",
        via=via,
        scope=lock.scope,
        client=lock.key if lock.scope == "client" else None,
        count=lock.failures,
        until=lock.until.isoformat(),
        users_tried=[unverified(u) for u in lock.users],
    )
