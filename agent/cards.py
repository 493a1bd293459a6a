"""Action cards: a pending action shown as a card with buttons, for channels that can send one.

A channel may be able to send a card with buttons and update it in place later (WeCom's app and AI
bot can; its group robot webhook cannot); the channel holds that capability. A button's key names
the verb, the pending action and the digest of its arguments; a click becomes the same command as
its typed form (`/confirm 12 <digest>`) and goes through the same command code, which refuses it
when the digest no longer matches. Everything here is pure: the card is a description, the channel
renders it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from xihe.agent.pending import PendingAction

KEY_PREFIX = "xihe"
VERBS = ("confirm", "cancel", "approve", "reject")
DIGEST_CHARS = 16  # of the hex args digest: enough to tell arguments apart, short enough for a key


@dataclass(frozen=True)
class Button:
    """One callback button: `key` comes back with the click."""

    text: str
    key: str
    style: int = 1  # 1 primary … 4 negative (WeCom's styles)


@dataclass(frozen=True)
class Card:
    """What a card shows; `closed` (e.g. "Confirmed by alice") greys its buttons out."""

    title: str
    desc: str
    rows: tuple[tuple[str, str], ...]
    buttons: tuple[Button, ...]
    closed: str = ""


def button_key(verb: str, action: PendingAction) -> str:
    """`xihe:<verb>:<action id>:<digest prefix>`: what a click on this button asks for."""
    if verb not in VERBS:
        raise ValueError(f"unknown card verb {verb!r}; one of {', '.join(VERBS)}")
    return f"{KEY_PREFIX}:{verb}:{action.id}:{action.args_digest[:DIGEST_CHARS]}"


def command_of_key(key: str) -> str | None:
    """The typed command a button click stands for (`/confirm 12 digest=<prefix>`), or None for a foreign
    key. The digest is marked, so it is never mistaken for the words a person types after an id
    (`/reject 2 驳回`)."""
    parts = key.split(":")
    if len(parts) != 4 or parts[0] != KEY_PREFIX or parts[1] not in VERBS:
        return None
    _, verb, action_id, digest = parts
    if not action_id.isdigit() or not digest.isalnum():
        return None
    return f"/{verb} {action_id} {DIGEST_ARG}{digest}"


DIGEST_ARG = "digest="


def card_digest(args: Sequence[str]) -> str | None:
    """The digest a card's click carries among a command's arguments, or None for a typed command."""
    return next((a[len(DIGEST_ARG) :] for a in args[1:] if a.startswith(DIGEST_ARG)), None)


def digest_matches(action: PendingAction, given: str) -> bool:
    """A card's digest prefix still names the action's arguments."""
    return len(given) >= 8 and action.args_digest.startswith(given)


def state_text(action: PendingAction, approvers: tuple[str, ...], at: Callable[[datetime], str]) -> str:
    """Where the action stands, in words: what every copy of its card says."""
    waiting_approval = "waiting for approval by " + (", ".join(approvers) or "an approver")
    if action.status == "pending":
        then = f"; then {waiting_approval}" if action.needs_approval else ""
        return f"waiting for {action.user_id}'s confirmation{then}"
    confirmed = f"confirmed by {action.user_id}" + (
        f" at {at(action.confirmed_at)}" if action.confirmed_at else ""
    )
    approved = f"approved by {action.approved_by}" + (
        f" at {at(action.approved_at)}" if action.approved_at else ""
    )
    if action.status == "confirmed":
        if action.needs_approval and action.approved_by is None:
            return f"{confirmed}; {waiting_approval}"
        return f"{confirmed}; {approved}; running" if action.approved_by else f"{confirmed}; running"
    if action.status == "executed":
        return f"{confirmed}; {approved}; executed" if action.approved_by else f"{confirmed}; executed"
    if action.status == "expired":
        return f"expired at {at(action.expires_at)}; nothing was run"
    if action.status == "rejected":
        return "rejected; nothing was run"
    if action.status == "cancelled":
        return f"cancelled by {action.user_id}; nothing was run"
    return action.status


def open_for(action: PendingAction, role: str) -> bool:
    """The card of `role` still takes a click: the requester's while pending, an approver's until decided."""
    if role == "confirm":
        return action.status == "pending"
    return action.status in ("pending", "confirmed") and action.needs_approval and action.approved_by is None


def render(
    action: PendingAction,
    role: str,
    summary: str,
    approvers: tuple[str, ...],
    at: Callable[[datetime], str],
) -> Card:
    """The card of `role` (`confirm`: the requester's; `approve`: an approver's) in the action's state."""
    state = state_text(action, approvers, at)
    rows = (("Asked by", action.user_id), ("Expires", at(action.expires_at)), ("State", state))
    if role == "confirm":
        title = f"Confirm action {action.id}"
        buttons = (
            Button("Confirm", button_key("confirm", action)),
            Button("Cancel", button_key("cancel", action), 4),
        )
    else:
        title = f"Approve action {action.id} ({action.environment})"
        buttons = (
            Button("Approve", button_key("approve", action)),
            Button("Reject", button_key("reject", action), 4),
        )
    closed = "" if open_for(action, role) else state.rsplit("; ", 1)[-1][:20]
    return Card(title, summary, rows, buttons, closed)
