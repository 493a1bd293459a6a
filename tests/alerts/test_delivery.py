"""Delivery: rate limit, robot errcodes over real HTTP, outbox leases, e-mail fallback and recovery."""

from __future__ import annotations

from datetime import timedelta

import pytest
from tenacity import wait_none

from tests.alerts.conftest import T0, config, event
from xihe.agent.alerts.deliver import Deliverer
from xihe.agent.alerts.model import Kind, Notification, Tier
from xihe.agent.alerts.notify.email import EmailNotifier
from xihe.agent.alerts.notify.wecom_robot import WeComRobotNotifier
from xihe.agent.alerts.outbox import InMemoryOutbox, OutboxRow
from xihe.agent.alerts.ratelimit import RateLimiter, next_free
from xihe.agent.clock import FakeClock
from xihe.agent.email_text import plain
from xihe.integrations.fakes.smtp_sink import SmtpSink
from xihe.integrations.mailer import Mailer
from xihe.integrations.wecom.robot import RobotClient, RobotError
from xihe.integrations.wecom.robot_sink import RobotSink

KEY = "0123abcd-key-secret-5678"
ENV = {"XIHE_ROBOT_KEY": KEY, "XIHE_ROBOT_KEY_PROD": KEY + "-prod", "XIHE_SMTP_PASSWORD": "pw-secret"}


def note(i: int, at=T0) -> Notification:
    return Notification(
        f"inst:{i}:P1:default", Kind.INSTANCE, Tier.P1, "default", at, f"message {i}", f"subj {i}"
    )


def test_next_free_is_a_sliding_window():
    sent = [T0 + timedelta(seconds=s) for s in range(20)]
    assert next_free(sent[:19], T0 + timedelta(seconds=30), 20, timedelta(minutes=1)) == T0 + timedelta(
        seconds=30
    )
    assert next_free(sent, T0 + timedelta(seconds=30), 20, timedelta(minutes=1)) == T0 + timedelta(seconds=60)
    assert next_free(sent, T0 + timedelta(seconds=61), 20, timedelta(minutes=1)) == T0 + timedelta(seconds=61)


def test_outbox_key_is_unique_and_claims_are_leased():
    ob = InMemoryOutbox()
    assert ob.add(OutboxRow.of(note(1))) and not ob.add(OutboxRow.of(note(1)))
    a = ob.claim(T0, "a", timedelta(seconds=60), 10)
    assert [r.key for r in a] == ["inst:1:P1:default"]
    assert ob.claim(T0 + timedelta(seconds=30), "b", timedelta(seconds=60), 10) == []  # leased to a
    b = ob.claim(T0 + timedelta(seconds=61), "b", timedelta(seconds=60), 10)  # a crashed: lease expired
    assert [r.key for r in b] == ["inst:1:P1:default"]
    assert not ob.mark_sent("inst:1:P1:default", "a", T0, "robot")  # a lost the row
    assert ob.mark_sent("inst:1:P1:default", "b", T0, "robot")


ERRCODES = [
    (0, None, None),
    (93000, 93000, False),
    (45009, 45009, True),
    (40008, 40008, False),
    (44004, 44004, False),
    (40058, 40058, False),
    (-1, -1, True),
    ("http500", None, True),
    ("timeout", None, True),
    ("garbage", None, True),
]


@pytest.mark.parametrize(("answer", "errcode", "retryable"), ERRCODES, ids=[str(e[0]) for e in ERRCODES])
def test_robot_client_errcodes_over_http(answer, errcode, retryable):
    with RobotSink() as sink:
        sink.timeout_delay = 0.5
        client = RobotClient(sink.url, timeout=0.2)
        sink.script(answer)
        if answer == 0:
            assert client.send_markdown(KEY, "hi").errcode == 0
            return
        with pytest.raises(RobotError) as err:
            client.send_markdown(KEY, "hi")
        assert err.value.errcode == errcode and err.value.retryable is retryable
        assert KEY not in str(err.value) and KEY not in err.value.body


def test_sink_enforces_wecom_limits_on_its_clock():
    clock = FakeClock(T0)
    with RobotSink(keys={KEY}, clock=clock) as sink:
        client = RobotClient(sink.url)
        with pytest.raises(RobotError, match="93000"):
            client.send_markdown("wrong", "x")
        with pytest.raises(RobotError, match="40058"):
            client.send_markdown(KEY, "中" * 1366)  # 4098 bytes
        for _ in range(19):  # the 40058 request counted too: WeCom counts every request
            client.send_markdown(KEY, "x")
        with pytest.raises(RobotError, match="45009"):
            client.send_markdown(KEY, "x")
        clock.advance(61)
        assert client.send_markdown(KEY, "x").errcode == 0


def make_deliverer(cfg, outbox, sink, smtp, clock_env=ENV):
    return Deliverer(
        cfg,
        outbox,
        [WeComRobotNotifier(RobotClient(sink.url, timeout=0.3), clock_env)],
        EmailNotifier(
            Mailer(
                smtp.host,
                smtp.port,
                "xihe@test",
                username="xihe",
                password_env="XIHE_SMTP_PASSWORD",
                env=clock_env,
            ),
            cfg.smtp.admins,
        ),
        RateLimiter(),
        wait=wait_none(),
        sleep=lambda _s: None,
    )


def test_retryable_errcode_is_retried_and_every_attempt_audited_without_the_key():
    cfg = config(smtp={"host": "127.0.0.1", "admins": ["ops@test"]})
    with RobotSink() as sink, SmtpSink() as smtp:
        outbox = InMemoryOutbox()
        outbox.add(OutboxRow.of(note(1)))
        sink.script(45009, "http500")
        audit = make_deliverer(cfg, outbox, sink, smtp).run_once(T0)
        assert [(a.ok, a.errcode, a.status) for a in audit] == [
            (False, 45009, 200),
            (False, None, 500),
            (True, 0, 200),
        ]
        assert outbox.get("inst:1:P1:default").sent_via == "robot"
        assert all(KEY not in str(a.to_dict()) for a in audit)
        assert '"errcode": 45009' in audit[0].body


