"""`/failed [since]`: what each way of saying "since when" means, in the workflows' zone (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from xihe.tools.dolphin.dates import DateError
from xihe.tools.dolphin.since import parse_since

SH = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 12, 5, 1, 30, tzinfo=UTC)  # 09:30 on 12-05 in Shanghai


@pytest.mark.parametrize(
    ("said", "means"),
    [
        ("昨晚", datetime(2026, 12, 4, 18, 0, tzinfo=SH)),
        ("last night", datetime(2026, 12, 4, 18, 0, tzinfo=SH)),
        ("昨天晚上", datetime(2026, 12, 4, 18, 0, tzinfo=SH)),
        ("since 22:00", datetime(2026, 12, 4, 22, 0, tzinfo=SH)),  # 22:00 today is still ahead
        ("since 08:15", datetime(2026, 12, 5, 8, 15, tzinfo=SH)),
        ("22点", datetime(2026, 12, 4, 22, 0, tzinfo=SH)),
        ("从22点半", datetime(2026, 12, 4, 22, 30, tzinfo=SH)),
        ("9点以来", datetime(2026, 12, 5, 9, 0, tzinfo=SH)),
        ("昨天", datetime(2026, 12, 4, 0, 0, tzinfo=SH)),
        ("ＳＩＮＣＥ　２２：００", datetime(2026, 12, 4, 22, 0, tzinfo=SH)),  # full-width, as phones type it
        ("", NOW - timedelta(hours=24)),
    ],
)
def test_since_means_the_last_such_moment_before_now(said: str, means: datetime) -> None:
    assert parse_since(said, NOW, "Asia/Shanghai") == means


def test_the_zone_is_the_workflows_not_the_servers() -> None:
    assert parse_since("昨晚", NOW, "UTC") == datetime(2026, 12, 4, 18, 0, tzinfo=UTC)


@pytest.mark.parametrize("said", ["since 25:00", "since 22:61", "whenever"])
def test_what_is_not_a_time_is_an_error_naming_it(said: str) -> None:
    with pytest.raises(DateError) as err:
        parse_since(said, NOW, "Asia/Shanghai")
    assert err.value.phrase == said
