"""WeCom self-built app: a channel's alerts as app markdown to its members, and for a P0/P1 run alert
a card with buttons as well.

The alert's text is rendered like the robot's (WeCom markdown v1); a run alert's text ends with its
next steps as commands (`/rerun 102`, `/maint on 30m workflow:X`, see templates/instance.md.j2).
Where those are present, the members also get a `button_interaction` card whose buttons stand for
them (`xihe.agent.cards.ALERT_VERBS`): a tap comes back to the app callback and runs the typed
command through the same code (a rerun waits for its confirmation like a typed one). The group
robot webhook has no callbacks, so its alerts keep the text commands only.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from xihe.agent.alerts.notify.base import Attempt
from xihe.agent.clock import utc_now
from xihe.agent.errors import WeComError
from xihe.integrations.wecom.robot import redact

if (
    TYPE_CHECKING
):  # the HTTP client and the cards are imported by the first send: the pipeline only reads MARKUP
    from xihe.agent.cards import Card
    from xihe.agent.i18n import Lang
    from xihe.config.alerts import AlertsConfig, Channel
    from xihe.integrations.wecom.app_client import AppClient

KIND = "wecom_app"
MARKUP = "wecom_markdown"  # the same templates and escaping as the robot

_RERUN = re.compile(r"/rerun (\d+)")
_MUTE = re.compile(r"/maint on 30m workflow:(\S+)")
# markup to drop from a line shown on the card: a whole <font …> tag first, before its lone `<`
_MARKS = re.compile(r"</?font[^>]*>|[#*>`<]|\[|\]\([^)]*\)")
# the alert's fact lines (`> 实例 ID：102`, `> 失败时间：…`) worth a card row, by their key
_FACT = re.compile(r"^>\s*(实例 ID|失败任务|失败时间|Instance|Failed task|Failed at)[：:]\s*(.+)$")
_ALERT_ID = re.compile(r"\s*(告警|Alert)[：:]\s*(A\d+)\s*$")
_ERROR = re.compile(r"^\*\*(?:错误|Error)\*\*[：:]\s*(.+)$")
# a log line's level and time before its message (`［ERROR］ 2026-12-05 04:47:00 +00:00 - `): the
# card's short description keeps the message
_LOG_PREFIX = re.compile(r"^[\[［](?:ERROR|WARN|INFO|FATAL)[\]］]\s*[\d\-:+. ]*-\s+")
MAX_FACT = 40  # characters of one fact row's value
MAX_DESC = 44  # characters of the card's description (WeCom's recommended length for the app)


def alert_card(text: str) -> Card | None:
    """The button card of a run alert (its rerun and mute commands found in the text), else None:
    its title line, its error as the description, its instance / failed task / time as rows, and
    the buttons. Card text is plain text (no markdown, no links), so markup is dropped."""
    rerun, mute = _RERUN.search(text), _MUTE.search(text)
    if rerun is None or mute is None:
        return None
    lang: Lang = "zh" if re.search(r"[\u4e00-\u9fff]", text) else "en"
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("<@")]
    title = _MARKS.sub("", lines[0] if lines else "").strip()[:36] or "xihe"
    rows, desc = [], ""
    for line in lines:
        fact, error = _FACT.match(line.strip()), _ERROR.match(line.strip())
        if fact is not None:
            value = _MARKS.sub("", fact.group(2)).strip()
            short = _ALERT_ID.search(value)  # `102　告警：A7`: the alert's own id is a row of its own
            rows.append((fact.group(1), value[: short.start() if short else MAX_FACT][:MAX_FACT]))
            if short is not None:
                rows.append((short.group(1), short.group(2)))
        elif error is not None and not desc:
            desc = _LOG_PREFIX.sub("", _MARKS.sub("", error.group(1)).strip())
            desc = desc if len(desc) <= MAX_DESC else desc[: MAX_DESC - 1] + "…"
    from xihe.agent.cards import Card, alert_buttons

    return Card(title, desc, tuple(rows), alert_buttons(int(rerun.group(1)), mute.group(1), lang))


class WeComAppNotifier:
    """Sends a channel's rows through the app message API to the channel's members."""

    kind = KIND
    markup = MARKUP

    def __init__(self, env: Mapping[str, str], timeout: float = 10.0) -> None:
        self.env = env
        self.timeout = timeout
        self._clients: dict[tuple[str, str, int, str], AppClient] = {}
        self._lock = threading.Lock()

    def ready(self, channel: Channel) -> str:
        """The CorpID and Secret variables must be set."""
        missing = [n for n in (channel.corp_id_env, channel.robot_key_env) if not self.env.get(n)]
        return f"variable(s) {', '.join(missing)} not set" if missing else ""

    def _client(self, channel: Channel) -> AppClient:
        assert channel.agent_id is not None  # the config requires it for this kind
        key = (
            self.env[channel.corp_id_env],
            self.env[channel.robot_key_env],
            channel.agent_id,
            channel.api_base,
        )
        from xihe.integrations.wecom.app_client import AppClient, TokenCache

        with self._lock:
            if key not in self._clients:
                self._clients[key] = AppClient(
                    key[0], key[1], key[2], api_base=key[3], tokens=TokenCache(utc_now), timeout=self.timeout
                )
            return self._clients[key]

    def send(self, channel: Channel, text: str, *, subject: str = "", ref: str = "") -> Attempt:
        """The markdown to every member, then (for a run alert) its button card; the Secret never shows."""
        secret = self.env.get(channel.robot_key_env, "")
        try:
            client = self._client(channel)
            client.send_markdown("|".join(channel.to_users), text)
            card = alert_card(text)
            if card is not None:
                from secrets import token_hex

                from xihe.integrations.wecom.cards import template_card

                digest = hashlib.sha256((ref or text).encode("utf-8")).hexdigest()[:16]
                client.send_card(
                    list(channel.to_users), template_card(card, f"xihe-alert-{digest}-{token_hex(4)}")
                )
        except WeComError as exc:
            return Attempt(
                False, errcode=exc.errcode, error=redact(str(exc), secret), retryable=exc.retryable
            )
        return Attempt(True, 200, "ok")


def make(config: AlertsConfig, env: Mapping[str, str]) -> WeComAppNotifier:
    """The notifier the alert service uses."""
    return WeComAppNotifier(env, config.delivery.timeout_seconds)
