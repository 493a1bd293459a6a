"""Good-traffic latency while a flood of bad callbacks hits the gateway.

Used by test_flood.py; run `python -m tests.wecom.flood [seconds] [bad_workers]` for longer numbers.
Client threads and uvicorn share one process (and its GIL) here, so the numbers are pessimistic.
"""

from __future__ import annotations

import itertools
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import requests
from starlette.applications import Starlette

from tests.wecom.conftest import AES_KEY, AGENT_ID, CORP_ID, TOKEN, ServerThread, make_settings
from tests.wecom.test_routes import BILLION_LAUGHS
from xihe.agent.clock import FakeClock
from xihe.integrations.wecom.aibot import StreamRegistry
from xihe.integrations.wecom.fake import CallbackSender
from xihe.integrations.wecom.inbound import InboundMessage, InMemoryMsgIdStore
from xihe.integrations.wecom.routes import wecom_routes


@dataclass(frozen=True)
class FloodReport:
    """Latency of good requests (seconds) with and without the flood, and what the flood did."""

    baseline_p50: float
    baseline_p95: float
    flood_p50: float
    flood_p95: float
    flood_max: float
    good_requests: int
    good_failures: int
    bad_requests: int
    bad_statuses: dict[int, int]
    seconds: float

    def lines(self) -> str:
        """A short human summary."""
        ms = 1000
        return (
            f"baseline good p50 {self.baseline_p50 * ms:.1f} ms, p95 {self.baseline_p95 * ms:.1f} ms\n"
            f"under flood good p50 {self.flood_p50 * ms:.1f} ms, p95 {self.flood_p95 * ms:.1f} ms, "
            f"max {self.flood_max * ms:.1f} ms over {self.good_requests} requests ({self.good_failures} failed)\n"
            f"flood: {self.bad_requests} bad requests in {self.seconds:.1f} s "
            f"({self.bad_requests / self.seconds:.0f}/s), statuses {dict(sorted(self.bad_statuses.items()))}"
        )


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bad_requests(sender: CallbackSender) -> list[Callable[[requests.Session], requests.Response]]:
    """A rotating mix: forged signature, billion laughs, a full decrypt with bad padding, a 1 MB body."""
    url = sender.base_url + "/wecom/callback"
    good_query, good_body = sender.app_envelope(sender.app_text_xml("mallory", "x", 1, AGENT_ID), AGENT_ID)
    forged = {**good_query, "msg_signature": "0" * 40}
    bad_pad = sender.crypto.encrypt(b"x")[:-8] + "AAAAAAA="
    big = b"A" * (1024 * 1024)
    return [
        lambda s: s.post(url, params=forged, data=good_body, timeout=30),
        lambda s: s.post(url, params=sender.signed_query("x"), data=BILLION_LAUGHS.encode(), timeout=30),
        lambda s: s.post(
            url,
            params=sender.signed_query(bad_pad),
            data=f"<xml><Encrypt>{bad_pad}</Encrypt></xml>".encode(),
            timeout=30,
        ),
        lambda s: s.post(url, params=good_query, data=big, timeout=30),
    ]


def measure(url: str, sender: CallbackSender, *, seconds: float = 2.0, bad_workers: int = 8) -> FloodReport:
    """Baseline latency, then latency of one good client while `bad_workers` threads send bad requests."""
    ids = itertools.count(10_000)
    good_session = requests.Session()

    def one_good() -> tuple[float, bool]:
        query, body = sender.app_envelope(sender.app_text_xml("alice", "ping", next(ids), AGENT_ID), AGENT_ID)
        t0 = time.perf_counter()
        resp = good_session.post(url + "/wecom/callback", params=query, data=body, timeout=30)
        return time.perf_counter() - t0, resp.status_code == 200

    baseline = [one_good()[0] for _ in range(30)]
    stop = threading.Event()
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    kinds = bad_requests(sender)

    def flood(worker: int) -> None:
        session = requests.Session()
        for i in itertools.count(worker):
            if stop.is_set():
                return
            try:
                status = kinds[i % len(kinds)](session).status_code
            except requests.RequestException:
                status = 0
                session = requests.Session()
            with lock:
                statuses[status] += 1

    threads = [threading.Thread(target=flood, args=(w,), daemon=True) for w in range(bad_workers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    latencies: list[float] = []
    failures = 0
    while time.perf_counter() - started < seconds:
        elapsed, ok = one_good()
        latencies.append(elapsed)
        failures += not ok
        time.sleep(0.01)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    took = time.perf_counter() - started
    return FloodReport(
        baseline_p50=statistics.median(baseline),
        baseline_p95=_pct(baseline, 0.95),
        flood_p50=statistics.median(latencies),
        flood_p95=_pct(latencies, 0.95),
        flood_max=max(latencies),
        good_requests=len(latencies),
        good_failures=failures,
        bad_requests=sum(statuses.values()),
        bad_statuses=dict(statuses),
        seconds=took,
    )


def run(seconds: float = 2.0, bad_workers: int = 8) -> tuple[FloodReport, list[InboundMessage]]:
    """Start a gateway on loopback, flood it, return the report and what was dispatched."""
    clock = FakeClock()
    dispatched: list[InboundMessage] = []
    routes = wecom_routes(
        make_settings(), InMemoryMsgIdStore(), dispatched.append, clock, streams=StreamRegistry()
    )
    with ServerThread(Starlette(routes=routes)) as server:
        sender = CallbackSender(server.url, TOKEN, AES_KEY, CORP_ID, clock)
        return measure(server.url, sender, seconds=seconds, bad_workers=bad_workers), dispatched


if __name__ == "__main__":
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    report, _ = run(secs, workers)
    print(report.lines())
