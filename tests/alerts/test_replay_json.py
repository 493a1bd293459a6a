"""`xihe alerts replay --json` puts its records in as text (model.records_json): the bytes json.dumps
makes, hostile text included."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.alerts import storm
from xihe.agent.alerts.model import AlertRecord, Reason, Tier, records_json
from xihe.agent.cli.main import main

HOSTILE = [
    "plain",
    'say "hi"',
    "back\\slash",
    "line\nbreak\ttab\r",
    "\x00\x1f\x7f",
    "订单同步",
    "\u2028\u2029",
    "😀",
    "",
]
T = datetime(2026, 12, 2, 9, 0, 5, 123456, tzinfo=UTC)


def _records() -> list[AlertRecord]:
    out = []
    for i, text in enumerate(HOSTILE):
        out.append(
            AlertRecord(
                T + timedelta(seconds=i),
                f"{i}:{text}:FAILURE:0",
                -i if i % 2 else i,
                text,
                text[::-1],
                list(Reason)[i % len(Reason)],
                [None, Tier.P0, Tier.P1, Tier.P2][i % 4],
                text * 2,
                f"inst:{text}",
            )
        )
    out.append(AlertRecord(T.astimezone(timezone(timedelta(hours=8))), "k", 1, "w", "t", Reason.KILLED))
    out.append(AlertRecord(T, "k", True, "w", "t", Reason.KILLED))  # not an int: left to json.dumps
    return out


def test_records_json_is_what_json_dumps_makes() -> None:
    records = _records()
    assert records_json(records) == json.dumps([r.to_dict() for r in records], ensure_ascii=False)
    assert records_json([]) == "[]"


def test_the_one_line_document_is_json_dumps_of_itself(tmp_path: Path, capsys: Any) -> None:
    lines = storm.generate(seed=11, instances=40).lines
    for i, line in enumerate(lines[:60]):  # hostile workflow names, tasks and errors
        line.update(workflow=HOSTILE[i % len(HOSTILE)] or "w", error=HOSTILE[(i + 3) % len(HOSTILE)])
        if line.get("task"):
            line["task"] = HOSTILE[(i + 5) % len(HOSTILE)] or "t"
    f = tmp_path / "events.jsonl"
    f.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    config = Path(__file__).resolve().parents[2] / "config"
    assert main(["alerts", "replay", str(f), "--config", str(config), "--json"]) == 0
    printed = capsys.readouterr().out
    doc = json.loads(printed)
    assert printed == json.dumps(doc, ensure_ascii=False) + "\n"
    assert list(doc) == [
        "notifications",
        "suppressed",
        "lifecycle",
        "resolved",
        "ack_problems",
        "bad_lines",
        "summary",
    ]
    assert any("\\u2028" in json.dumps(s["workflow"]) or "\u2028" in s["workflow"] for s in doc["suppressed"])
    assert main(["alerts", "replay", str(f), "--config", str(config), "--json", "--indent", "2"]) == 0
    assert json.loads(capsys.readouterr().out) == doc


@pytest.mark.parametrize("text", HOSTILE)
def test_each_hostile_string_alone(text: str) -> None:
    r = AlertRecord(T, text, 7, text, text, Reason.DUPLICATE_EVENT, Tier.P2, text, text)
    assert records_json([r, r]) == json.dumps([r.to_dict(), r.to_dict()], ensure_ascii=False)
