"""The two lanes of a replica's channel: commands pass model work, chat is fair per user, and a
conversation runs one turn at a time (agent/lanes.py). Pure: no threads but the test's."""

from __future__ import annotations

from xihe.agent.lanes import Lane, Lanes, Waiting


def msg(key: str, user: str, lane: Lane = "chat", conversation: str = "") -> Waiting:
    return Waiting(key, user, conversation or f"memo:{user}", lane, 0.0)


def test_a_command_is_taken_at_once_however_much_chat_waits() -> None:
    lanes = Lanes(capacity=100)
    for i in range(50):
        assert lanes.push(msg(f"q{i}", f"u{i}")) is not None
    assert lanes.push(msg("status", "zoe", "command")) == 0  # nothing ahead of it in its lane
    taken = lanes.take("command", timeout=0)
    assert taken is not None and taken.key == "status"
    assert lanes.depth("chat") == 50 and lanes.depth("command") == 0


def test_chat_takes_users_in_turn_so_ten_questions_do_not_starve_a_first() -> None:
    lanes = Lanes(capacity=100)
    for i in range(10):
        lanes.push(msg(f"a{i}", "alice"))
    assert lanes.push(msg("b0", "bob")) == 1  # round robin: one of alice's goes first
    lanes.push(msg("c0", "carol"))
    order = []
    while (w := lanes.take("chat", timeout=0)) is not None:
        order.append(w.key)
        lanes.done(w)
    assert order == ["a0", "b0", "c0", *[f"a{i}" for i in range(1, 10)]]


def test_a_conversation_runs_one_turn_at_a_time_per_lane_and_others_pass_it() -> None:
    lanes = Lanes(capacity=100)
    room = "memo:room"
    for key, lane in (("a1", "chat"), ("a2", "chat"), ("a3", "command"), ("a4", "command")):
        lanes.push(msg(key, "alice", lane, conversation=room))  # type: ignore[arg-type]
    lanes.push(msg("b1", "bob", "command"))
    first = lanes.take("chat", timeout=0)
    assert first is not None and first.key == "a1"
    assert lanes.take("chat", timeout=0) is None  # a2 waits for a1
    command = lanes.take("command", timeout=0)  # a command does not wait for the model turn
    assert command is not None and command.key == "a3"
    passed = lanes.take("command", timeout=0)  # a4 waits for a3; bob's command passes it
    assert passed is not None and passed.key == "b1"
    assert lanes.in_flight() == 3
    lanes.done(first)
    after = lanes.take("chat", timeout=0)
    assert after is not None and after.key == "a2"
    lanes.done(command)
    last = lanes.take("command", timeout=0)
    assert last is not None and last.key == "a4"


def test_a_full_lane_refuses_and_the_other_still_takes() -> None:
    lanes = Lanes(capacity=2)
    assert [lanes.push(msg(f"q{i}", "alice")) for i in range(3)] == [0, 1, None]
    assert lanes.push(msg("s", "alice", "command")) == 0
    assert lanes.room() == 1
    lanes.close()
    assert lanes.take("chat", timeout=5) is None  # closed: workers stop at once
