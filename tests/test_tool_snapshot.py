"""`xihe tools` prints exactly the schemas the model receives; the shipped set is pinned.

tests/snapshots/tools.json is every tool schema the model receives with the shipped config and
every feature on (DolphinScheduler credentials set). A change to any tool's name, description or
arguments fails `test_the_shipped_tool_schemas_match_the_snapshot`; after checking the diff,
regenerate with:

    XIHE_UPDATE_SNAPSHOTS=1 python -m pytest -q tests/test_tool_snapshot.py
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from xihe.agent.app import all_features, build_app
from xihe.agent.cli.main import main
from xihe.agent.inbound import Inbound
from xihe.integrations.fakes.llm_server import ScriptedLLM, say

SNAPSHOT = REPO / "tests" / "snapshots" / "tools.json"
# the tools each feature declares, by the file that turns it on
FEATURE_TOOLS = {f.section.file: f.tools for f in all_features() if f.section is not None and f.tools}


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shipped config directory, with DolphinScheduler credentials so every feature is on."""
    monkeypatch.setenv("XIHE_DS_TOKEN", "snapshot-token")
    d = tmp_path / "cfg"
    shutil.copytree(REPO / "config", d, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return d


def tools_output(directory: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    capsys.readouterr()
    assert main(["tools", "--config", str(directory)]) == 0
    out: list[dict[str, object]] = json.loads(capsys.readouterr().out)
    return out


def names(schemas: list[dict[str, object]]) -> list[str]:
    return [s["function"]["name"] for s in schemas]  # type: ignore[index]


def test_the_shipped_tool_schemas_match_the_snapshot(
    shipped: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schemas = tools_output(shipped, capsys)
    if os.environ.get("XIHE_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(json.dumps(schemas, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    assert schemas == json.loads(SNAPSHOT.read_text(encoding="utf-8")), (
        "tool schemas changed; regenerate: XIHE_UPDATE_SNAPSHOTS=1 python -m pytest -q tests/test_tool_snapshot.py"
    )
    assert sorted(names(schemas)) == sorted(
        ["read_artifact", *(n for ns in FEATURE_TOOLS.values() for n in ns)]
    )


def test_the_model_receives_what_xihe_tools_prints(
    shipped: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    core = yaml.safe_load((shipped / "xihe.yaml").read_text(encoding="utf-8"))
    with ScriptedLLM([say("hello")]) as llm:
        core["llm"].update(base_url=llm.base_url, model="scripted")
        (shipped / "xihe.yaml").write_text(yaml.safe_dump(core, allow_unicode=True), encoding="utf-8")
        app = build_app(shipped, database_url=f"sqlite:///{tmp_path / 'x.db'}")
        app.session.handle(Inbound("alice", "cli:alice", "hi", "cli"))
    assert llm.requests[0]["tools"] == tools_output(shipped, capsys)


@pytest.mark.parametrize("file", sorted(FEATURE_TOOLS))
def test_each_feature_adds_the_tools_listed_for_it(
    shipped: Path, capsys: pytest.CaptureFixture[str], file: str
) -> None:
    everything = set(names(tools_output(shipped, capsys)))
    (shipped / file).unlink()
    assert everything - set(names(tools_output(shipped, capsys))) == set(FEATURE_TOOLS[file])


def test_feature_tools_can_be_enabled_by_name(
    shipped: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    xihe = shipped / "xihe.yaml"
    xihe.write_text(
        xihe.read_text(encoding="utf-8").replace(
            'tools: ["*"]', "tools: [search_code, trigger_dolphinscheduler]"
        )
    )
    assert main(["config", "check", "--offline", str(shipped)]) == 0
    assert names(tools_output(shipped, capsys)) == ["search_code", "trigger_dolphinscheduler"]
    monkeypatch.delenv("XIHE_DS_TOKEN")  # DolphinScheduler off: its tool is known but not offered
    assert main(["config", "check", "--offline", str(shipped)]) == 0
    assert names(tools_output(shipped, capsys)) == ["search_code"]


def test_a_misspelt_tool_name_is_an_error_with_a_suggestion(
    shipped: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    xihe = shipped / "xihe.yaml"
    lines = xihe.read_text(encoding="utf-8").splitlines()
    n = next(i for i, line in enumerate(lines) if line.startswith("tools:"))
    lines[n] = "tools: [search_code, trigger_dolphinschedular]"
    xihe.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["config", "check", "--offline", str(shipped)]) == 1
    err = capsys.readouterr().err
    assert (
        f"xihe.yaml:{n + 1}: tools.1: unknown tool 'trigger_dolphinschedular' "
        "(did you mean 'trigger_dolphinscheduler'?)" in err
    ), err
