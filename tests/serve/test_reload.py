"""Config reload under a real `xihe serve`: a refused reload (any exception) shows in /readyz as 503
(the reason in the log, not in what anyone may read), keeps the last good config serving, and
/readyz recovers once the files are fixed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.serve.harness import Replica, serve_config, wait_until
from xihe.integrations.wecom.fake import FakeWeCom


def readyz(bot: Replica) -> tuple[int, dict[str, object]]:
    resp = bot.http.get(bot.url + "/readyz", timeout=10)
    return resp.status_code, resp.json()


def test_a_refused_reload_is_not_ready_until_the_file_is_fixed(tmp_path: Path, sqlite_url: str) -> None:
    with FakeWeCom() as fake:
        cfg = serve_config(tmp_path / "cfg", fake)
        bot = Replica(cfg, sqlite_url, tmp_path, "bot").wait_ready()
        try:
            assert readyz(bot)[0] == 200
            xihe = cfg / "xihe.yaml"
            good = xihe.read_text(encoding="utf-8")
            lines = good.splitlines()

            # a ConfigError: a duplicate key
            xihe.write_text(good + "tools: []\n", encoding="utf-8")
            _, body = wait_until(lambda: (s := readyz(bot))[0] == 503 and s, what="503 after a bad file")
            assert body["ready"] is False and body["problems"] == ["config reload refused"]
            assert "xihe.yaml" not in str(body) and str(cfg) not in str(body)  # anyone may read /readyz
            assert f"xihe.yaml:{len(lines) + 1}: tools: duplicate key" in bot.log()  # the reason: the log

            # fixed: ready again
            xihe.write_text(good, encoding="utf-8")
            wait_until(lambda: readyz(bot)[0] == 200, what="200 after the fix")
            assert readyz(bot)[1]["config_reload_error"] is None

            # not a ConfigError: a plugin whose import raises RuntimeError
            data = yaml.safe_load(good)
            data["plugins"] = [*data["plugins"], "tests.support.broken_plugin:SPEC"]
            xihe.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
            _, body = wait_until(lambda: (s := readyz(bot))[0] == 503 and s, what="503 after a plugin bug")
            assert body["problems"] == ["config reload refused"] and "plugin bug" not in str(body)
            assert bot.http.get(bot.url + "/healthz", timeout=10).status_code == 200  # still serving

            xihe.write_text(good, encoding="utf-8")
            wait_until(lambda: readyz(bot)[0] == 200, what="200 after removing the plugin")
        finally:
            assert bot.terminate() in (0, -15)  # uvicorn re-raises SIGTERM after a clean shutdown
        log = bot.log()
        assert "config reload refused" in log and "RuntimeError: plugin bug" in log
        assert log.count("Traceback") == 1  # the plugin bug keeps its traceback; the duplicate key does not


def test_config_check_reports_a_broken_plugin_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.conftest import write_config
    from xihe.agent.cli.main import main

    cfg = write_config(tmp_path / "cfg", overrides={"plugins": ["tests.support.broken_plugin:SPEC"]})
    assert main(["config", "check", str(cfg)]) == 1
    assert "the check failed: RuntimeError: plugin bug" in capsys.readouterr().err
