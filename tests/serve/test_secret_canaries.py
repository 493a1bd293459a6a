"""A canary in every secret slot, a realistic session, then every output grepped: zero hits.

Every `*_env` of every shipped config file (plus the remote embeddings and rerank keys, and the
DolphinScheduler password, which the shipped files leave commented out) holds a distinct canary.
A real `xihe serve` answers a WeCom conversation in which the scripted model calls search_code
twice: the embeddings endpoint fails with a body that echoes the key it received, then the rerank
endpoint does the same; a signed DolphinScheduler failure webhook is pushed to the robot after one
failed try. Then the web pages, /metrics and /readyz are read, and the CLI's `audit
search` and `task show` run on the same database. None of these may contain any canary: the serve
log, a dump of every table, the pages, the metrics, the CLI output, the messages sent to WeCom, and
the prompts (bodies) the scripted model received.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import yaml

from tests.child_env import pythonpath
from tests.codeindex.conftest import ORDERS_PY, git
from tests.conftest import REPO
from tests.serve.harness import AGENT_ID, Replica, free_port, wait_until
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say
from xihe.integrations.wecom.fake import CallbackSender, FakeWeCom
from xihe.integrations.wecom.robot_sink import RobotSink
from xihe.tools.codeindex.fakes import FakeEmbeddings


def canaries() -> dict[str, str]:
    """env var → canary value; each has a unique 16-hex core that is grepped for."""
    names = set()
    for path in (REPO / "config").glob("*.yaml"):
        names |= set(
            re.findall(r"^\s*#?\s*\w+_env:\s*([A-Z][A-Z0-9_]+)", path.read_text(encoding="utf-8"), re.M)
        )
    out = {}
    for i, name in enumerate(sorted(names)):
        core = f"{i:02d}c4a7e1f0b9d{i:03d}"  # 16 hex-ish characters, unique per slot
        if name.endswith("AES_KEY"):  # an EncodingAESKey is 43 base64 characters
            out[name] = ("CANARY" + core + "A" * 43)[:43]
        else:
            out[name] = f"CANARY-{core}-{name.lower()}"
    return out


def cores(values: dict[str, str]) -> dict[str, str]:
    return {name: re.sub(r"[^0-9a-f]", "", v.split("CANARY")[1])[:16] for name, v in values.items()}


def write_config(
    d: Path,
    llm: ScriptedLLM,
    wecom: FakeWeCom,
    emb: FakeEmbeddings,
    rr: FakeEmbeddings,
    robot: RobotSink,
    repo: Path,
) -> None:
    shutil.copytree(REPO / "config", d, ignore=shutil.ignore_patterns("*.py", "__pycache__"))

    def edit(name: str, change: dict[str, object]) -> None:
        data = yaml.safe_load((d / name).read_text(encoding="utf-8"))
        for dotted, value in change.items():
            *parents, leaf = dotted.split(".")
            node = data
            for p in parents:
                node = node[p]
            node[leaf] = value
        (d / name).write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")

    edit("xihe.yaml", {"llm.base_url": llm.base_url, "llm.model": "scripted", "llm.max_wait_seconds": 0})
    edit(
        "wecom.yaml",
        {
            "api_base": wecom.url,
            "progress_interval_seconds": 0,
            "aibot.enabled": True,
            "aibot.response_url_prefix": wecom.url + "/cgi-bin/aibot/response",
        },
    )
    edit(
        "code.yaml",
        {
            "repos": [str(repo)],
            "index_dir": str(d.parent / "index"),
            "embedding": {
                "kind": "openai",
                "base_url": emb.url,
                "model": "fake-embed",
                "api_key_env": "XIHE_EMBEDDINGS_API_KEY",
                "batch_size": 16,
            },
            "rerank": {
                "enabled": True,
                "base_url": rr.url,
                "model": "fake-rerank",
                "api_key_env": "XIHE_RERANK_API_KEY",
            },
        },
    )
    edit(
        "dolphin.yaml",
        {
            "base_url": f"http://127.0.0.1:{free_port()}/dolphinscheduler",
            "user": "xihe_bot",
            "password_env": "XIHE_DS_PASSWORD",
        },
    )
    edit("alerts.yaml", {"delivery.robot_base_url": robot.url, "instance_wait_seconds": 1})
    edit("ops.yaml", {"config_reload.interval_seconds": 1, "logging.format": "text"})


def test_no_canary_reaches_any_output(tmp_path: Path) -> None:
    secret = canaries()
    assert {
        "XIHE_RERANK_API_KEY",
        "XIHE_EMBEDDINGS_API_KEY",
        "XIHE_UI_TOKEN_DAVE",
        "XIHE_DS_PASSWORD",
    } <= set(secret)
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "orders.py").write_text(ORDERS_PY, encoding="utf-8")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "initial")
    db = tmp_path / "xihe.db"
    env = {**secret, "XIHE_DATABASE_URL": f"sqlite:///{db}"}

    llm = ScriptedLLM()
    with (
        llm,
        FakeWeCom() as wecom,
        FakeEmbeddings(dim=32, api_key=secret["XIHE_EMBEDDINGS_API_KEY"]) as emb,
        FakeEmbeddings(dim=32, api_key=secret["XIHE_RERANK_API_KEY"]) as rr,
        RobotSink(keys={secret["XIHE_ROBOT_KEY"], secret["XIHE_ROBOT_KEY_PROD"]}) as robot,
    ):
        wecom.add_app(secret["XIHE_WECOM_CORP_ID"], secret["XIHE_WECOM_APP_SECRET"], AGENT_ID)
        cfg = tmp_path / "cfg"
        write_config(cfg, llm, wecom, emb, rr, robot, repo)
        bot = Replica(cfg, env["XIHE_DATABASE_URL"], tmp_path, "serve", env).wait_ready()
        try:
            wait_until(lambda: re.search(r"code index \S+: full", bot.log()), what="the index build")
            emb.fail_next = [500]  # the question's embedding fails; the body echoes the bearer key
            rr.fail_next = [500, 500, 500]  # then every rerank fails the same way
            llm.add(
                call("search_code", query="order timeout"),
                call("search_code", query="notify owner"),
                say("Both searches failed upstream; nothing to show."),
            )
            sender = CallbackSender(
                bot.url,
                secret["XIHE_WECOM_TOKEN"],
                secret["XIHE_WECOM_AES_KEY"],
                secret["XIHE_WECOM_CORP_ID"],
            )
            assert sender.post_app_text("alice", "where do orders time out?", 1, AGENT_ID).status_code == 200
            replies = wait_until(
                lambda: (
                    any("nothing to show" in c for c in wecom.contents("alice")) and wecom.contents("alice")
                ),
                what="the final reply",
            )
            llm.assert_consumed()
            tool_results = [m["content"] for m in llm.messages[-1] if m.get("role") == "tool"]
            assert emb.fail_next == [] and rr.fail_next == []  # both echoing failures were served
            assert any("HTTP 500" in t for t in tool_results), tool_results  # and reached the model, masked

            # a DolphinScheduler failure alert, signed with the webhook secret; the robot first fails
            robot.script("http500")
            item = {
                "projectName": "etl",
                "processId": 345,
                "processDefinitionCode": 1001,
                "processName": "order_sync-1-20261202170000123",
                "taskName": "load",
                "taskType": "SHELL",
                "taskState": "FAILURE",
                "taskHost": "10.0.0.11:1234",
            }
            hook = bot.http.post(
                bot.url + "/hooks/dolphinscheduler",
                json={"title": "process failed", "msg": json.dumps([item])},
                headers={"X-Xihe-Token": secret["XIHE_DS_WEBHOOK_SECRET"]},
            )
            assert hook.status_code == 200, hook.text
            pushed = wait_until(
                lambda: robot.messages.get(secret["XIHE_ROBOT_KEY_PROD"]), what="the alert push"
            )
            assert any(status == 500 for _, _, status, _ in robot.answers)  # the failed try was audited too

            pages = {
                "/metrics": bot.http.get(bot.url + "/metrics").text,
                "/readyz": bot.http.get(bot.url + "/readyz").text,
            }
            login = bot.http.get(bot.url + "/ui/login").text
            csrf = re.search(r'name="csrf" value="([^"]+)"', login).group(1)  # type: ignore[union-attr]
            resp = bot.http.post(
                bot.url + "/ui/login",
                data={
                    "csrf": csrf,
                    "user": "dave",
                    "token": secret["XIHE_UI_TOKEN_DAVE"],
                    "next": "/ui/tasks",
                },
            )
            assert resp.status_code == 200 and "/ui/tasks" in resp.url, resp.text[:300]
            for path in (
                "/ui/tasks",
                "/ui/tasks/1",
                "/ui/tasks/1.json",
                "/ui/audit",
                "/ui/audit.json",
                "/ui/alerts",
                "/ui/pending",
            ):
                page = bot.http.get(bot.url + path)
                assert page.status_code == 200, (path, page.status_code)
                pages[path] = page.text
            assert "search_code" in pages["/ui/tasks/1"]
        finally:
            bot.terminate()

    cli_env = {**env, "PYTHONPATH": pythonpath()}
    cli = {}
    for args in (
        ["audit", "search", "--json"],
        ["audit", "search"],
        ["task", "show", "1", "--json"],
        ["task", "show", "1"],
    ):
        run = subprocess.run(
            [sys.executable, "-m", "xihe.agent.cli.main", "--config", str(cfg), *args],
            capture_output=True,
            text=True,
            env=cli_env,
            cwd=tmp_path,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        cli[" ".join(args)] = run.stdout + run.stderr
    assert "search_code" in cli["task show 1"]

    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        dump = {
            t: json.dumps(conn.execute(f'SELECT * FROM "{t}"').fetchall(), default=str, ensure_ascii=False)
            for t in tables
        }
    assert {"task", "task_step", "audit_event"} <= set(dump)

    outputs = {
        "serve log": bot.log(),
        **{f"table {t}": text for t, text in dump.items()},
        **{f"page {p}": text for p, text in pages.items()},
        **{f"cli {c}": text for c, text in cli.items()},
        "messages sent to WeCom": json.dumps(replies, ensure_ascii=False),
        "alerts pushed": json.dumps([m.content for m in pushed], ensure_ascii=False),
        "prompts the model received": json.dumps(llm.requests, ensure_ascii=False),
    }
    leaks = [
        f"{name} in {where}"
        for where, text in outputs.items()
        for name, core in cores(secret).items()
        if core in text or secret[name] in text
    ]
    assert not leaks, leaks
