"""Fixtures for tests that run real `xihe serve` processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.serve.harness import AGENT_ID, CORP_ID, SECRET, Replica
from xihe.integrations.wecom.fake import FakeWeCom


@pytest.fixture
def fake_wecom() -> Iterator[FakeWeCom]:
    """WeCom's app API and response_url on loopback (real clock, like the servers)."""
    with FakeWeCom() as fake:
        fake.add_app(CORP_ID, SECRET, AGENT_ID)
        yield fake


@pytest.fixture
def start_replica(tmp_path: Path) -> Iterator[Callable[..., Replica]]:
    """Start `xihe serve` processes; every one still running is stopped at the end."""
    started: list[Replica] = []

    def start(config: Path, db_url: str, name: str = "r1", env: dict[str, str] | None = None) -> Replica:
        replica = Replica(config, db_url, tmp_path, name, env).wait_ready()
        started.append(replica)
        return replica

    yield start
    for replica in started:
        if replica.proc.poll() is None:
            replica.terminate()
