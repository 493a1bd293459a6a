"""Label the timestamps of DolphinScheduler task-log lines with their zone.

The simulator writes task-log lines as `[INFO] 2026-12-02 03:01:48 - message`: the worker's clock
(the server's zone, UTC by default) with no zone label, so at 3 am `03:01:48` next to an alert time
of `11:01:48 +08:00` reads as a contradiction. Unverified against a real worker: DolphinScheduler
3.x's task logback pattern may already print an offset (`2026-12-02 03:01:48.123 +0000`); a time
that already carries one (`+0800`, `+08:00`, `Z`, `UTC`) is left as it is, so either form ends up
labelled once. Only the first timestamp of a line is labelled (the line's own time, not a time in
its message).
"""

from __future__ import annotations

import re
from datetime import datetime, tzinfo

_STAMP = re.compile(r"(?P<stamp>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:[.,]\d{1,9})?(?!\d)")
_LABELLED = re.compile(r"\s*(?:[+-]\d{2}:?\d{2}\b|Z\b|UTC\b|GMT\b)")


def _offset(stamp: str, zone: tzinfo) -> str | None:
    try:
        local = datetime.strptime(stamp.replace("T", " "), "%Y-%m-%d %H:%M:%S").replace(tzinfo=zone)
    except ValueError:
        return None
    delta = local.utcoffset()
    if delta is None:
        return None
    minutes = int(delta.total_seconds() // 60)
    sign, (hours, mins) = ("+" if minutes >= 0 else "-"), divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}:{mins:02d}"


def label_log_line(line: str, zone: tzinfo) -> str:
    """`line` with its first unlabelled timestamp followed by the zone's offset (`03:01:48 +00:00`)."""
    m = _STAMP.search(line)
    if m is None or _LABELLED.match(line, m.end()):
        return line
    offset = _offset(m.group("stamp"), zone)
    if offset is None:
        return line
    return f"{line[: m.end()]} {offset}{line[m.end() :]}"
