"""WeCom group robots: WeCom markdown v1 pushed to the webhook whose key `channel.robot_key_env` holds.

WeCom's errcodes are read here: busy and rate limits are retryable; a message WeCom refuses
(too long, bad markup) is `refused`, so the row goes by e-mail instead of being retried.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from xihe.agent.alerts.notify.base import Attempt
from xihe.integrations.wecom.robot import CONTENT_ERRCODES, RobotClient, RobotError, RobotReply, redact

if TYPE_CHECKING:
    from xihe.config.alerts import AlertsConfig, Channel

KIND = "wecom_robot"
MARKUP = "wecom_markdown"  # render.py's templates and escaping


class RobotSender(Protocol):
    """What this notifier needs from a robot client (integrations.wecom.robot.RobotClient)."""

    def send_markdown(self, key: str, content: str) -> RobotReply:
        """Push markdown; raise RobotError on failure."""
        ...


class WeComRobotNotifier:
    """Sends a channel's rows through its WeCom robot."""

    kind = KIND
    markup = MARKUP

    def __init__(self, robot: RobotSender, env: Mapping[str, str]) -> None:
        self.robot = robot
        self.env = env

    def ready(self, channel: Channel) -> str:
        """The robot key variable must be set."""
        return (
            ""
            if self.env.get(channel.robot_key_env)
            else f"robot key variable {channel.robot_key_env} is not set"
        )

    def send(self, channel: Channel, text: str, *, subject: str = "", ref: str = "") -> Attempt:
        """One webhook POST; the key is masked wherever the answer or the error echoes it."""
        key = self.env.get(channel.robot_key_env, "")
        try:
            reply = self.robot.send_markdown(key, text)
        except RobotError as exc:
            return Attempt(
                False,
                exc.status,
                redact(exc.body, key),
                exc.errcode,
                redact(str(exc), key),
                retryable=exc.retryable,
                refused=exc.errcode in CONTENT_ERRCODES,
            )
        return Attempt(True, reply.status, redact(reply.body, key), reply.errcode)


def make(config: AlertsConfig, env: Mapping[str, str]) -> WeComRobotNotifier:
    """The notifier the alert service uses, over the real webhook client."""
    return WeComRobotNotifier(
        RobotClient(config.delivery.robot_base_url, config.delivery.timeout_seconds), env
    )
