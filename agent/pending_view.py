"""A waiting action as approvers read it: a human summary, readable arguments, who can release it.

Shared by the web pending page and the chat `/pending` command, so both say the same thing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from xihe.agent.deps import Deps
from xihe.agent.errors import BotError
from xihe.agent.gate import Allow, may_approve
from xihe.agent.i18n import Catalog, Lang, say
from xihe.agent.pending import PendingAction
from xihe.agent.user_text import readable_args


@dataclass(frozen=True)
class PendingView:
    """What to show for one pending action."""

    action: PendingAction
    summary: str  # "start payment_reconcile on prod, backfill 2026-12-01", or the tool and its arguments
    arguments: str  # `key: value` lines, secrets masked, non-ASCII as characters
    approvers: tuple[str, ...]  # users who may /approve it (empty when no approval is needed)
    waiting_for: str  # "alice's /confirm", "an approver: carol, dave", "release"


def approvers_for(action: PendingAction, deps: Deps) -> tuple[str, ...]:
    """Users who hold an approver role and are not the requester."""
    access = deps.settings.access
    return tuple(sorted(u for u in access.users if isinstance(may_approve(u, action.user_id, access), Allow)))


WAITING: Catalog = {
    "confirm": {"en": "{user}'s /confirm", "zh": "{user} 的 /confirm"},
    "then": {
        "en": "{first}, then an approver ({approvers})",
        "zh": "{first}，然后由审批人批准（{approvers}）",
    },
    "approver": {"en": "an approver: {approvers}", "zh": "审批人批准：{approvers}"},
    "release": {"en": "release", "zh": "执行"},
    "nobody": {"en": "none configured", "zh": "未配置审批人"},
}


def view(action: PendingAction, deps: Deps, registry: Any, lang: Lang = "en") -> PendingView:
    """The summary, arguments and approvers of `action`, for people."""
    try:
        data = json.loads(action.args_json)
    except ValueError:
        data = {}
    spec = registry.specs.get(action.tool) if registry is not None else None
    secret = spec.secret_args if spec is not None else frozenset()
    shown = deps.redactor.data(data, secret) if isinstance(data, dict) else {}
    summary = ""
    if spec is not None and spec.explain is not None:
        try:
            summary = spec.explain(spec.prepared(spec.args.model_validate(data), deps), deps, lang)
        except (ValidationError, BotError, ValueError):
            summary = ""
    env = f" on {action.environment}" if action.environment else ""
    summary = deps.redactor.text(summary) if summary else f"{action.tool}{env}"
    approvers = approvers_for(action, deps) if action.needs_approval else ()
    names = ", ".join(approvers) or say(WAITING, "nobody", lang)
    if action.status == "pending":
        waiting = say(WAITING, "confirm", lang, user=action.user_id)
        if action.needs_approval:
            waiting = say(WAITING, "then", lang, first=waiting, approvers=names)
    elif action.needs_approval and action.approved_by is None:
        waiting = say(WAITING, "approver", lang, approvers=names)
    else:
        waiting = say(WAITING, "release", lang)
    return PendingView(action, summary, readable_args(shown), approvers, waiting)
