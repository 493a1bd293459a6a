"""`xihe alerts replay` on the documented event format: final failures only, bad lines reported, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from xihe.agent.cli.main import main

REPO_CONFIG = Path(__file__).resolve().parents[2] / "config"
T = datetime.fromisoformat("2026-12-02T17:00:00+08:00")


def line(sec: int = 0, **kw: Any) -> str:
    """One event line: a task attempt of order_sync (prod core → P0) unless overridden."""
    base: dict[str, Any] = {
        "at": (T + timedelta(seconds=sec)).isoformat(),
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


def wf(sec: int, state: str, instance_id: int = 1, **kw: Any) -> str:
    """A workflow-instance event: task null; host and error null unless it is the FAILURE."""
    return line(
        sec, **{"instance_id": instance_id, "state": state, "task": None, "host": None, "error": None, **kw}
    )


def lifecycle() -> list[str]:
    return [
        # instance 1 fails for good after one retry
        wf(0, "RUNNING_EXECUTION"),
        line(1, state="RUNNING_EXECUTION", retry_times=0, max_retry_times=1, host=None, error=None),
        line(30, state="FAILURE", retry_times=0, max_retry_times=1),
        line(90, state="RUNNING_EXECUTION", retry_times=1, max_retry_times=1, error=None),
        line(120, state="FAILURE", retry_times=1, max_retry_times=1),
        wf(
            121,
            "FAILURE",
            host="10.0.0.11:1234",
            error="Connection refused",
            retry_times=1,
            max_retry_times=1,
        ),
        # instance 2 is stopped by a user
        wf(200, "RUNNING_EXECUTION", instance_id=2),
        line(201, instance_id=2, state="RUNNING_EXECUTION", error=None),
        line(260, instance_id=2, state="KILL", error=None),
        wf(261, "STOP", instance_id=2),
        # instance 3 fails once and recovers on retry
        wf(300, "RUNNING_EXECUTION", instance_id=3),
        line(330, instance_id=3, state="FAILURE", retry_times=0, max_retry_times=2),
        line(400, instance_id=3, state="SUCCESS", retry_times=1, max_retry_times=2, error=None),
        wf(401, "SUCCESS", instance_id=3),
    ]


def test_only_the_final_failure_alerts_and_at_once(tmp_path: Path, capsys: Any) -> None:
    f = tmp_path / "events.jsonl"
    f.write_text("\n".join(lifecycle()) + "\n", encoding="utf-8")
    assert main(["alerts", "replay", str(f), "--config", str(REPO_CONFIG), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    pushed = [n for n in out["notifications"] if n["kind"] != "page"]
    assert [(n["tier"], n["channel"], n["key"]) for n in pushed] == [("P0", "prod", "inst:1:P0:prod")]
    # nobody acknowledged the P0: its chain is paged after escalate_after (alerts.yaml), step by step
    pages = [n["key"].rsplit(":", 1)[1] for n in out["notifications"] if n["kind"] == "page"]
    assert pages == ["oncall", "secondary"] and out["summary"]["lifecycle"] == {"fired": 1, "paged": 2}
    note = pushed[0]
    sent = datetime.fromisoformat(note["time"])
    assert sent - (T + timedelta(seconds=120)) <= timedelta(seconds=1)
    assert note["via"] == "robot" and "<@zhangsan>" in note["text"] and "load（重试 1/1）" in note["text"]
    assert "/rerun 1" in note["text"] and "+08:00" in note["text"]
    reasons = [(s["instance_id"], s["reason"]) for s in out["suppressed"]]
    assert reasons == [
        (1, "in_progress"),
        (1, "in_progress"),
        (1, "retry_pending"),
        (1, "in_progress"),
        (1, "instance_already_notified"),
        (2, "in_progress"),
        (2, "in_progress"),
        (2, "killed"),
        (2, "user_stop"),
        (3, "in_progress"),
        (3, "retry_pending"),
        (3, "not_failed"),
        (3, "not_failed"),
    ]
    assert out["summary"]["rate_limit_violations"] == 0 and out["bad_lines"] == []


def test_text_output(tmp_path: Path, capsys: Any) -> None:
    f = tmp_path / "events.jsonl"
    f.write_text(line() + "\n", encoding="utf-8")
    assert main(["alerts", "replay", str(f), "--config", str(REPO_CONFIG)]) == 0
    out = capsys.readouterr().out
    assert "P0  instance  channel=prod via=robot  key=inst:1:P0:prod" in out
    # the P0 and two escalation pages (nobody acknowledged it in the stream)
    assert "1 events → 3 notifications" in out and "bad lines: 0" in out
    assert "--- alert lifecycle ---" in out and "A1  instance 1  order_sync  P0  paged  zhangsan" in out


def test_null_fields_bad_lines_and_unknown_states_are_reported_and_skipped(tmp_path: Path) -> None:
    nulls = {k: None for k in ("project", "workflow_code", "task", "host", "error", "environment")}
    lines = [
        line(0, instance_id=10, **{**nulls, "retry_times": None, "max_retry_times": None}),  # 1: usable
        "{not json",  # 2
        json.dumps({"at": "2026-12-02T09:00:00Z", "workflow": "x", "state": "FAILURE"}),  # 3: no instance_id
        line(1, instance_id=11, state="EXPLODED"),  # 4: unknown state
        line(2, instance_id=12, at="2026-12-02T09:00:00"),  # 5: no offset
        "[1, 2]",  # 6
        "",  # blank lines are skipped, not errors
        line(3, instance_id=13, workflow=None),  # 8: required field null
        line(4, instance_id=14, retry_times="three"),  # 9
        line(5, instance_id=15, task=None, extra_field=1),  # 10: usable, unknown key ignored
        "\x00\xff garbage",  # 11
    ]
    f = tmp_path / "events.jsonl"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "xihe.agent.cli",
            "alerts",
            "replay",
            str(f),
            "--config",
            str(REPO_CONFIG),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    out = json.loads(proc.stdout)
    bad = {b["line"]: b["problem"] for b in out["bad_lines"]}
    assert sorted(bad) == [2, 3, 4, 5, 6, 8, 9, 11]
    assert bad[2].startswith("invalid JSON") and "instance_id" in bad[3] and "EXPLODED" in bad[4]
    assert "UTC offset" in bad[5] and "JSON object" in bad[6] and "workflow" in bad[8]
    assert "retry_times" in bad[9]
    for n in bad:
        assert f"{f}:{n}: " in proc.stderr
    assert "ignored unknown field(s): extra_field (1×)" in proc.stderr
    assert out["summary"]["bad_lines"] == 8 and out["summary"]["events"] == 2
    alerted = {n["key"] for n in out["notifications"] if n["kind"] != "page"}
    # the usable lines still alert; without project or code, instance 10's workflow is unknown (P1)
    assert alerted == {"inst:10:P1:default", "inst:15:P0:prod"}


def test_missing_file_is_a_clear_error(tmp_path: Path, capsys: Any) -> None:
    assert main(["alerts", "replay", str(tmp_path / "nope.jsonl"), "--config", str(REPO_CONFIG)]) == 2
    assert "nope.jsonl" in capsys.readouterr().err


def test_the_replay_imports_no_store_http_or_dolphinscheduler_client_and_prints_one_line(
    tmp_path: Path,
) -> None:
    """A replay is a simulation: SQLAlchemy, requests and the DolphinScheduler client stay unloaded
    (issue 30: they were 60% of a 10,000-event replay's start), so do smtplib (no mail is sent),
    rapidfuzz (no key is misspelt), the settings machinery and tenacity (nothing is retried); `--json` is one line unless
    `--indent N` asks for more."""
    import os
    import subprocess
    import sys

    f = tmp_path / "events.jsonl"
    f.write_text("\n".join(lifecycle()) + "\n", encoding="utf-8")
    code = (
        "import contextlib, io, json, sys\n"
        "from xihe.agent.cli.main import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"    main(['alerts', 'replay', {str(f)!r}, '--config', {str(REPO_CONFIG)!r}, '--json'])\n"
        "heavy = {'sqlalchemy', 'requests', 'xihe.integrations.dolphinscheduler.client', 'smtplib',\n"
        "         'rapidfuzz', 'xihe.config.settings', 'xihe.config.oncall', 'tenacity'} & set(sys.modules)\n"
        "print(json.dumps({'heavy': sorted(heavy), 'lines': out.getvalue().count(chr(10))}))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=dict(os.environ)
    )
    assert json.loads(run.stdout) == {"heavy": [], "lines": 1}


def test_indent_asks_for_the_indented_document_with_the_same_content(tmp_path: Path, capsys: Any) -> None:
    f = tmp_path / "events.jsonl"
    f.write_text("\n".join(lifecycle()) + "\n", encoding="utf-8")
    assert main(["alerts", "replay", str(f), "--config", str(REPO_CONFIG), "--json"]) == 0
    one_line = capsys.readouterr().out
    assert main(["alerts", "replay", str(f), "--config", str(REPO_CONFIG), "--json", "--indent", "2"]) == 0
    indented = capsys.readouterr().out
    assert one_line.count("\n") == 1 and indented.startswith('{\n  "notifications": [\n')
    assert json.loads(indented) == json.loads(one_line)


def test_replay_follows_acks_reruns_and_later_runs_and_names_each_resolved_instance_once(
    tmp_path: Path, capsys: Any
) -> None:
    biz = {"business_date": "2026-12-01"}
    lines = [
        wf(0, "FAILURE", instance_id=1, host="10.0.0.11:1", error="boom"),  # P0 order_sync
        json.dumps({"at": (T + timedelta(minutes=5)).isoformat(), "ack": "1", "by": "lisi"}),
        wf(600, "SUCCESS", instance_id=1, rerun_by="lisi"),  # its rerun succeeds
        wf(660, "SUCCESS", instance_id=1),  # reported again: resolves nothing twice
        wf(700, "FAILURE", instance_id=2, host="10.0.0.12:1", error="disk full", **biz),
        wf(3000, "SUCCESS", instance_id=3, **biz),  # a later run of the same business date
        wf(3100, "FAILURE", instance_id=4, host="10.0.0.13:1", error="oom", business_date="2026-12-02"),
        wf(3200, "SUCCESS", instance_id=5, business_date="2026-11-30"),  # another date: resolves nothing
        json.dumps({"at": (T + timedelta(minutes=90)).isoformat(), "ack": "A9", "by": "lisi"}),
        json.dumps({"at": "2026-12-02T18:00:00+08:00", "ack": "x1", "by": "lisi"}),  # a bad ack line
    ]
    f = tmp_path / "events.jsonl"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["alerts", "replay", str(f), "--config", str(REPO_CONFIG), "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["resolved"] == [1, 2]
    steps = [(m["alert"], m["why"], m["actor"]) for m in out["lifecycle"] if m["why"] != "paged"]
    assert steps[:3] == [
        ("A1", "fired", ""),
        ("A1", "acked", "lisi"),
        ("A1", "resolved_same_instance", "lisi"),
    ]
    assert ("A2", "resolved_later_run", "") in steps and ("A3", "fired", "") in steps
    paged = [m["alert"] for m in out["lifecycle"] if m["why"] == "paged"]
    assert "A1" not in paged and "A3" in paged  # acknowledged then resolved: never paged
    kinds = [n["kind"] for n in out["notifications"]]
    assert kinds.count("ack") == 1 and kinds.count("resolved") == 2
    assert out["ack_problems"] == ["line 9: ack A9 by lisi: no such alert"]
    assert out["bad_lines"] == [
        {"line": 10, "problem": "ack: expected an instance id (101) or an alert id (A1), got 'x1'"}
    ]
    assert main(["alerts", "replay", str(f), "--config", str(REPO_CONFIG)]) == 0
    text = capsys.readouterr().out
    assert text.count("--- resolved: instance 1, instance 2") == 1


def test_a_line_repeated_verbatim_is_the_same_event_and_each_repeat_counts() -> None:
    """Repeats are decoded once (issue 30): the same event at each place, an unknown field counted
    per line, a bad line reported at each of its line numbers."""
    from xihe.agent.alerts.replay import parse_lines

    good = json.dumps({**json.loads(lifecycle()[0]), "extra": 1})
    bad = json.dumps({"at": "2026-12-02T09:00:00+00:00", "workflow": "wf", "instance_id": 1})
    loaded = parse_lines([good, bad, good, "", bad, good])
    assert [e == loaded.events[0] for e in loaded.events] == [True, True, True]
    assert loaded.events[0] == parse_lines([good]).events[0]
    assert loaded.unknown_fields == {"extra": 3}
    assert [b.line for b in loaded.bad] == [2, 5]
    assert loaded.bad[0].problem == loaded.bad[1].problem


@pytest.mark.parametrize(
    "argv",
    [
        ["alerts", "replay", "--help"],
        ["alerts", "--help"],
        ["alerts", "bogus"],
        ["alerts", "replay"],
        ["alerts", "stats", "--since", "7d", "--json"],
        ["--config", "x", "alerts", "replay", "f.jsonl", "--json", "--indent", "2"],
        ["alerts", "replay", "f.jsonl", "--config", "y", "--indent", "x"],
    ],
)
def test_the_alerts_commands_parse_alone_as_in_the_whole_tree(argv: list[str]) -> None:
    """`xihe alerts …` builds only its own branch of the parser (issue 30: the whole tree imports
    every command's module): the same values, help and errors as the whole tree."""
    import contextlib
    import io

    from xihe.agent.cli.main import _alerts_parser, _command_word, build_parser

    assert _command_word(argv) == "alerts"

    def parsed(make: Any) -> tuple[Any, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                ns = vars(make().parse_args(argv))
                got: Any = {k: v.__qualname__ if callable(v) else v for k, v in ns.items()}
            except SystemExit as exc:
                got = ("exit", exc.code)
        return got, out.getvalue(), err.getvalue()

    assert parsed(_alerts_parser) == parsed(build_parser)
