"""The loopback fakes' server: a client that hangs up is normal traffic, a fake's own failure is not."""

from __future__ import annotations

import pytest

from xihe.integrations.fakes.loopback import LoopbackServer, Response


def _fail_with(srv: LoopbackServer, exc: Exception) -> None:
    try:
        raise exc
    except Exception:  # handle_error reads the exception being handled, as socketserver calls it
        srv._httpd.handle_error(None, ("127.0.0.1", 40000))


def test_a_client_that_hangs_up_is_neither_recorded_nor_printed(capfd: pytest.CaptureFixture[str]) -> None:
    with LoopbackServer(lambda req: Response()) as srv:
        _fail_with(srv, ConnectionResetError(104, "Connection reset by peer"))
        _fail_with(srv, BrokenPipeError(32, "Broken pipe"))
        assert srv.errors == []
        assert capfd.readouterr().err == ""


def test_any_other_failure_is_recorded_and_printed(capfd: pytest.CaptureFixture[str]) -> None:
    with LoopbackServer(lambda req: Response()) as srv:
        _fail_with(srv, ValueError("bad chunk length in the fake"))
        assert [type(e) for e in srv.errors] == [ValueError]
        assert "bad chunk length in the fake" in capfd.readouterr().err
