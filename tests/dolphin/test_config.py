"""config/dolphin.yaml: the shipped sample loads, mistakes name file:line:key, secrets come from env."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import write_config
from xihe.agent.app import load_config
from xihe.agent.errors import ConfigError, ConfigErrors
from xihe.config.dolphin import credentials, load_dolphin
from xihe.config.workflows import WorkflowsConfig
from xihe.integrations.dolphinscheduler.factory import client_from_config
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator
from xihe.tools.dolphin.watch import policy_from_config

SAMPLE = Path(__file__).resolve().parents[2] / "config" / "dolphin.yaml"


def test_shipped_sample_loads() -> None:
    cfg = load_dolphin(SAMPLE.read_text())
    assert cfg.version == "auto" and cfg.token_env == "XIHE_DS_TOKEN"
    assert policy_from_config(cfg.poll).max_interval == 300


def test_unknown_key_names_file_line_and_key() -> None:
    with pytest.raises(ConfigErrors) as err:
        load_dolphin("base_url: http://x/dolphinscheduler\npoll:\n  intervl_seconds: 3\n")
    assert str(err.value).startswith("config/dolphin.yaml:3: poll.intervl_seconds:")


def test_bad_version_is_refused() -> None:
    with pytest.raises(ConfigErrors) as err:
        load_dolphin("base_url: http://x\nversion: '3.0'\n")
    assert ":2: version:" in str(err.value)


def test_credentials_come_from_the_named_env() -> None:
    cfg = load_dolphin("base_url: http://x\ntoken_env: MY_TOKEN\nuser: bot\npassword_env: MY_PW\n")
    assert credentials(cfg, {"MY_TOKEN": "t"}) == {"token": "t"}
    assert credentials(cfg, {"MY_PW": "p"}) == {"user": "bot", "password": "p"}
    with pytest.raises(ConfigError) as err:
        credentials(cfg, {})
    assert "MY_TOKEN" in str(err.value)


def test_client_from_config_talks_to_the_simulator(make_sim: Callable[..., DolphinSimulator]) -> None:
    sim = make_sim("3.3")
    cfg = load_dolphin(f"base_url: {sim.url}\nversion: auto\n")
    client = client_from_config(cfg, {"XIHE_DS_TOKEN": sim.token})
    assert client.profile.version == "3.3" and [p.name for p in client.list_projects()] == ["etl", "dw"]
    assert sim.token not in repr(client)


def test_biz_date_offset_defaults_to_the_dolphinscheduler_convention() -> None:
    cfg = WorkflowsConfig.model_validate(
        {
            "workflows": [
                {"name": "a", "project": "etl"},
                {"name": "b", "project": "etl", "biz_date_offset": 0},
            ]
        }
    )
    assert cfg.biz_date_offset("etl", "a") == 1
    assert cfg.biz_date_offset("etl", "b") == 0
    assert cfg.biz_date_offset("etl", "not_configured") == 1


def test_negative_biz_date_offset_names_file_line_and_key(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "cfg")
    (cfg / "workflows.yaml").write_text(
        "workflows:\n  - name: a\n    project: etl\n    biz_date_offset: -1\n", encoding="utf-8"
    )
    with pytest.raises(ConfigErrors) as err:
        load_config(cfg)
    assert (
        "workflows.yaml:4: workflows[name=a].biz_date_offset: Input should be greater than or equal to 0"
        in str(err.value)
    )
