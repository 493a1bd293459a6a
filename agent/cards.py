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
from typing import TYPE_CHECKING

from xihe.agent.i18n import Catalog, Lang, say

if TYPE_CHECKING:  # annotations only: the alert notifiers import cards without the store (SQLAlchemy)
    from xihe.agent.pending import PendingAction
    from xihe.agent.tasks import Task

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


# An alert card's buttons: verb → the chat command a click runs, exactly as if typed (`{ref}`: the
# run's instance id, or the maintenance scope). Rerun goes through the normal confirm flow (a pending
# rerun action, like a typed /rerun); mute is the code of /maint. A new button is one line here.
ALERT_VERBS: dict[str, str] = {
    "ack": "/ack {ref}",
    "rerun": "/rerun {ref}",
    "mute": "/maint on 30m {ref}",
}
ALERT_KEY = f"{KEY_PREFIX}:alert:"


def alert_key(verb: str, ref: str) -> str:
    """`xihe:alert:<verb>:<ref>`: the key of one alert card button."""
    if verb not in ALERT_VERBS:
        raise ValueError(f"unknown alert card verb {verb!r}; one of {', '.join(ALERT_VERBS)}")
    if not ref or any(c.isspace() for c in ref):
        raise ValueError(f"alert card {verb} needs a reference without spaces, not {ref!r}")
    return f"{ALERT_KEY}{verb}:{ref}"


def alert_buttons(instance_id: int, workflow: str, lang: Lang = "en") -> tuple[Button, ...]:
    """The buttons of a P0/P1 alert card about run `instance_id` of `workflow`."""
    return (
        Button(say(CARDS, "alert_ack", lang), alert_key("ack", str(instance_id))),
        Button(say(CARDS, "alert_rerun", lang), alert_key("rerun", str(instance_id))),
        Button(say(CARDS, "alert_mute", lang), alert_key("mute", f"workflow:{workflow}"), 4),
    )


def command_of_key(key: str) -> str | None:
    """The typed command a button click stands for (`/confirm 12 digest=<prefix>`, `/rerun 102`), or
    None for a foreign key. The digest is marked, so it is never mistaken for the words a person
    types after an id (`/reject 2 驳回`)."""
    if key.startswith(ALERT_KEY):
        verb, _, ref = key[len(ALERT_KEY) :].partition(":")
        ok = verb in ALERT_VERBS and ref and not any(c.isspace() for c in ref)
        return ALERT_VERBS[verb].format(ref=ref) if ok else None
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


@dataclass(frozen=True)
class RunSeen:
    """The DolphinScheduler run an executed action started, as its task knows it: `ended` is the final
    state once the watcher saw it end (`SUCCESS`, `FAILURE`, ...), "" while it runs."""

    id: int
    ended: str = ""


def run_seen(task: Task | None) -> RunSeen | None:
    """The latest run `task` started, and how it ended as the watcher recorded it (`run SUCCESS`)."""
    if task is None or not task.runs:
        return None
    outcome = task.outcome or ""
    return RunSeen(task.runs[-1], outcome[len("run ") :] if outcome.startswith("run ") else "")


def state_parts(
    action: PendingAction,
    approvers: tuple[str, ...],
    at: Callable[[datetime], str],
    lang: Lang = "en",
    run: RunSeen | None = None,
) -> list[str]:
    """Where the action stands, in `lang`, oldest fact first: what every copy of its card says."""
    who = say(CARDS, "or", lang).join(approvers) if approvers else say(CARDS, "an_approver", lang)
    waiting_approval = say(CARDS, "waiting_approval", lang, approvers=who)
    if action.status == "pending":
        asked = say(CARDS, "waiting_confirm", lang, user=action.user_id)
        return [asked, say(CARDS, "then", lang, next=waiting_approval)] if action.needs_approval else [asked]
    confirmed = _by(say(CARDS, "confirmed_by", lang, user=action.user_id), action.confirmed_at, at, lang)
    done = [confirmed]
    if action.approved_by:
        done.append(
            _by(say(CARDS, "approved_by", lang, user=action.approved_by), action.approved_at, at, lang)
        )
    if action.status == "confirmed":
        waits = action.needs_approval and action.approved_by is None
        return [*done, waiting_approval if waits else say(CARDS, "running", lang)]
    if action.status == "executed":
        done.append(say(CARDS, "executed", lang))
        if run is not None:
            key, values = ("run_ended", {"state": run.ended}) if run.ended else ("run_started", {})
            done.append(say(CARDS, key, lang, id=run.id, **values))
        return done
    if action.status == "expired":
        return [say(CARDS, "expired", lang, at=at(action.expires_at))]
    if action.status == "rejected":
        by = action.closed_by or say(CARDS, "an_approver", lang)
        key = "rejected_because" if action.close_note else "rejected"
        return [say(CARDS, key, lang, user=by, reason=action.close_note or "")]
    if action.status == "cancelled":
        return [say(CARDS, "cancelled", lang, user=action.closed_by or action.user_id)]
    return [action.status]


