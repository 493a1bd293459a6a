"""`xihe serve`'s own routes: a channel that cannot start is reported, the rest keeps serving."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from tests.conftest import MakeApp
from xihe.agent.web.server import create_server, readiness_body


def test_wecom_without_its_secrets_is_off_and_readyz_says_why(
    make_app: MakeApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("XIHE_WECOM_TOKEN", "XIHE_WECOM_AES_KEY", "XIHE_WECOM_CORP_ID"):
        monkeypatch.delenv(name, raising=False)
    app = make_app(files=("xihe.yaml", "access.yaml", "wecom.yaml"))
    with TestClient(create_server(app, with_scheduler=False)) as client:
        assert client.get("/healthz").text == "ok"
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["problems"] == ["wecom: not ready"]  # anyone may ask: no variable names
        assert "XIHE_WECOM" not in ready.text
        detail, status = readiness_body(app, detailed=True)  # admins (/ui/readyz) and the log
        problem = " ".join(detail["problems"])
        assert status == 503 and problem.startswith("wecom: ") and "XIHE_WECOM_TOKEN is not set" in problem
        assert client.get("/wecom/callback").status_code == 404  # no half-configured channel
        assert client.get("/metrics").status_code == 200


def test_readyz_is_ready_with_a_reachable_store(make_app: MakeApp) -> None:
    with TestClient(create_server(make_app(), with_scheduler=False)) as client:
        assert client.get("/readyz").json() == {"ready": True, "problems": [], "config_reload_error": None}
