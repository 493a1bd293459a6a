"""`xihe alerts replay`: output, suppression reasons, bad lines as file:line: problem."""

from __future__ import annotations

import json
from pathlib import Path

from agent.cli_alerts import main

REPO_CONFIG = Path(__file__).resolve().parents[2] / "config"


def line(**kw: object) -> str:
    base: dict[str, object] = {
        "at": "2026-12-02T09:00:00Z",
        "project": "etl",
        "workflow": "order_sync",
        "workflow_code": 1001,
        "instance_id": 1,
        "state": "FAILURE",
        "task": "load",
        "host": "10.0.0.11:1234",
        "error": "Connection refused",
        "retry_times": 0,
        "max_retry_times": 0,
        "environment": "prod",
    }
    base.update(kw)
    return json.dumps(base)


def test_replay_json_lists_notifications_and_suppressions(tmp_path: Path, capsys):
    f = tmp_path / "events.jsonl"
    f.write_text(
        "\n".join(
            [
                line(state="RUNNING_EXECUTION", retry_times=0, max_retry_times=1),
                line(at="2026-12-02T09:01:00Z", retry_times=1, max_retry_times=1),
                line(at="2026-12-02T09:01:01Z", task="index"),
                line(at="2026-12-02T09:02:00Z", instance_id=2, state="STOP"),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    assert main(["alerts", "replay", str(f), "--config", str(REPO_CONFIG), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(n["tier"], n["channel"], n["key"]) for n in out["notifications"]] == [
        ("P0", "prod", "inst:1:P0:prod")
    ]
    note = out["notifications"][0]
    assert note["via"] == "robot" and "<@zhangsan>" in note["text"] and "load" in note["text"]
    reasons = [s["reason"] for s in out["suppressed"]]
    assert reasons == ["retry_pending", "joined_instance", "user_stop"]
    assert out["summary"]["rate_limit_violations"] == 0 and out["summary"]["naive_one_per_failure"] == 3


def test_replay_text_output(tmp_path: Path, capsys):
    f = tmp_path / "events.jsonl"
    f.write_text(line() + "\n", encoding="utf-8")
    assert main(["alerts", "replay", str(f), "--config", str(REPO_CONFIG)]) == 0
    out = capsys.readouterr().out
    assert (
        "P0  instance  channel=prod via=robot  key=inst:1:P0:prod" in out
        and "1 events → 1 notifications" in out
    )


def test_bad_lines_are_reported_as_file_line_problem(tmp_path: Path, capsys):
    f = tmp_path / "events.jsonl"
    f.write_text(
        line() + "\n{not json\n" + json.dumps({"at": "2026-12-02T09:00:00Z", "bogus": 1}) + "\n[1]\n",
        encoding="utf-8",
    )
    assert main(["alerts", "replay", str(f), "--config", str(REPO_CONFIG)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{f}:2: invalid JSON")
    assert err[1] == f"{f}:3: unknown field(s) bogus"
    assert err[2] == f"{f}:4: expected a JSON object"
