"""Good-traffic latency through a real `xihe serve` process while a flood of bad callbacks hits it.

Run `python -m tests.serve.test_flood [seconds] [bad_workers]` for longer numbers. The flood clients
and the fakes share the test process; the server is its own process (with its own GIL).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from tests.serve.harness import AGENT_ID, CORP_ID, SECRET, Replica, serve_config, wait_until
from tests.wecom.flood import FloodReport, measure
from xihe.integrations.wecom.fake import FakeWeCom


def flood_real_server(
    replica: Replica, fake: FakeWeCom, seconds: float, bad_workers: int
) -> tuple[FloodReport, int]:
    """Measure, then wait until every good message was answered; (report, answers)."""
    report = measure(replica.url, replica.app_sender(), seconds=seconds, bad_workers=bad_workers)
    good = report.good_requests + 30
    wait_until(lambda: len(fake.contents("alice")) >= good, timeout=120, what="answers to the good messages")
    return report, len(fake.contents("alice"))


def test_good_traffic_through_xihe_serve_during_a_flood(
    tmp_path: Path, sqlite_url: str, fake_wecom: FakeWeCom, start_replica: Callable[..., Replica]
) -> None:
    bot = start_replica(serve_config(tmp_path / "cfg", fake_wecom), sqlite_url)
    report, answers = flood_real_server(bot, fake_wecom, seconds=3.0, bad_workers=8)
    print("\n" + report.lines())
    assert report.good_failures == 0
    assert answers == report.good_requests + 30  # every good message answered once
    assert fake_wecom.contents("mallory") == []  # no bad request did any work
    assert 0 not in report.bad_statuses and set(report.bad_statuses) <= {400, 401, 413}
    assert report.bad_requests > 50
    assert report.flood_p95 < 1.0  # WeCom allows 5 s
    handled = bot.metric("xihe_messages_total", channel="wecom_app", kind="chat")
    assert handled == answers
    assert bot.metric("xihe_messages_total", channel="wecom_app", kind="rejected_401") > 0


if __name__ == "__main__":
    import pytest

    from tests.conftest import write_config  # noqa: F401  (the harness needs the repo on sys.path)

    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    with tempfile.TemporaryDirectory() as tmp, FakeWeCom() as fake:
        fake.add_app(CORP_ID, SECRET, AGENT_ID)
        root = Path(tmp)
        mp = pytest.MonkeyPatch()
        mp.setenv("NO_PROXY", "127.0.0.1,localhost")
        replica = Replica(
            serve_config(root / "cfg", fake), f"sqlite:///{root / 'x.db'}", root, "r1"
        ).wait_ready()
        try:
            rep, n = flood_real_server(replica, fake, secs, workers)
            print(rep.lines())
            print(f"{n} good messages answered")
        finally:
            replica.terminate()
