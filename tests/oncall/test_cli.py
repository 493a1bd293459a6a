"""`xihe oncall show [--at TIME] [--team T]`: the rotation at a time, with the stored overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.oncall.conftest import OnCallApp
from xihe.agent.cli.main import main
from xihe.agent.clock import FakeClock
from xihe.agent.inbound import Inbound


def test_show_at_a_time_per_team_with_overrides(
    oncall_app: OnCallApp,
    clock: FakeClock,
    sqlite_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = oncall_app()
    app.session.handle(Inbound("lisi", "c1", "/oncall take 2h"))  # 17:00-19:00 +08:00 on 2026-12-02
    config = Path(app.settings.directory)
    monkeypatch.setenv("XIHE_DATABASE_URL", sqlite_url)

    def show(*extra: str) -> str:
        assert main(["--config", str(config), "oncall", "show", *extra]) == 0
        return capsys.readouterr().out

    during = show("--at", "2026-12-02T18:00:00+08:00", "--team", "data")
    assert "primary 李四 (lisi), secondary Bob (bob)" in during and "override #1" in during
    assert "reports" not in during
    naive = show("--at", "2026-12-02 19:30")  # xihe.yaml's zone: after the take ended
    assert "**data**: primary Alice (alice)" in naive and "**reports**" in naive and "override" not in naive
    next_week = show("--at", "2026-12-07T10:00+08:00")
    assert "**data**: primary Bob (bob), secondary 李四 (lisi)" in next_week
    assert main(["--config", str(config), "oncall", "show", "--team", "dta"]) == 2
    assert "unknown team 'dta' (did you mean 'data'?)" in capsys.readouterr().err
    assert main(["--config", str(config), "oncall", "show", "--at", "soon"]) == 2
    assert "--at 'soon' is not an ISO 8601 time" in capsys.readouterr().err
