"""config/wecom.yaml: the shipped sample validates, env names are the public interface, errors name file:line:key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.wecom.conftest import AES_KEY, BOT_AES_KEY
from xihe.agent.errors import ConfigErrors
from xihe.config.wecom import WeComConfig, load_wecom, resolve_settings

SAMPLE = Path(__file__).resolve().parents[2] / "config" / "wecom.yaml"
ENV = {
    "XIHE_WECOM_CORP_ID": "ww1",
    "XIHE_WECOM_TOKEN": "tok",
    "XIHE_WECOM_AES_KEY": AES_KEY,
    "XIHE_WECOM_APP_SECRET": "s3cr3t",
}


def test_the_shipped_sample_validates_and_resolves() -> None:
    config = load_wecom(SAMPLE.read_text(encoding="utf-8"))
    settings = resolve_settings(config, ENV, need_secret=True)
    assert (settings.corp_id, settings.agent_id, settings.timestamp_window_seconds) == ("ww1", 1000002, 300)
    assert "s3cr3t" not in repr(settings) and AES_KEY not in repr(settings) and "tok'" not in repr(settings)


def test_public_environment_variable_names_are_the_defaults() -> None:
    config = WeComConfig.model_validate({})
    assert (config.corp_id_env, config.token_env, config.aes_key_env) == (
        "XIHE_WECOM_CORP_ID",
        "XIHE_WECOM_TOKEN",
        "XIHE_WECOM_AES_KEY",
    )


def test_unknown_key_reports_file_line_and_key() -> None:
    with pytest.raises(ConfigErrors) as err:
        load_wecom("enabled: true\ntimestamp_windw_seconds: 5\n", "config/wecom.yaml")
    assert "config/wecom.yaml:2: timestamp_windw_seconds" in str(err.value)


def test_missing_and_malformed_environment_is_reported_without_values() -> None:
    config = WeComConfig.model_validate({"aibot": {"enabled": True}})
    env = {**ENV, "XIHE_WECOM_AES_KEY": "too-short-secret", "XIHE_WECOM_AIBOT_AES_KEY": BOT_AES_KEY}
    del env["XIHE_WECOM_TOKEN"]
    with pytest.raises(ConfigErrors) as err:
        resolve_settings(config, env)
    text = str(err.value)
    assert "XIHE_WECOM_TOKEN is not set" in text
    assert "XIHE_WECOM_AES_KEY must be 43 characters" in text
    assert "XIHE_WECOM_AIBOT_TOKEN is not set" in text
    assert "too-short-secret" not in text


def test_sending_needs_secret_and_agent_id() -> None:
    config = WeComConfig.model_validate({})
    env = {k: v for k, v in ENV.items() if k != "XIHE_WECOM_APP_SECRET"}
    with pytest.raises(ConfigErrors) as err:
        resolve_settings(config, env, need_secret=True)
    assert "XIHE_WECOM_APP_SECRET is not set" in str(err.value) and "agent_id" in str(err.value)


def test_msgid_memory_must_outlast_the_timestamp_window() -> None:
    config = WeComConfig.model_validate({"timestamp_window_seconds": 600, "msgid_ttl_seconds": 300})
    with pytest.raises(ConfigErrors, match="msgid_ttl_seconds"):
        resolve_settings(config, ENV)


def test_aibot_only_deployment_needs_no_app_variables() -> None:
    config = WeComConfig.model_validate({"enabled": False, "aibot": {"enabled": True}})
    settings = resolve_settings(
        config, {"XIHE_WECOM_AIBOT_TOKEN": "t", "XIHE_WECOM_AIBOT_AES_KEY": BOT_AES_KEY}
    )
    assert not settings.app_enabled and settings.aibot is not None