def _by(done: str, when: datetime | None, at: Callable[[datetime], str], lang: Lang) -> str:
    return say(CARDS, "at", lang, what=done, at=at(when)) if when else done


def state_text(
    action: PendingAction,
    approvers: tuple[str, ...],
    at: Callable[[datetime], str],
    lang: Lang = "en",
    run: RunSeen | None = None,
) -> str:
    """`state_parts` in one line."""
    return say(CARDS, "sep", lang).join(state_parts(action, approvers, at, lang, run))


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
    lang: Lang = "en",
    run: RunSeen | None = None,
) -> Card:
    """The card of `role` (`confirm`: the requester's; `approve`: an approver's) in the action's state,
    in `lang`; a closed card's greyed button says what became of the action (e.g. "executed")."""
    parts = state_parts(action, approvers, at, lang, run)
    rows = (
        (say(CARDS, "asked_by", lang), action.user_id),
        (say(CARDS, "expires", lang), at(action.expires_at)),
        (say(CARDS, "state", lang), say(CARDS, "sep", lang).join(parts)),
    )
    yes, no = ("confirm", "cancel") if role == "confirm" else ("approve", "reject")
    title = say(CARDS, f"{role}_title", lang, id=action.id, environment=action.environment)
    buttons = (
        Button(say(CARDS, yes, lang), button_key(yes, action)),
        Button(say(CARDS, no, lang), button_key(no, action), 4),
    )
    label = f"closed_{action.status}"
    closed = "" if open_for(action, role) else (say(CARDS, label, lang) if label in CARDS else action.status)
    return Card(title, summary, rows, buttons, closed)


CARDS: Catalog = {
    "confirm_title": {"en": "Confirm action {id}", "zh": "确认操作 {id}"},
    "approve_title": {"en": "Approve action {id} ({environment})", "zh": "审批操作 {id}（{environment}）"},
    "confirm": {"en": "Confirm", "zh": "确认执行"},
    "cancel": {"en": "Cancel", "zh": "取消"},
    "approve": {"en": "Approve", "zh": "批准"},
    "reject": {"en": "Reject", "zh": "拒绝"},
    "asked_by": {"en": "Asked by", "zh": "发起人"},
    "expires": {"en": "Expires", "zh": "过期时间"},
    "state": {"en": "State", "zh": "状态"},
    "sep": {"en": "; ", "zh": "；"},
    "or": {"en": ", ", "zh": "、"},
    "an_approver": {"en": "an approver", "zh": "审批人"},
    "waiting_confirm": {"en": "waiting for {user}'s confirmation", "zh": "等待 {user} 确认"},
    "waiting_approval": {"en": "waiting for approval by {approvers}", "zh": "等待 {approvers} 审批"},
    "then": {"en": "then {next}", "zh": "然后{next}"},
    "confirmed_by": {"en": "confirmed by {user}", "zh": "{user} 已确认"},
    "approved_by": {"en": "approved by {user}", "zh": "{user} 已批准"},
    "at": {"en": "{what} at {at}", "zh": "{what}（{at}）"},
    "running": {"en": "running", "zh": "执行中"},
    "executed": {"en": "executed", "zh": "已执行"},
    "run_started": {"en": "run {id} started", "zh": "运行 {id} 已启动"},
    "run_ended": {"en": "run {id} ended {state}", "zh": "运行 {id} 已结束：{state}"},
    "expired": {"en": "expired at {at}; nothing was run", "zh": "已于 {at} 过期，未执行任何操作"},
    "rejected": {"en": "rejected by {user}; nothing was run", "zh": "{user} 已拒绝，未执行任何操作"},
    "rejected_because": {
        "en": "rejected by {user}: {reason}; nothing was run",
        "zh": "{user} 已拒绝：{reason}；未执行任何操作",
    },
    "cancelled": {"en": "cancelled by {user}; nothing was run", "zh": "{user} 已取消，未执行任何操作"},
    "closed_pending": {"en": "waiting", "zh": "等待中"},
    "closed_confirmed": {"en": "confirmed", "zh": "已确认"},
    "closed_executed": {"en": "executed", "zh": "已执行"},
    "closed_expired": {"en": "expired", "zh": "已过期"},
    "closed_rejected": {"en": "rejected", "zh": "已拒绝"},
    "closed_cancelled": {"en": "cancelled", "zh": "已取消"},
    "alert_ack": {"en": "Acknowledge", "zh": "认领"},
    "alert_rerun": {"en": "Rerun failed tasks", "zh": "重跑失败任务"},
    "alert_mute": {"en": "Mute this workflow 30 min", "zh": "静音此工作流 30 分钟"},
}
