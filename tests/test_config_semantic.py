"""Mistakes of meaning in otherwise well-formed YAML: each is an error naming file:line and key, with
"did you mean" when a known name is close. One row per mistake, each an edit of the shipped config."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO
from xihe.agent.cli.main import main

CASES = [
    # (file, shipped text, broken text, expected "key: problem")
    (
        "xihe.yaml",
        "timezone: Asia/Shanghai",
        "timezone: Asia/Shangai",
        "timezone: unknown time zone 'Asia/Shangai' (did you mean 'Asia/Shanghai'?)",
    ),
    (
        "alerts.yaml",
        "ds_timezone: Asia/Shanghai",
        "ds_timezone: Mars/Olympus",
        "webhook.ds_timezone: unknown time zone 'Mars/Olympus'",
    ),
    (
        "dolphin.yaml",
        "server_timezone: UTC",
        "server_timezone: UTC+8",
        "server_timezone: unknown time zone 'UTC+8'",
    ),
    (
        "access.yaml",
        "tools: [read_artifact, search_code,",
        "tools: [read_artifact, serch_code,",
        "roles.viewer.tools.1: unknown tool 'serch_code' (did you mean 'search_code'?)",
    ),
    (
        "longtask.yaml",
        "fact_tools: [query_ds_task_status, ds_failed_tasks]",
        "fact_tools: [query_ds_task_status, ds_failed_task]",
        "memory.fact_tools.1: unknown tool 'ds_failed_task' (did you mean 'ds_failed_tasks'?)",
    ),
    (
        "xihe.yaml",
        'tools: ["*"]',
        "tools: [read_artifct]",
        "tools.0: unknown tool 'read_artifct' (did you mean 'read_artifact'?)",
    ),
    (
        "shell.yaml",
        "roles: [operator]",
        "roles: [operater]",
        "entries[name=kubectl_rollout_status].roles.0: unknown role 'operater' (did you mean 'operator'?)",
    ),
    (
        "shell.yaml",
        "environments: [test, staging]",
        "environments: [test, stagin]",
        "entries[name=kubectl_rollout_status].environments.1: unknown environment 'stagin' (did you mean 'staging'?)",
    ),
    (
        "workflows.yaml",
        "    channel: prod\n  - name: daily_sales",
        "    channel: prd\n  - name: daily_sales",
        "workflows[name=order_sync].channel: unknown channel 'prd' (did you mean 'prod'?)",
    ),
    (
        "workflows.yaml",
        "- name: report_export",
        "- name: order_sync",
        "workflows[name=order_sync].name: name 'order_sync' is already the name of workflow 'order_sync'",
    ),
    (
        "workflows.yaml",
        "aliases: [日销售]",
        "aliases: [订单同步]",
        "workflows[name=daily_sales].aliases.0: alias '订单同步' is already the alias of workflow 'order_sync'",
    ),
    ("workflows.yaml", "tier: P2", "tier: P5", "workflows[name=report_export].tier: Input should be"),
    ("ui.yaml", "  carol:\n", "  carl:\n", "users.carl: unknown user 'carl' (did you mean 'carol'?)"),
    (
        "xihe.yaml",
        "url: sqlite:///var/xihe.db",
        "url: mysql://db/xihe",
        "store.url: 'mysql://db/xihe' is not a supported database URL",
    ),
    (
        "xihe.yaml",
        'base_url: ""',
        "base_url: api.openai.com/v1",
        "llm.base_url: 'api.openai.com/v1' is not a URL",
    ),
    (
        "dolphin.yaml",
        "base_url: http://127.0.0.1:12345/dolphinscheduler",
        "base_url: http://127.0.0.1:123456/dolphinscheduler",
        "base_url: 'http://127.0.0.1:123456/dolphinscheduler' is not a URL",
    ),
    (
        "wecom.yaml",
        "url: wss://openws.work.weixin.qq.com",
        "url: openws.work.weixin.qq.com",
        "aibot.long_connection.url: 'openws.work.weixin.qq.com' is not a URL",
    ),
    ("alerts.yaml", "port: 587", "port: 70000", "smtp.port: port 70000 is out of range (1-65535)"),
    (
        "alerts.yaml",
        'templates_dir: ""',
        "templates_dir: /nonexistent/xihe-templates",
        "templates_dir: '/nonexistent/xihe-templates' is not a directory",
    ),
    (
        "alerts.yaml",
        "fallback: []",
        "fallback: [dave, zhangsn]",
        "lifecycle.fallback.1: unknown user 'zhangsn' (did you mean 'zhangsan'?)",
    ),
    (
        "alerts.yaml",
        "fallback: []",
        "fallback: [nobody_here]",
        "lifecycle.fallback.0: unknown user 'nobody_here' (access.yaml users, oncall.yaml members: ",
    ),
    (
        "code.yaml",
        "rerank:\n  enabled: false",
        "rerank:\n  enabled: true",
        "rerank.enabled: rerank is enabled but base_url or model is empty",
    ),
]


@pytest.mark.parametrize(("file", "old", "new", "expected"), CASES, ids=[c[3].split(":")[0] for c in CASES])
def test_a_semantic_mistake_names_file_line_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str, old: str, new: str, expected: str
) -> None:
    d = tmp_path / "cfg"
    shutil.copytree(REPO / "config", d, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    text = (d / file).read_text(encoding="utf-8")
    assert text.count(old) >= 1, f"{old!r} is no longer in the shipped {file}"
    broken = text.replace(old, new, 1)
    (d / file).write_text(broken, encoding="utf-8")
    changed = next(
        i for i, (a, b) in enumerate(zip(old.split("\n"), new.split("\n"), strict=False)) if a != b
    )
    line = text[: text.index(old)].count("\n") + 1 + changed  # the edited line
    assert main(["config", "check", str(d)]) == 1
    err = capsys.readouterr().err
    assert f"{d / file}:{line}: {expected}" in err, err


def test_fallback_may_name_rotation_members_only_while_oncall_yaml_lists_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "cfg"
    shutil.copytree(REPO / "config", d, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    alerts = d / "alerts.yaml"
    alerts.write_text(alerts.read_text(encoding="utf-8").replace("fallback: []", "fallback: [wangwu, dave]"))
    main(["config", "check", str(d)])  # (the shipped shell.yaml names a workspace this host lacks)
    assert "lifecycle.fallback" not in capsys.readouterr().err  # wangwu: oncall.yaml; dave: access.yaml
    (d / "oncall.yaml").unlink()
    (d / "workflows.yaml").write_text(  # its `team:` names need oncall.yaml
        (d / "workflows.yaml").read_text(encoding="utf-8").replace("team: data-platform", "team: ''")
    )
    assert main(["config", "check", str(d)]) == 1
    err = capsys.readouterr().err
    assert "lifecycle.fallback.0: unknown user 'wangwu'" in err and "fallback.1" not in err
