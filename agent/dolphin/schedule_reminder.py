"""The `ds_schedule_reminder` job: a schedule taken offline from chat and still offline is reminded once.

Each due row is claimed by one replica (`ScheduleOffStore.claim_due`); the schedule is read again
from DolphinScheduler first, so one turned back on in its UI meanwhile is dropped, not reminded.
"""

from __future__ import annotations

import logging

from xihe.agent.errors import DolphinError
from xihe.agent.feature import Runtime
from xihe.agent.i18n import Catalog, say_md
from xihe.agent.timefmt import show
from xihe.tools.dolphin.service import service_of

log = logging.getLogger("xihe.dolphin")

REMIND: Catalog = {
    "still_off": {
        "en": "⏰ The schedule of {workflow} (project {project}) is still OFFLINE: {user} took it offline at "
        "{since}. `/schedule {workflow} on` puts it back online.",
        "zh": "⏰ {workflow}（项目 {project}）的定时调度仍是下线状态：{user} 在 {since} 下线了它。"
        "发送 `/schedule {workflow} on` 重新上线。",
    },
}


def remind_schedules(app: Runtime) -> int:
    """Remind the conversations whose schedule is still offline past its time; returns how many."""
    svc = service_of(app.deps)
    if svc is None:
        return 0
    now = app.deps.clock()
    sent = 0
    for row in svc.schedules_off.claim_due(now):
        try:
            found = svc.client.schedules(row.project_code, row.definition_code)
        except DolphinError as exc:
            log.warning("schedule reminder for %s: cannot read its schedule: %s", row.workflow, exc)
            continue
        if not [s for s in found if s.id == row.schedule_id and not s.online]:
            svc.schedules_off.on(row.project_code, row.schedule_id)  # back online (or gone): nothing to say
            continue
        lang = app.deps.lang("", row.conversation)
        since = show(row.off_at, app.deps.settings.core.timezone)
        message = say_md(REMIND, "still_off", lang, workflow=row.workflow, project=row.project, user=row.user,
                         since=since)  # fmt: skip
        app.deps.notify(row.conversation, message)
        sent += 1
    return sent
