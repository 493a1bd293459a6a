"""Natural dates and ranges (Chinese and English) → backfill dates → scheduleTime dates.

    parse_dates("12月1日到3日", now, "Asia/Shanghai")  -> [2026-12-01, 2026-12-02, 2026-12-03]
    parse_dates("上周", now, "Asia/Shanghai")          -> Monday … Sunday of last week (7 dates)
    schedule_dates(dates, 1) -> [2026-12-02, 2026-12-03, 2026-12-04]

The `scheduleTime` JSON a start sends is built by integrations/dolphinscheduler/schedule.py.

People name business dates: the day whose data a run loads. DolphinScheduler starts a backfill
run per scheduleTime, and `${system.biz.date}` inside it is scheduleTime minus one day, so
"补跑昨天的" means scheduleTime = today. Each workflow says how many days lie between the two
(`biz_date_offset` in workflows.yaml, default 1); messages show both dates.

Relative words (昨天, 前天, yesterday, 3 days ago) go to `dateparser` with `RELATIVE_BASE=now` in the
configured zone; forms dateparser misreads or lacks are handled first: ISO dates, `12月1日`, a bare
day (`3日` would otherwise mean "3 days ago"), weekdays (上周一, last monday) and whole weeks and
months (上周, 上个月, last week, this month: every date of it, the current one up to today). Ranges are split
here (`..`, `到`, `至`, `~`, `to`, `from X to Y`, `12月1日-12月3日`); a right side without month or
year inherits them from the left. Future dates and more than 100 dates are refused with a reason
that names the input. Pure: `now` is a parameter.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from datetime import date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

import dateparser

from xihe.agent.errors import ToolRetry
from xihe.agent.i18n import Catalog, Lang, say
from xihe.agent.i18n import text as i18n_text
from xihe.integrations.dolphinscheduler.schedule import MAX_DATES

_RANGE = re.compile(
    r"^(?:from\s+)?(?P<a>.+?)\s*(?:\.\.|~|到|至|\bto\b|—|–|\bthrough\b|\buntil\b)\s*(?P<b>.+)$"
)
_HYPHEN_RANGE = re.compile(r"^(?P<a>.+?[日号])\s*-\s*(?P<b>.+)$|^(?P<c>.+?)\s+-\s+(?P<d>.+)$")
_LIST_SEP = re.compile(r"\s*(?:,|、|;|\band\b|和)\s*")
_ISO = re.compile(r"^(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})$|^(\d{4})(\d{2})(\d{2})$")
_CN_MONTH_DAY = re.compile(r"^(?:(\d{4})年)?(\d{1,2})月(\d{1,2})[日号]?$")
_MONTH_SLASH = re.compile(r"^(\d{1,2})/(\d{1,2})$")
_DAY_ONLY = re.compile(r"^(\d{1,2})[日号]?$")
_CN_WEEK = re.compile(r"^(上上|上|本|这|下)?(?:周|星期|礼拜)([一二三四五六日天1-7])$")
_EN_WEEK = re.compile(r"^(last|this|past|previous)?\s*(mon|tue|wed|thu|fri|sat|sun)[a-z]*$")
_CN_WEEKDAY = {
    "一": 0,
    "二": 1,
    "三": 2,
    "四": 3,
    "五": 4,
    "六": 5,
    "日": 6,
    "天": 6,
    "1": 0,
    "2": 1,
    "3": 2,
    "4": 3,
    "5": 4,
    "6": 5,
    "7": 6,
}
_PERIOD = re.compile(
    r"^(?:(?P<zh>上上|上个?|本|这个?)(?P<zh_unit>周|星期|礼拜|月)"
    r"|(?P<en>last|this|previous|past)\s+(?P<en_unit>week|month))$"
)
_PERIOD_OFFSET = {"上上": -2, "上": -1, "上个": -1, "本": 0, "这": 0, "这个": 0}
_EN_PERIOD_OFFSET = {"last": -1, "previous": -1, "past": -1, "this": 0}
_EN_WEEKDAY = {"mon": 0, "tue": 1, "wed": 2, "thu": 3, "fri": 4, "sat": 5, "sun": 6}
_WEEK_OFFSET = {"上上": -2, "上": -1, "本": 0, "这": 0, "下": 1, None: 0}


DATES: Catalog = {  # why a date phrase cannot be used; English for the model, zh/en for people
    "invalid": {
        "en": "'{text}': {part} is not a valid date ({error})",
        "zh": "“{text}”：{part} 不是有效的日期（{error}）",
    },
    "unreadable": {
        "en": "could not read a date from '{text}' (try 2026-12-01, 昨天 or 12月1日到3日)",
        "zh": "无法从“{text}”读出日期（试试 2026-12-01、昨天 或 12月1日到3日）",
    },
    "none": {
        "en": "no date given (try 2026-12-01, 昨天 or 12月1日到3日)",
        "zh": "没有给出日期（试试 2026-12-01、昨天 或 12月1日到3日）",
    },
    "backwards": {
        "en": "'{text}': the range ends ({end}) before it starts ({start})",
        "zh": "“{text}”：范围的结束日期（{end}）早于开始日期（{start}）",
    },
    "range_too_many": {
        "en": "'{text}' covers {count} dates; DolphinScheduler backfills at most {limit}",
        "zh": "“{text}”包含 {count} 个日期；DolphinScheduler 一次最多补数 {limit} 个",
    },
    "list_too_many": {
        "en": "'{text}' names {count} dates; DolphinScheduler backfills at most {limit}",
        "zh": "“{text}”列出了 {count} 个日期；DolphinScheduler 一次最多补数 {limit} 个",
    },
    "future": {
        "en": "'{text}' includes {day}, which is in the future (today is {today} in {zone}); only past "
        "dates can be backfilled",
        "zh": "“{text}”包含 {day}，这是将来的日期（{zone} 的今天是 {today}）；只能补过去的日期",
    },
}


class DateError(ToolRetry):
    """A date phrase that cannot be used for a backfill; `reason` (English) names the input, the
    error's `text` says the same in people's language."""

    def __init__(self, text: str, key: str, /, **values: object) -> None:
        message = i18n_text(DATES, key, text=text, **values)
        self.phrase, self.reason = text, str(message)
        super().__init__(message)


def _zone(tz: str | tzinfo) -> tzinfo:
    return ZoneInfo(tz) if isinstance(tz, str) else tz


def _normalise(text: str) -> str:
    s = unicodedata.normalize("NFKC", text).strip().lower()
    s = re.sub(r"(的数据|的|那天|那一天|这天)$", "", s).strip()
    return s


def _week_day(today: date, weeks: int, weekday: int) -> date:
    monday = today - timedelta(days=today.weekday())
    return monday + timedelta(weeks=weeks, days=weekday)


def _period(s: str, today: date) -> tuple[date, date] | None:
    """上周 / 上个月 / last week / this month: the whole week (Monday to Sunday) or calendar month; the
    current one runs up to today."""
    m = _PERIOD.match(s)
    if m is None:
        return None
    if m.group("zh"):
        shift, month = _PERIOD_OFFSET[m.group("zh")], m.group("zh_unit") == "月"
    else:
        shift, month = _EN_PERIOD_OFFSET[m.group("en")], m.group("en_unit") == "month"
    if month:
        index = today.year * 12 + today.month - 1 + shift
        first = date(index // 12, index % 12 + 1, 1)
        after = date((index + 1) // 12, (index + 1) % 12 + 1, 1)
        return first, min(after - timedelta(days=1), today)
    monday = _week_day(today, shift, 0)
    return monday, min(monday + timedelta(days=6), today)


def _one(text: str, today: date, local_now: datetime, zone: tzinfo, left: date | None) -> date | None:
    """Read one date; `left` is the start of a range, whose month/year a bare right side inherits."""
    if m := _ISO.match(text):
        y, mo, d = (
            (m.group(1), m.group(2), m.group(3)) if m.group(1) else (m.group(4), m.group(5), m.group(6))
        )
        return date(int(y), int(mo), int(d))
    if m := _CN_MONTH_DAY.match(text):
        month, day = int(m.group(2)), int(m.group(3))
        if m.group(1):
            return date(int(m.group(1)), month, day)
        year = left.year if left else today.year
        if left is None and month > today.month:
            year -= 1  # "12月30日" said in January means last December
        return date(year, month, day)
    if m := _MONTH_SLASH.match(text):
        month, day = int(m.group(1)), int(m.group(2))
        year = left.year if left else (today.year - 1 if month > today.month else today.year)
        return date(year, month, day)
    if m := _DAY_ONLY.match(text):
        base = left or today
        return date(base.year, base.month, int(m.group(1)))
    if m := _CN_WEEK.match(text):
        return _week_day(today, _WEEK_OFFSET[m.group(1)], _CN_WEEKDAY[m.group(2)])
    if m := _EN_WEEK.match(text):
        weekday = _EN_WEEKDAY[m.group(2)[:3]]
        if m.group(1) == "this":
            return _week_day(today, 0, weekday)
        back = (today.weekday() - weekday) % 7
        if m.group(1) and back == 0:
            back = 7  # "last monday" said on a Monday means a week ago
        return today - timedelta(days=back)
    parsed = dateparser.parse(
        text,
        languages=["zh", "en"],
        settings={
            "RELATIVE_BASE": local_now.replace(tzinfo=None),
            "PREFER_DATES_FROM": "past",
            "TIMEZONE": str(zone),
            "RETURN_AS_TIMEZONE_AWARE": False,
        },
    )
    return parsed.date() if parsed else None


def _read(text: str, part: str, today: date, local_now: datetime, zone: tzinfo, left: date | None) -> date:
    try:
        value = _one(part, today, local_now, zone, left)
    except ValueError as exc:  # e.g. 2月30日
        raise DateError(text, "invalid", part=part, error=exc) from None
    if value is None:
        raise DateError(text, "unreadable")
    return value


def _split_range(s: str) -> tuple[str, str] | None:
    if _ISO.match(s):
        return None
    if m := _RANGE.match(s):
        return m.group("a").strip(), m.group("b").strip()
    if m := _HYPHEN_RANGE.match(s):
        a, b = (m.group("a"), m.group("b")) if m.group("a") else (m.group("c"), m.group("d"))
        return a.strip(), b.strip()
    return None


def parse_dates(text: str, now: datetime, tz: str | tzinfo) -> list[date]:
    """Dates named by `text` (one date, a range, or a list), sorted; DateError when unusable."""
    zone = _zone(tz)
    local_now = now.astimezone(zone)
    today = local_now.date()
    s = _normalise(text)
    if not s:
        raise DateError(text, "none")
    dates: list[date] = []
    if period := _period(s, today):
        start, end = period
        dates = [start + timedelta(days=i) for i in range((end - start).days + 1)]
    elif rng := _split_range(s):
        start = _read(text, rng[0], today, local_now, zone, None)
        end = _read(text, rng[1], today, local_now, zone, start)
        if end < start:
            raise DateError(text, "backwards", end=end, start=start)
        count = (end - start).days + 1
        if count > MAX_DATES:
            raise DateError(text, "range_too_many", count=count, limit=MAX_DATES)
        dates = [start + timedelta(days=i) for i in range(count)]
    else:
        parts = [p for p in _LIST_SEP.split(s) if p]
        left: date | None = None
        for part in parts:
            value = _read(text, part, today, local_now, zone, left)
            dates.append(value)
            left = value
    dates = sorted(set(dates))
    if len(dates) > MAX_DATES:
        raise DateError(text, "list_too_many", count=len(dates), limit=MAX_DATES)
    future = [d for d in dates if d > today]
    if future:
        raise DateError(text, "future", day=future[0].isoformat(), today=today.isoformat(), zone=zone)
    return dates


def schedule_dates(biz_dates: Sequence[date], offset: int) -> list[date]:
    """The scheduleTime dates that load `biz_dates` (scheduleTime = business date + offset days)."""
    return [d + timedelta(days=offset) for d in biz_dates]


def biz_date_of(schedule: date, offset: int) -> date:
    """The business date a run with this scheduleTime loads."""
    return schedule - timedelta(days=offset)


def _span(days: Sequence[date]) -> str:
    return days[0].isoformat() if len(days) == 1 else f"{days[0].isoformat()} … {days[-1].isoformat()}"


LABELS: Catalog = {  # a backfill's dates for people (scheduleTime is DolphinScheduler's own word)
    "one": {
        "en": "business date {dates} → scheduleTime {schedules}",
        "zh": "业务日期 {dates} → scheduleTime {schedules}",
    },
    "many": {
        "en": "business dates {dates} → scheduleTime {schedules} ({n} dates, one after another)",
        "zh": "业务日期 {dates} → scheduleTime {schedules}（共 {n} 个日期，依次运行）",
    },
}


def backfill_label(biz_dates: Sequence[date], offset: int, lang: Lang = "en") -> str:
    """`business date 2026-12-01 → scheduleTime 2026-12-02` in `lang` (a range as first … last)."""
    days = sorted(biz_dates)
    spans = {"dates": _span(days), "schedules": _span(schedule_dates(days, offset)), "n": len(days)}
    return say(LABELS, "one" if len(days) == 1 else "many", lang, **spans)


def run_date_label(schedule: date, offset: int) -> str:
    """One run's dates: `2026-12-01 (scheduleTime 2026-12-02)`; just the date when they coincide."""
    biz = biz_date_of(schedule, offset)
    return biz.isoformat() if offset == 0 else f"{biz.isoformat()} (scheduleTime {schedule.isoformat()})"
