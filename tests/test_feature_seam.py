"""The feature seam: features return what they add, the app merges it and constructs Agent and Session once.

`test_no_feature_mutates_the_wired_bot` reads every feature module: none may assign to, append on
or otherwise change the agent, session or registry (or their attributes) after construction. The one
way to change the tools of a running bot is the Registry's own locked, snapshot-keeping API (`replace`
for a reload, `add_tool`/`remove_tool` for MCP listings that arrive later), which this check allows.
The behavioural tests build a real bot with an extra feature and check the merge.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from tests.test_layout import REPO
from xihe.agent.app import DECLARED, all_features, build_app, features_for
from xihe.agent.commands import Command
from xihe.agent.deps import Services
from xihe.agent.feature import Context, Feature, Installed, Job, merge
from xihe.agent.gate import Who
from xihe.agent.help import HelpEntry
from xihe.agent.hooks import Hooks
from xihe.agent.inbound import Inbound
from xihe.agent.registry import ToolContext, ToolSpec
from xihe.agent.scheduler import all_jobs
from xihe.agent.session import Session
from xihe.agent.tasks import Task

WIRED = {"agent", "session", "registry"}
MUTATING_CALLS = {"append", "extend", "insert", "update", "setdefault", "add", "pop", "clear", "remove"}


def _wired_root(node: ast.expr) -> str | None:
    """'agent' for `app.agent.reminders`, `agent.x`, `self.app.session.commands[...]`; else None."""
    names = []
    while isinstance(node, ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        names.append(node.id)
    hit = [n for n in names if n in WIRED]
    return hit[-1] if hit else None


def mutations(source: str, filename: str) -> list[str]:
    """Assignments to (and in-place changes of) the agent, session or registry, with their line."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        changed: list[ast.expr] = []  # the objects being changed
        if isinstance(node, ast.Assign | ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        else:
            targets = []
        changed = [t.value for t in targets if isinstance(t, ast.Attribute | ast.Subscript)]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATING_CALLS
        ):
            changed.append(node.func.value)
        for target in changed:
            if _wired_root(target):
                found.append(f"{filename}:{node.lineno}: {ast.unparse(target)}")
    return found


def feature_modules() -> list[Path]:
    return sorted((REPO / "agent").glob("*/feature.py"))


def test_no_feature_mutates_the_wired_bot() -> None:
    assert len(feature_modules()) >= 8
    found = [
        m for path in feature_modules() for m in mutations(path.read_text(), str(path.relative_to(REPO)))
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "app.agent.reminders.append(f)",
        "agent.context_budget = b",
        "app.session.commands['help'] = h",
        "session.help_lines.extend(HELP)",
        "app.registry.specs[TOOL] = spec",
        "self.app.agent.recovery = r",
    ],
)
def test_the_check_catches_each_way_of_mutating(source: str) -> None:
    assert mutations(source, "x.py") != []


def test_the_check_leaves_reads_and_own_objects_alone() -> None:
    source = "x = app.agent.resume(1)\nlt.plans.add(item)\nout.append(app.session)\nself.session = session"
    assert mutations(source, "x.py") == []


# ---- the merge, behaviourally ----------------------------------------------------------------------
class EchoArgs(BaseModel):
    text: str


def _echo(args: EchoArgs, ctx: ToolContext) -> str:
    return args.text


def _ping(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    return "pong"


def _note(task: Task) -> str | None:
    return "extra stop note"


def _config(tmp_path: Path) -> Path:
    """The shipped core files only: every declared feature is off."""
    d = tmp_path / "config"
    d.mkdir()
    for name in ("xihe.yaml", "access.yaml", "workflows.yaml"):
        shutil.copy(REPO / "config" / name, d / name)
    return d


def test_an_extra_feature_is_merged_into_the_agent_session_registry_and_jobs(tmp_path: Path) -> None:
    seen: list[Context] = []

    def install(ctx: Context) -> Installed:
        seen.append(ctx)
        return Installed(
            tools=[ToolSpec("echo_back", "Echo the text.", EchoArgs, _echo)],
            commands={"ping": _ping},
            help=[HelpEntry("/ping", "answers pong", "/ping", "回答 pong")],
            status_lines=[lambda lang: "Extra: all good."],
            hooks=Hooks(stop_notes=(_note,)),
            jobs=[Job("extra_job", lambda app: None, 60)],
            problems={"extra": "not wired to anything"},
        )

    extra = Feature("extra", None, install)
    app = build_app(
        _config(tmp_path), database_url=f"sqlite:///{tmp_path / 'x.db'}", features=(*all_features(), extra)
    )
    assert [c.deps for c in seen] == [app.deps] and not seen[0].offline
    assert "echo_back" in app.registry and "read_artifact" in app.registry
    assert app.agent.hooks.stop_notes[-1] is _note
    assert app.session.handle(Inbound("alice", "cli:alice", "/ping")) == "pong"
    helped = app.session.handle(Inbound("alice", "cli:alice", "/help"))
    assert "/ping" in helped and helped.endswith("Extra: all good.")
    assert "extra_job" in {j.id for j in all_jobs(app)}
    assert app.installed.problems == {"extra": "not wired to anything"}


def test_without_the_feature_nothing_of_it_is_there(tmp_path: Path) -> None:
    app = build_app(_config(tmp_path), database_url=f"sqlite:///{tmp_path / 'x.db'}")
    assert "echo_back" not in app.registry and "ping" not in app.session.commands
    assert "extra_job" not in {j.id for j in all_jobs(app)} and app.installed.problems == {}


def test_two_features_may_not_claim_the_same_command_or_service() -> None:
    a = Installed(commands={"ping": _ping}, services=Services(alerts=object()))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="command /ping"):
        merge([a, Installed(commands={"ping": _ping})])
    with pytest.raises(ValueError, match="alerts service"):
        merge([a, Installed(services=Services(alerts=object()))])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retry_budget"):
        merge([Installed(hooks=Hooks(retry_budget=1)), Installed(hooks=Hooks(retry_budget=2))])


def test_each_declared_feature_names_its_module_and_tools_exactly() -> None:
    """The composition root's declarations (read before any feature is imported) match the modules."""
    for declared in DECLARED:
        feature = declared.load()
        assert feature.name == declared.name
        assert sorted(feature.tools) == sorted(declared.tools), declared.name
        if declared.files:  # a feature with a file of its own is off without it
            assert feature.section is not None and feature.section.file in declared.files


def test_a_config_without_a_features_files_never_imports_it(tmp_path: Path) -> None:
    """`xihe chat` on the core files: the alerts, code, shell, DolphinScheduler and WeCom code stays
    unimported (a fresh interpreter, as a user's process starts), and the bot still works."""
    config = _config(tmp_path)
    probe = (
        "import sys\n"
        "from xihe.agent.app import build_app\n"
        f"app = build_app({str(config)!r}, database_url='sqlite:///{tmp_path / 'x.db'}')\n"
        "mods = [m for m in ('xihe.agent.alerts.feature', 'xihe.agent.code.feature', 'xihe.agent.shell.feature',"
        " 'xihe.agent.dolphin.feature', 'xihe.agent.wecom.feature', 'xihe.tools.codeindex.index') if m in sys.modules]\n"
        "print(mods, sorted(f.name for f in app.features))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.startswith("[] ['artifacts', 'ops', 'web']"), out
    shutil.copy(REPO / "config" / "shell.yaml", config / "shell.yaml")
    assert [f.name for f in features_for(config)] == ["artifacts", "web", "shell", "ops"]
