"""oncall.yaml is checked like every config file (`file:line: key: problem`, did-you-mean) and read
live: an edit applied by the config reload changes who is on call without a restart."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.oncall.conftest import OnCallApp
from xihe.agent.app import load_config
from xihe.agent.errors import ConfigErrors
from xihe.agent.inbound import Inbound
from xihe.agent.ops.reload import reload_config


def problems(directory: Path) -> str:
    with pytest.raises(ConfigErrors) as info:
        load_config(directory)
    return str(info.value)


def edit(path: Path, change: object) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)  # type: ignore[operator]
    path.write_text(yaml.safe_dump(data, allow_unicode=True))


def test_errors_name_file_line_and_key(oncall_app: OnCallApp) -> None:
    directory = Path(oncall_app().settings.directory)
    oncall, workflows = directory / "oncall.yaml", directory / "workflows.yaml"
    edit(
        oncall,
        lambda d: d["rotations"]["data"].update(handoff="25:00", every="monthly", members=["alice", "alice"]),
    )
    edit(oncall, lambda d: d["rotations"]["reports"].update(timezone="Europe/Berln"))
    edit(workflows, lambda d: d["workflows"][0].update(team="dat"))
    text = problems(directory)
    assert (
        "oncall.yaml:" in text
        and "rotations.data.handoff: Value error, handoff '25:00' is not a time of day" in text
    )
    assert "rotations.data.every: Input should be 'daily' or 'weekly'" in text
    assert "rotations.data.members: Value error, members: listed twice: alice" in text
    edit(
        oncall,
        lambda d: d["rotations"]["data"].update(handoff="10:00", every="weekly", members=["alice", "bob"]),
    )
    text = problems(directory)
    assert (
        "rotations.reports.timezone: unknown time zone 'Europe/Berln' (did you mean 'Europe/Berlin'?)" in text
    )
    assert (
        "workflows.yaml:" in text
        and "workflows[name=order_sync].team: unknown team 'dat' (did you mean 'data'?)" in text
    )


def test_an_edited_rotation_counts_after_the_reload_without_a_restart(oncall_app: OnCallApp) -> None:
    app = oncall_app()
    ask = lambda: app.session.handle(Inbound("bob", "c1", "/oncall"))  # noqa: E731
    assert "primary Alice (alice)" in ask()
    edit(
        Path(app.settings.directory) / "oncall.yaml",
        lambda d: d["rotations"]["data"].update(members=["bob", "alice"]),
    )
    assert reload_config(app) == "applied"
    assert "primary Bob (bob), secondary Alice (alice)" in ask()
    (row,) = app.deps.audit.search(kind="config", limit=5)
    assert row["detail"]["keys"] == {"oncall.yaml": ["rotations.data.members"]}
    assert "restart needed" not in row["reason"]
