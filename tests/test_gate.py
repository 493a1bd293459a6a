"""The gate as a table: (user, tool, risk, environment) → decision and reason."""

from __future__ import annotations

import pytest

from xihe.agent.gate import Allow, Confirm, Deny, decide, identify, may_approve
from xihe.config.access import AccessConfig

ACCESS = AccessConfig.model_validate(
    {
        "environments": {"test": {}, "prod": {"production": True}},
        "roles": {
            "viewer": {"tools": ["query_*", "search_code"], "environments": ["test", "prod"]},
            "developer": {"tools": ["*"], "environments": ["test"]},
            "operator": {"tools": ["*"], "environments": ["test", "prod"]},
            "approver": {"tools": ["query_*"], "environments": ["*"], "approver": True},
        },
        "users": {
            "vic": {"roles": ["viewer"]},
            "dev": {"roles": ["developer"]},
            "ops": {"roles": ["operator"]},
            "amy": {"roles": ["approver"]},
            "ops2": {"roles": ["operator", "approver"]},
        },
        "unknown_user_roles": [],
    }
)

CASES = [
    # user, tool, risk, env, decision type, needs_approval, words in the reason
    ("vic", "query_ds_task_status", "read", "prod", Allow, None, "viewer"),
    ("vic", "search_code", "read", "", Allow, None, "read tool"),
    ("vic", "trigger_dolphinscheduler", "write", "test", Deny, None, "no role"),
    ("dev", "trigger_dolphinscheduler", "write", "test", Confirm, False, "/confirm"),
    ("dev", "trigger_dolphinscheduler", "write", "prod", Deny, None, "not on environment prod"),
    ("dev", "query_ds_task_status", "read", "test", Allow, None, "developer"),
    ("ops", "trigger_dolphinscheduler", "write", "prod", Confirm, True, "approver"),
    ("ops", "trigger_dolphinscheduler", "write", "test", Confirm, False, "write on test"),
    ("ops", "run_shell_command", "write", "staging", Deny, None, "unknown environment"),
    ("amy", "query_ds_task_status", "read", "prod", Allow, None, "approver"),
    ("amy", "trigger_dolphinscheduler", "write", "prod", Deny, None, "no role"),
    ("stranger", "search_code", "read", "", Deny, None, "unknown user"),
    ("stranger", "query_ds_task_status", "read", "test", Deny, None, "no roles"),
    ("ops2", "stop_run", "write", "prod", Confirm, True, "production"),
]


@pytest.mark.parametrize(("user", "tool", "risk", "env", "kind", "approval", "words"), CASES)
def test_gate_table(
    user: str, tool: str, risk: str, env: str, kind: type, approval: bool | None, words: str
) -> None:
    decision = decide(tool, risk, env, identify(user, ACCESS), ACCESS)
    assert isinstance(decision, kind), decision
    assert words in decision.reason
    if approval is not None:
        assert isinstance(decision, Confirm) and decision.needs_approval is approval


def test_unknown_users_get_the_configured_roles() -> None:
    access = ACCESS.model_copy(update={"unknown_user_roles": ["viewer"]})
    assert isinstance(decide("search_code", "read", "", identify("stranger", access), access), Allow)
    assert isinstance(decide("stop_run", "write", "test", identify("stranger", access), access), Deny)


@pytest.mark.parametrize(
    ("approver", "requester", "kind", "words"),
    [
        ("amy", "ops", Allow, "approver role"),
        ("ops", "ops", Deny, "cannot approve their own"),
        ("ops2", "ops2", Deny, "cannot approve their own"),
        ("dev", "ops", Deny, "no approver role"),
        ("stranger", "ops", Deny, "no approver role"),
    ],
)
def test_who_may_approve(approver: str, requester: str, kind: type, words: str) -> None:
    decision = may_approve(approver, requester, ACCESS)
    assert isinstance(decision, kind) and words in decision.reason
