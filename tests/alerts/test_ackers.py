"""Who may acknowledge an alert: the basis is the first that holds; outsiders are refused."""

from __future__ import annotations

from pathlib import Path

import yaml

from xihe.agent.alerts.ackers import may_ack, rotation_people
from xihe.config.oncall import OnCallConfig

REPO = Path(__file__).resolve().parents[2]


def test_basis_in_order_and_outsiders_refused() -> None:
    sets = {"listed": {"alice"}, "rotation": {"alice", "wangwu"}, "chain": {"wangwu", "zhangsan"}}
    assert may_ack("alice", **sets).basis == "listed"
    assert may_ack("wangwu", **sets).basis == "rotation"
    assert may_ack("zhangsan", **sets).basis == "chain"
    right = may_ack("mallory", **sets)
    assert right.basis == "outsider" and not right.allowed
    assert may_ack("zhangsan", **sets).allowed


def test_rotation_people_are_members_and_listed_secondaries() -> None:
    cfg = OnCallConfig.model_validate(yaml.safe_load((REPO / "config" / "oncall.yaml").read_text()))
    assert rotation_people(cfg, "data-platform") == ["zhangsan", "lisi", "wangwu"]  # secondary: next
    assert rotation_people(cfg, "reporting") == ["wangwu", "zhaoliu", "dave"]
    assert rotation_people(cfg, "nobody") == [] and rotation_people(None, "reporting") == []
    assert rotation_people(cfg, "") == []
