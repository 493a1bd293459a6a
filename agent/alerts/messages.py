"""What `/maint` says, in English and Chinese (see `xihe.agent.i18n`)."""

from __future__ import annotations

from xihe.agent.i18n import Catalog

MAINT: Catalog = {
    "not_configured": {
        "en": "Alerts are not configured on this bot.",
        "zh": "这个机器人没有配置告警。",
    },
    "window": {
        "en": "#{n} {scope} {start} – {end} by {who}",
        "zh": "#{n} {scope} {start} – {end}（{who} 设置）",
    },
    "none_open": {"en": "No maintenance window is open.", "zh": "当前没有进行中的维护窗口。"},
    "config_window": {
        "en": "{name} {scope} until {end} (alerts.yaml)",
        "zh": "{name} {scope} 到 {end}（alerts.yaml）",
    },
    "scheduled": {"en": "Scheduled in alerts.yaml: {names}", "zh": "alerts.yaml 中的定期窗口：{names}"},
    "posted": {
        "en": "Posted to the alert channel(s) {channels}; they hear again when it ends, with how many failures it suppressed.",
        "zh": "已通知告警群 {channels}；结束时会再通知，并说明屏蔽了多少失败。",
    },
    "needs_admin": {
        "en": "/maint {verb} needs an admin role; {user} has {roles}.",
        "zh": "/maint {verb} 需要 admin 角色；{user} 的角色：{roles}。",
    },
    "no_roles": {"en": "none", "zh": "无"},
    "on": {
        "en": "Maintenance {window} is on: alerts in scope are recorded, not pushed.",
        "zh": "维护窗口 {window}已开启：范围内的告警只记录，不推送。",
    },
    "p0": {
        "en": "⚠️ It covers P0 core workflow(s) {workflows}: their failures will page nobody{where} until it "
        "ends. When it ends, the alert channel gets the list of what it suppressed.",
        "zh": "⚠️ 它覆盖了 P0 核心工作流 {workflows}：结束之前它们{where}失败不会通知任何人。"
        "结束时告警群会收到被压下的告警清单。",
    },
    "p0_host": {"en": " if they fail on that host", "zh": "在该主机上"},
    "none_matched": {
        "en": "No open maintenance window matched; nothing changed.",
        "zh": "没有匹配的进行中维护窗口，什么也没改。",
    },
    "closed": {
        "en": "Closed {n} maintenance window(s); alerts are pushed again.",
        "zh": "已关闭 {n} 个维护窗口；告警恢复推送。",
    },
    # errors of the command's arguments (maintenance.parse_maint_command)
    "usage": {
        "en": "usage: /maint on 30m|2h|1d [all|project:X|workflow:X|host:X]  or  /maint off [scope]",
        "zh": "用法：/maint on 30m|2h|1d [all|project:X|workflow:X|host:X]  或  /maint off [范围]",
    },
    "bad_duration": {
        "en": "{duration!r} is not a duration: {usage}",
        "zh": "{duration!r} 不是时长：{usage}",
    },
    "length": {
        "en": "maintenance length must be between 1 minute and 7 days (got {duration})",
        "zh": "维护时长必须在 1 分钟到 7 天之间（收到 {duration}）",
    },
    "scope_value": {
        "en": "scope {scope!r} needs a value after ':'",
        "zh": "范围 {scope!r} 的 ':' 后面需要一个值",
    },
}

ACK: Catalog = {
    "usage": {
        "en": "Usage: /ack [ID], ID = the instance id an alert shows (101) or the alert's id (A7); "
        "/ack alone takes the newest open alert.",
        "zh": "用法：/ack [ID]，ID 是告警中的实例编号（101）或告警编号（A7）；只写 /ack 认领最新的未处理告警。",
    },
    "none": {"en": "No open alert to acknowledge.", "zh": "没有待认领的告警。"},
    "unknown": {"en": "No alert {ref}.", "zh": "没有告警 {ref}。"},
    "acked": {
        "en": "Acknowledged {short} ({workflow} instance {instance_id}, {tier}); escalation stopped. "
        "The alert channel {channel} has been told.",
        "zh": "已认领 {short}（{workflow} 实例 {instance_id}，{tier}），升级已停止；已告知告警群 {channel}。",
    },
    "already": {
        "en": "{short} was acknowledged already by {who} at {at}.",
        "zh": "{short} 已由 {who} 于 {at} 认领。",
    },
    "closed": {
        "en": "{short} ({workflow} instance {instance_id}) is {state} already; nothing to acknowledge.",
        "zh": "{short}（{workflow} 实例 {instance_id}）已经{state}，无需认领。",
    },
    "refused": {
        "en": "{user} may not acknowledge {short}: only users listed in access.yaml, members of the "
        "on-call rotation of its team ({team}) and the people of its escalation chain (on-call, "
        "secondary, workflow owner, fallback) may. Ask an admin to add you to access.yaml.",
        "zh": "{user} 不能认领 {short}：只有 access.yaml 中登记的用户、其团队（{team}）值班轮换的成员，"
        "以及其升级链上的人（值班、备岗、负责人、兜底）可以认领。请管理员把你加入 access.yaml。",
    },
    "state_resolved": {"en": "resolved", "zh": "恢复"},
    "state_expired": {"en": "expired", "zh": "过期"},
}