def test_retries_wait_the_default_backoff_between_tries_and_stop_after_tries_per_run():
    """The first try goes out without tenacity; the retries wait 0.5 s, then 1 s (the default
    exponential wait), and the row fails after `tries_per_run` tries."""
    cfg = config(smtp={"host": "127.0.0.1", "admins": ["ops@test"]}, delivery={"tries_per_run": 3})
    slept: list[float] = []
    with RobotSink() as sink, SmtpSink() as smtp:
        outbox = InMemoryOutbox()
        outbox.add(OutboxRow.of(note(1)))
        sink.script(45009, "http500", 45009, 0)
        d = make_deliverer(cfg, outbox, sink, smtp)
        d.wait, d.sleep = Deliverer.__dataclass_fields__["wait"].default_factory(), slept.append
        audit = d.run_once(T0)
        assert [a.errcode for a in audit] == [45009, None, 45009]
        assert slept == [0.5, 1.0]
        assert outbox.get("inst:1:P1:default").status != "sent"


def test_non_retryable_content_error_goes_straight_to_mail():
    cfg = config(smtp={"host": "127.0.0.1", "admins": ["ops@test"]})
    with RobotSink() as sink, SmtpSink() as smtp:
        outbox = InMemoryOutbox()
        outbox.add(OutboxRow.of(note(1)))
        sink.script(40058)
        audit = make_deliverer(cfg, outbox, sink, smtp).run_once(T0)
        assert [(a.via, a.ok) for a in audit] == [("robot", False), ("email", True)]
        assert len(smtp.mails) == 1 and smtp.mails[0].body.strip() == "message 1"
        assert smtp.mails[0].auth_user == "xihe"


def test_rate_limit_holds_rows_instead_of_violating():
    clock = FakeClock(T0)
    cfg = config()
    with RobotSink(keys={KEY}, clock=clock) as sink, SmtpSink() as smtp:
        outbox = InMemoryOutbox()
        for i in range(45):
            outbox.add(OutboxRow.of(note(i)))
        d = make_deliverer(cfg, outbox, sink, smtp)
        while outbox.next_due() is not None:
            clock.now = max(clock.now, outbox.next_due())
            d.run_once(clock.now)
        assert len(sink.messages[KEY]) == 45
        assert not any(code == 45009 for _at, _k, _s, code in sink.answers)
        assert clock.now - T0 >= timedelta(minutes=2)  # 45 messages need three minutes' worth of slots


def test_a_p0_is_sent_at_once_even_when_p1_messages_have_used_their_share():
    clock = FakeClock(T0)
    cfg = config()
    with RobotSink(keys={KEY}, clock=clock) as sink, SmtpSink() as smtp:
        outbox = InMemoryOutbox()
        for i in range(30):
            outbox.add(OutboxRow.of(note(i)))
        d = make_deliverer(cfg, outbox, sink, smtp)
        d.run_once(clock.now)
        assert len(sink.messages[KEY]) == 16  # P1 stops 4 short of WeCom's 20: the rest is kept for P0
        clock.advance(5)
        page = Notification("inst:99:P0:default", Kind.INSTANCE, Tier.P0, "default", clock(), "page", "p0")
        outbox.add(OutboxRow.of(page))
        d.run_once(clock.now)
        assert sink.messages[KEY][-1].content == "page" and len(sink.messages[KEY]) == 17
        assert not any(code == 45009 for _at, _k, _s, code in sink.answers)


def test_outage_during_a_storm_every_alert_arrives_exactly_once(make_pipeline):
    clock = FakeClock(T0)
    cfg = config(
        instance_wait_seconds=10,
        smtp={"host": "127.0.0.1", "admins": ["ops@test"]},
        delivery={"probe_seconds": 60, "retry_seconds": 30},
    )
    outbox = InMemoryOutbox()
    p = make_pipeline(cfg, outbox=outbox)
    with RobotSink(keys={KEY}, clock=clock) as sink, SmtpSink() as smtp:
        d = make_deliverer(cfg, outbox, sink, smtp)
        sink.fail_for(240, "http500")  # the robot is down for the first 4 minutes
        for step in range(0, 60):  # 10 minutes in 10-second steps
            now = clock.now
            for j in range(2):  # two new failing instances every 10 s, each with its own cause and host
                i = step * 2 + j
                p.feed(
                    event(instance_id=1000 + i, host=f"10.1.{i}.1:1", error=f"cause-{'ab'[j]}{'x' * i}"), now
                )
            p.tick(now)
            d.run_once(now)
            clock.advance(10)
        for _ in range(60):  # drain: no new events, windows close, backlog goes out
            p.tick(clock.now)
            d.run_once(clock.now)
            clock.advance(10)
        rows = outbox.rows()
        assert rows and all(r.status == "sent" for r in rows)
        robot_texts = [m.content for m in sink.messages.get(KEY, [])]
        mail_texts = [m.body.strip() for m in smtp.mails]
        for r in rows:
            assert robot_texts.count(r.text) + mail_texts.count(plain(r.text).strip()) == 1, r.key
        assert len(robot_texts) + len(mail_texts) == len(rows)
        assert mail_texts and robot_texts  # some by e-mail during the outage, the rest by robot after it
        assert d.health["default"].mode == "robot"  # switched back after a probe succeeded
        assert not any(code == 45009 for _at, _k, _s, code in sink.answers)
        assert len(rows) == 120  # 120 instances with distinct causes and hosts: one message each
