"""Times shown to people carry the configured zone's explicit offset."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from xihe.agent.timefmt import offset_of, show

NOON_UTC = datetime(2026, 12, 2, 4, 5, 6, tzinfo=UTC)


@pytest.mark.parametrize(
    ("tz", "kw", "expected"),
    [
        ("Asia/Shanghai", {}, "2026-12-02 12:05:06 +08:00"),
        ("UTC", {}, "2026-12-02 04:05:06 +00:00"),
        ("America/New_York", {}, "2026-12-01 23:05:06 -05:00"),
        ("Asia/Kolkata", {"seconds": False}, "2026-12-02 09:35 +05:30"),
        ("Asia/Shanghai", {"date": False}, "12:05:06 +08:00"),
        (timezone(timedelta(hours=-3, minutes=-30)), {}, "2026-12-02 00:35:06 -03:30"),
    ],
)
def test_show_uses_zone_and_explicit_offset(tz, kw, expected):
    assert show(NOON_UTC, tz, **kw) == expected


def test_show_never_prints_an_abbreviation():
    assert "CST" not in show(NOON_UTC, "Asia/Shanghai")


def test_naive_is_utc_and_none_is_dash():
    assert show(NOON_UTC.replace(tzinfo=None), "Asia/Shanghai") == "2026-12-02 12:05:06 +08:00"
    assert show(None, "Asia/Shanghai") == "-"


def test_offset_of_rejects_naive():
    with pytest.raises(ValueError, match="naive"):
        offset_of(NOON_UTC.replace(tzinfo=None))
