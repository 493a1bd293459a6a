"""The replay's config snapshot (agent/alerts/configsnap.py): the plain objects read what the validated
models hold, an edited file or a damaged snapshot takes the validating path, and a replay decides the
same from either."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from tests.alerts import storm
from xihe.agent.alerts import configsnap
from xihe.agent.alerts.replay import parse_lines, run_replay
from xihe.agent.errors import ConfigError

REPO_CONFIG = Path(__file__).resolve().parents[2] / "config"

RICH: dict[str, Any] = {  # every kind of value the models hold: maps, lists, times, a cron, an app channel
    "timezone": "Asia/Shanghai",
    "window_minutes": 7,
    "channels": {
        "default": {"robot_key_env": "XIHE_ROBOT_KEY", "email_to": ["ops@example.com"]},
        "app": {"kind": "wecom_app", "robot_key_env": "XIHE_APP", "to_users": ["zhangsan"], "agent_id": 7},
    },
    "maintenance": [
        {"name": "nightly", "cron": "0 2 * * *", "duration_minutes": 30},
        {
            "name": "fixed",
            "start": "2026-12-02T22:00:00+08:00",
            "end": "2026-12-02T23:00:00Z",
            "scope": {"kind": "host", "value": "10.0.0.9"},
        },
    ],
    "smtp": {"host": "smtp.example.com", "admins": ["a@example.com"], "timeout_seconds": 2.5},
    "scan": {"enabled": True, "projects": ["etl"]},
    "lifecycle": {"tiers": {"P0": {"escalate_after": 5}}, "fallback": ["wangwu"], "expire_hours": 12},
}


def _same(model: Any, plain: Any, where: str = "") -> None:
    """Every field of `model`, recursively, read the same from `plain`."""
    if isinstance(model, BaseModel):
        for name in type(model).model_fields:
            _same(getattr(model, name), getattr(plain, name), f"{where}.{name}")
    elif isinstance(model, dict):
        assert isinstance(plain, dict) and list(plain) == list(model), where
        for k, v in model.items():
            _same(v, plain[k], f"{where}[{k}]")
    elif isinstance(model, list):
        assert isinstance(plain, list) and len(plain) == len(model), where
        for i, (a, b) in enumerate(zip(model, plain, strict=True)):
            _same(a, b, f"{where}[{i}]")
    else:
        assert type(plain) is type(model) and plain == model, (where, model, plain)


def _dir(tmp_path: Path, alerts: dict[str, Any], workflows: list[dict[str, Any]]) -> Path:
    (tmp_path / "alerts.yaml").write_text(yaml.safe_dump(alerts), encoding="utf-8")
    (tmp_path / "workflows.yaml").write_text(yaml.safe_dump({"workflows": workflows}), encoding="utf-8")
    return tmp_path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv("XIHE_CACHE_DIR", str(where))
    return where / "alert-config"


@pytest.mark.parametrize("which", ["repo", "storm", "rich"])
def test_the_plain_config_reads_every_field_the_models_hold(tmp_path: Path, which: str) -> None:
    root = {
        "repo": lambda: REPO_CONFIG,
        "storm": lambda: _dir(tmp_path, storm.alerts_config(), storm.workflows()),
        "rich": lambda: _dir(tmp_path, RICH, storm.workflows()),
    }[which]()
    raw = {name: (root / name).read_bytes() if (root / name).exists() else None for name in configsnap.FILES}
    alerts, workflows, production = configsnap.validate(root, raw)
    snap = json.loads(json.dumps(configsnap.snapshot((alerts, workflows, production))))
    p_alerts, p_workflows, p_production = configsnap.build(snap)
    _same(alerts, p_alerts)
    _same(workflows, p_workflows)
    assert p_production == production
    for tier in ("P0", "P1", "P2", "P9"):
        _same(alerts.lifecycle.policy(tier), p_alerts.lifecycle.policy(tier))
    names = [(w.project, w.name) for w in workflows.workflows] + [("etl", "nobody_configured_this")]
    for project, name in names:
        assert p_workflows.biz_date_offset(project, name) == workflows.biz_date_offset(project, name)
    for name, ch in alerts.channels.items():
        _same(
            ch.model_copy(update={"to_users": ["x"]}),
            p_alerts.channels[name].model_copy(update={"to_users": ["x"]}),
        )


def test_an_unchanged_directory_is_read_from_its_snapshot_and_an_edit_validates_again(
    tmp_path: Path, cache: Path
) -> None:
    root = _dir(tmp_path, storm.alerts_config(), storm.workflows())
    first = configsnap.load(root)
    assert isinstance(first[0], BaseModel) and len(list(cache.glob("*.json"))) == 1
    again = configsnap.load(root)
    assert isinstance(again[0], configsnap.Plain) and again[0].window_minutes == 10
    edited = storm.alerts_config()
    edited["window_minutes"] = 11
    (root / "alerts.yaml").write_text(yaml.safe_dump(edited), encoding="utf-8")
    third = configsnap.load(root)
    assert isinstance(third[0], BaseModel) and third[0].window_minutes == 11
    assert configsnap.load(root)[0].window_minutes == 11 and len(list(cache.glob("*.json"))) == 2
    (root / "access.yaml").write_text("environments: {}\n", encoding="utf-8")  # another file counts too
    assert isinstance(configsnap.load(root)[0], BaseModel)


def test_a_bad_file_is_reported_as_before_and_leaves_no_snapshot(tmp_path: Path, cache: Path) -> None:
    (tmp_path / "alerts.yaml").write_text("window_minutes: 0\n", encoding="utf-8")
    for _ in range(2):
        with pytest.raises(ConfigError) as caught:
            configsnap.load(tmp_path)
        assert "alerts.yaml" in str(caught.value) and "window_minutes" in str(caught.value)
    assert not list(cache.glob("*.json"))


def _resealed(raw: bytes, change: dict[str, Any]) -> bytes:
    """A well-formed snapshot file (its checksum right) with `change` applied to its JSON."""
    data = json.dumps({**json.loads(raw.partition(b"\n")[2]), **change}).encode()
    return hashlib.sha1(data).hexdigest().encode() + b"\n" + data


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],  # cut short
        lambda b: b"\x00\xff not json",
        lambda b: b.replace(b'"window_minutes": 10', b'"window_minutes": 19'),  # one byte: still JSON
        lambda b: _resealed(b, {"alerts": {"channels": 3}}),  # the wrong shape
        lambda b: _resealed(b, {"key": "another"}),
    ],
)
def test_a_damaged_snapshot_is_ignored_and_rewritten(tmp_path: Path, cache: Path, damage: Any) -> None:
    configsnap.load(tmp_path)  # no files at all: every default
    (snap,) = cache.glob("*.json")
    good = snap.read_bytes()
    bad = damage(good)
    assert bad != good
    snap.write_bytes(bad)
    got = configsnap.load(tmp_path)
    assert isinstance(got[0], BaseModel) and got[0].window_minutes == 10
    assert snap.read_bytes() == good
    assert isinstance(configsnap.load(tmp_path)[0], configsnap.Plain)


def test_an_unwritable_cache_still_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("XIHE_CACHE_DIR", str(blocker))
    assert configsnap.load(tmp_path)[0].window_minutes == 10


def test_a_replay_decides_the_same_from_the_snapshot(tmp_path: Path, cache: Path) -> None:
    root = _dir(tmp_path, storm.alerts_config(), storm.workflows())
    events = parse_lines(storm.generate(seed=3, instances=60).jsonl().splitlines()).events
    validated = configsnap.load(root)
    plain = configsnap.load(root)
    assert isinstance(plain[0], configsnap.Plain)
    a, b = run_replay(events, *validated), run_replay(events, *plain)
    assert a.notifications == b.notifications and a.notifications
    assert [r.to_dict() for r in a.records] == [r.to_dict() for r in b.records]
    assert [t.to_dict() for t in a.lifecycle] == [t.to_dict() for t in b.lifecycle]


def test_a_replay_of_an_unchanged_directory_imports_neither_pydantic_nor_yaml(
    tmp_path: Path, cache: Path
) -> None:
    root = _dir(tmp_path, storm.alerts_config(), storm.workflows())
    (root / "events.jsonl").write_text(storm.generate(seed=3, instances=5).jsonl(), encoding="utf-8")
    probe = (
        "import sys; from xihe.agent.cli.main import main; "
        f"main(['alerts', 'replay', {str(root / 'events.jsonl')!r}, '--config', {str(root)!r}, '--json']); "
        "print([m for m in ('pydantic', 'yaml', 'xihe.config.alerts') if m in sys.modules], file=sys.stderr)"
    )
    runs = [
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        for _ in range(2)
    ]
    assert "pydantic" in runs[0].stderr  # the first validates
    assert runs[1].stderr.strip() == "[]"
    assert runs[0].stdout == runs[1].stdout and json.loads(runs[1].stdout)["notifications"]
