"""What the model is told never reaches a person verbatim."""

import pytest

from xihe.agent.user_text import for_people


@pytest.mark.parametrize(
    ("model_text", "lang", "people"),
    [
        (
            "NOT EXECUTED: the confirmation was expired; tell the user nothing was done.",
            "en",
            "Not run: the confirmation was expired; nothing was done.",
        ),
        (
            "NOT EXECUTED: the confirmation was expired; tell the user nothing was done.",
            "zh",
            "没有执行：the confirmation was expired; nothing was done.",
        ),
        (
            "NOT RUN AGAIN: the confirmation was cancelled. An earlier attempt was interrupted and may or may "
            "not have taken effect; tell the user the outcome is unknown.",
            "en",
            "Not run again: the confirmation was cancelled. An earlier attempt was interrupted and may or may "
            "not have taken effect; the outcome is unknown.",
        ),
        ("DENIED: role viewer may not use write_note.", "en", "Refused: role viewer may not use write_note."),
        (
            "ERROR: 'sync' matches several workflows: order_sync (etl); user_sync (crm). Ask the user which one "
            "they mean and call again with that exact name (and project).",
            "zh",
            "失败：'sync' matches several workflows: order_sync (etl); user_sync (crm). 你指的是哪一个？",
        ),
        ("order_sync started: instance 101", "en", "order_sync started: instance 101"),
    ],
)
def test_for_people(model_text: str, lang: str, people: str) -> None:
    out = for_people(model_text, lang)  # type: ignore[arg-type]
    assert out == people
    assert "the user" not in out and "call again" not in out


def test_readable_args_leave_out_empty_ones_and_keep_characters() -> None:
    from xihe.agent.user_text import readable_args

    shown = readable_args({"workflow": "订单同步", "project": "", "dates": ["2026-12-01"], "k": None})
    assert shown == 'workflow: 订单同步\ndates: ["2026-12-01"]'
