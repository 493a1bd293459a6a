"""Fingerprints ignore the variable parts of an error text."""

from __future__ import annotations

import pytest

from xihe.agent.alerts.fingerprint import fingerprint

SAME = [
    ("numbers", "retry 3 of 5 failed", "retry 4 of 5 failed"),
    ("ip:port", "Connection refused to 10.0.0.5:5432", "Connection refused to 10.0.0.7:5433"),
    ("timestamps", "failed at 2026-12-02 09:01:02.123", "failed at 2026-12-03T10:11:12Z"),
    (
        "uuids",
        "job 3f2b1c4e-1111-2222-3333-444455556666 lost",
        "job 00000000-aaaa-bbbb-cccc-ddddeeeeffff lost",
    ),
    ("hex ids", "container 0xdeadbeef exited", "container 0xcafe exited"),
    ("long hex", "commit abcdef0123456789 missing", "commit 0123456789abcdef missing"),
    ("paths", "No such file /data/etl/2026/12/01/a.csv", "No such file /data/etl/2026/12/02/b.csv"),
    ("host:port", "db-master:3306 timeout", "db-replica:3307 timeout"),
    ("whitespace and case", "Out Of  Memory", "out of memory"),
]


@pytest.mark.parametrize(("name", "a", "b"), SAME, ids=[s[0] for s in SAME])
def test_same_cause_same_fingerprint(name: str, a: str, b: str):
    assert fingerprint(a) == fingerprint(b)


def test_different_causes_differ_and_empty_errors_fall_back_to_workflow_and_task():
    assert fingerprint("disk full") != fingerprint("permission denied")
    assert fingerprint("", "wf", "a") != fingerprint("", "wf", "b")
    assert fingerprint("", "wf", "a") == fingerprint("  ", "wf", "a")
