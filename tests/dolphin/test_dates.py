"""Natural dates → backfill dates and DS scheduleTime (fixed now, Asia/Shanghai)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import pytest

from xihe.integrations.dolphinscheduler.schedule import schedule_time_param
from xihe.tools.dolphin.dates import (
    DateError,
    backfill_label,
    biz_date_of,
    parse_dates,
    run_date_label,
    schedule_dates,
)

# 2026-12-05 02:00 UTC = Saturday 2026-12-05 10:00 in Shanghai
NOW = datetime(2026, 12, 5, 2, 0, tzinfo=UTC)
TZ = "Asia/Shanghai"
D = date


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("昨天", [D(2026, 12, 4)]),
        ("前天", [D(2026, 12, 3)]),
        ("今天", [D(2026, 12, 5)]),
        ("上周一", [D(2026, 11, 23)]),
        ("上周五", [D(2026, 11, 27)]),
        ("本周一", [D(2026, 11, 30)]),
        ("周三", [D(2026, 12, 2)]),
        ("12月1日到3日", [D(2026, 12, 1), D(2026, 12, 2), D(2026, 12, 3)]),
        ("12月1日-12月3日", [D(2026, 12, 1), D(2026, 12, 2), D(2026, 12, 3)]),
        ("12月1号至12月2号", [D(2026, 12, 1), D(2026, 12, 2)]),
        ("11月30日", [D(2026, 11, 30)]),
        ("2025年12月1日", [D(2025, 12, 1)]),
        ("昨天的", [D(2026, 12, 4)]),
        ("yesterday", [D(2026, 12, 4)]),
        ("Yesterday ", [D(2026, 12, 4)]),
        ("last monday", [D(2026, 11, 30)]),
        ("last friday", [D(2026, 12, 4)]),
        ("3 days ago", [D(2026, 12, 2)]),
        ("2026-12-01", [D(2026, 12, 1)]),
        ("20261201", [D(2026, 12, 1)]),
        ("2026/12/01", [D(2026, 12, 1)]),
        ("2026-12-01..2026-12-03", [D(2026, 12, 1), D(2026, 12, 2), D(2026, 12, 3)]),
        ("2026-12-01 - 2026-12-02", [D(2026, 12, 1), D(2026, 12, 2)]),
        ("from 2026-11-29 to 2026-12-01", [D(2026, 11, 29), D(2026, 11, 30), D(2026, 12, 1)]),
        ("Dec 1 to 3", [D(2026, 12, 1), D(2026, 12, 2), D(2026, 12, 3)]),
        ("12月1日、11月28日", [D(2026, 11, 28), D(2026, 12, 1)]),
        ("2026-12-01, 2026-12-03", [D(2026, 12, 1), D(2026, 12, 3)]),
    ],
)
def test_parse_dates(text: str, expected: list[date]) -> None:
    assert parse_dates(text, NOW, TZ) == expected


def test_zone_decides_what_yesterday_is() -> None:
    late_utc = datetime(2026, 12, 4, 17, 0, tzinfo=UTC)  # already 12-05 01:00 in Shanghai
    assert parse_dates("昨天", late_utc, TZ) == [D(2026, 12, 4)]
    assert parse_dates("yesterday", late_utc, "UTC") == [D(2026, 12, 3)]


def test_month_without_year_after_new_year_means_last_year() -> None:
    january = datetime(2027, 1, 3, 2, 0, tzinfo=UTC)
    assert parse_dates("12月30日", january, TZ) == [D(2026, 12, 30)]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("明天", "future"),
        ("2026-12-06", "future"),
        ("12月1日到12月9日", "future"),
        ("2026-01-01..2026-12-01", "at most 100"),
        ("2026-12-03..2026-12-01", "before it starts"),
        ("2月30日", "not a valid date"),
        ("whenever", "could not read"),
        ("", "no date"),
    ],
)
def test_refusals_name_the_input(text: str, reason: str) -> None:
    with pytest.raises(DateError) as err:
        parse_dates(text, NOW, TZ)
    assert reason in err.value.reason
    if text:
        assert text in err.value.reason


def test_exactly_100_dates_is_allowed() -> None:
    assert len(parse_dates("2026-08-28..2026-12-05", NOW, TZ)) == 100


def test_schedule_time_range_for_contiguous_dates() -> None:
    value = json.loads(schedule_time_param([D(2026, 12, 3), D(2026, 12, 1), D(2026, 12, 2)]))
    assert value == {"complementStartDate": "2026-12-01 00:00:00", "complementEndDate": "2026-12-03 00:00:00"}


def test_schedule_time_single_date_is_a_one_day_range() -> None:
    value = json.loads(schedule_time_param([D(2026, 12, 4)]))
    assert value["complementStartDate"] == value["complementEndDate"] == "2026-12-04 00:00:00"


def test_schedule_time_list_for_gaps() -> None:
    value = json.loads(schedule_time_param([D(2026, 12, 4), D(2026, 12, 1), D(2026, 12, 1)]))
    assert value == {"complementScheduleDateList": "2026-12-01 00:00:00,2026-12-04 00:00:00"}


def test_schedule_time_refuses_empty_and_too_many() -> None:
    with pytest.raises(ValueError):
        schedule_time_param([])
    with pytest.raises(ValueError):
        schedule_time_param([D(2026, 1, 1) + (D(2026, 1, 2) - D(2026, 1, 1)) * i for i in range(101)])


def test_business_dates_map_to_schedule_times_by_the_workflow_offset() -> None:
    (yesterday,) = parse_dates("昨天", NOW, TZ)
    assert schedule_dates([yesterday], 1) == [D(2026, 12, 5)]  # ${system.biz.date} = scheduleTime - 1 day
    assert schedule_dates([yesterday], 0) == [D(2026, 12, 4)]  # ${system.biz.curdate}
    assert biz_date_of(D(2026, 12, 5), 1) == yesterday
    assert json.loads(schedule_time_param(schedule_dates([yesterday], 1))) == {
        "complementStartDate": "2026-12-05 00:00:00",
        "complementEndDate": "2026-12-05 00:00:00",
    }


def test_labels_show_the_business_date_and_the_schedule_time_in_the_readers_language() -> None:
    assert backfill_label([D(2026, 12, 1)], 1) == "business date 2026-12-01 → scheduleTime 2026-12-02"
    assert backfill_label([D(2026, 12, 1)], 1, "zh") == "业务日期 2026-12-01 → scheduleTime 2026-12-02"
    three = [D(2026, 12, 3), D(2026, 12, 1), D(2026, 12, 2)]
    assert backfill_label(three, 1) == (
        "business dates 2026-12-01 … 2026-12-03 → scheduleTime 2026-12-02 … 2026-12-04 "
        "(3 dates, one after another)"
    )
    assert backfill_label(three, 1, "zh") == (
        "业务日期 2026-12-01 … 2026-12-03 → scheduleTime 2026-12-02 … 2026-12-04（共 3 个日期，依次运行）"
    )
    assert run_date_label(D(2026, 12, 2), 1) == "2026-12-01 (scheduleTime 2026-12-02)"
    assert run_date_label(D(2026, 12, 2), 0) == "2026-12-02"
