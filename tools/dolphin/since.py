"""Since when, for "what failed since …": 昨晚, last night, since 22:00, 22点, 今天, or any date phrase.

    parse_since("昨晚", now, "Asia/Shanghai")        -> yesterday 18:00 in that zone
    parse_since("since 22:00", now, "Asia/Shanghai") -> the last 22:00 before now
    parse_since("昨天", now, "Asia/Shanghai")         -> yesterday 00:00 (dates.parse_dates reads the rest)
    parse_since("", now, tz)                          -> 24 hours before now

Pure: `now` is a parameter; the answer is an aware datetime.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo

from xihe.tools.dolphin.dates import DateError, parse_dates

EVENING = time(18, 0)  # "last night" starts here
DEFAULT_WINDOW = timedelta(hours=24)

_NIGHT = {"昨晚": -1, "昨夜": -1, "昨天晚上": -1, "昨天夜里": -1, "last night": -1, "今晚": 0, "tonight": 0}
_CLOCK = re.compile(
    r"^(?:since|from|after|从|自)?\s*(\d{1,2})(?::(\d{2})|点(?:(\d{1,2})分?|半)?)\s*(?:以来|之后|起|开始)?$"
)
_WORDS = re.compile(r"^(?:since|from|从|自)\s*|\s*(?:以来|之后|起|开始)$")


def parse_since(text: str, now: datetime, tz: str | tzinfo) -> datetime:
    """The moment `text` means as a lower bound; DateError (says what was not understood) otherwise."""
    zone = ZoneInfo(tz) if isinstance(tz, str) else tz
    local = now.astimezone(zone)
    s = unicodedata.normalize("NFKC", text).strip().lower()
    if not s:
        return now - DEFAULT_WINDOW
    if s in _NIGHT:
        day = local.date() + timedelta(days=_NIGHT[s])
        return datetime.combine(day, EVENING, zone)
    if m := _CLOCK.match(s):
        hour = int(m.group(1))
        minute = int(m.group(2) or m.group(3) or (30 if s.rstrip("以来之后起开始").endswith("半") else 0))
        if hour > 23 or minute > 59:
            raise DateError(text, "unreadable")
        at = datetime.combine(local.date(), time(hour, minute), zone)
        return at if at <= local else at - timedelta(days=1)
    days = parse_dates(_WORDS.sub("", s), now, zone)
    return datetime.combine(days[0], time(0, 0), zone)
