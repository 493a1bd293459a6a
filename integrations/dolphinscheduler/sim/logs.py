"""`GET /log/detail` of the simulated API (a mixin): paging a task's log as the worker does.

The worker skips `skipLineNum` lines and returns up to `limit`, joined with CR LF, stopping early
at about 64 KiB; the first page starts with the `[LOG-PATH]: …, [HOST]: …` header and a LF (one
space after `[HOST]:` in 3.3, two before); past the end the message is `""` with `lineNum` 1;
10008 for an unknown task, 10191 for one not dispatched yet.
"""

from __future__ import annotations

from typing import Any

from xihe.integrations.dolphinscheduler.sim.executors import Reply
from xihe.integrations.dolphinscheduler.sim.model import DolphinModel


class Logs(DolphinModel):
    """Task logs (needs `version`)."""

    version: str

    def _log(self, form: dict[str, str]) -> Any:
        try:
            task_id, skip, limit = (int(form[k]) for k in ("taskInstanceId", "skipLineNum", "limit"))
        except (KeyError, ValueError):
            raise Reply(10001, "request parameter taskInstanceId is not valid") from None
        task = self.tasks.get(task_id)
        if task is None:
            raise Reply(10008, "task instance not found")
        if not task.host:
            raise Reply(10191, "task instance host is null")
        lines = task.log[skip : skip + limit]
        budget, chosen = 64 * 1024, list[str]()
        for line in lines:  # the worker stops early at about 64 KiB
            budget -= len(line) + 2
            if budget < 0 and chosen:
                break
            chosen.append(line)
        message = "\r\n".join(chosen)
        if skip == 0:
            gap = " " if self.version == "3.3" else "  "
            message = f"[LOG-PATH]: {task.log_path}, [HOST]:{gap}{task.host}\n" + message
        if not chosen and skip > 0:
            message = ""
        return {"lineNum": len(message.split("\r\n")), "message": message}
