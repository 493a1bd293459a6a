"""What `/oncall` says, in English and Chinese (see `xihe.agent.i18n`)."""

from __future__ import annotations

from xihe.agent.i18n import Catalog

ONCALL: Catalog = {
    "not_configured": {
        "en": "No on-call rotation is configured on this bot (config/oncall.yaml).",
        "zh": "这个机器人没有配置值班轮换（config/oncall.yaml）。",
    },
    "now": {"en": "On call at {at}:", "zh": "{at} 的值班："},
    "team": {
        "en": "**{team}**: primary {primary}, secondary {secondary} (shift {start} – {end}, {every})",
        "zh": "**{team}**：主值班 {primary}，副值班 {secondary}（班次 {start} – {end}，{every}）",
    },
    "daily": {"en": "daily", "zh": "每天交接"},
    "weekly": {"en": "weekly", "zh": "每周交接"},
    "nobody": {"en": "nobody", "zh": "无"},
    "take_line": {
        "en": "  override #{n}: {user} took the shift until {end} (by {by})",
        "zh": "  调整 #{n}：{user} 接班到 {end}（{by} 设置）",
    },
    "swap_line": {
        "en": "  override #{n}: {user} covers {replaces} until {end} (by {by})",
        "zh": "  调整 #{n}：{user} 替 {replaces} 值班到 {end}（{by} 设置）",
    },
    "listed": {
        "en": "Workflows without a team page their oncall list: {items}",
        "zh": "没有团队的工作流按 oncall 列表通知：{items}",
    },
    "took": {
        "en": "You are on call for {team} from now until {end} (instead of {before}). It ends by itself.",
        "zh": "你从现在起值班 {team}，到 {end}（原本是 {before}）。到时自动结束。",
    },
    "swapped": {
        "en": "{user} covers your {team} duty from {start} to {end}{back}. It ends by itself.",
        "zh": "{user} 从 {start} 到 {end} 替你值班 {team}{back}。到时自动结束。",
    },
    "swapped_back": {"en": " (and you cover theirs)", "zh": "（你替 ta 的班）"},
    # errors, each naming the bad argument
    "usage": {
        "en": "usage: /oncall [all|TEAM]  ·  /oncall take [30m|2h|1d] [TEAM]  ·  "
        "/oncall swap @USER [today|tomorrow|YYYY-MM-DD|4h] [TEAM]",
        "zh": "用法：/oncall [all|团队]  ·  /oncall take [30m|2h|1d] [团队]  ·  "
        "/oncall swap @用户 [today|tomorrow|YYYY-MM-DD|4h] [团队]",
    },
    "unknown_team": {"en": "unknown team {team!r} {hint}", "zh": "未知团队 {team!r} {hint}"},
    "no_team": {
        "en": "{user} is in no on-call rotation (teams: {teams}); only members can take or swap shifts.",
        "zh": "{user} 不在任何值班轮换中（团队：{teams}）；只有成员可以接班或换班。",
    },
    "which_team": {
        "en": "{user} is in several rotations ({teams}): name the team, e.g. {example}",
        "zh": "{user} 在多个轮换中（{teams}）：请指明团队，例如 {example}",
    },
    "not_member": {
        "en": "{user} is not in the rotation of {team} (members: {members})",
        "zh": "{user} 不在 {team} 的值班轮换中（成员：{members}）",
    },
    "bad_duration": {
        "en": "{value!r} is not a duration: use 30m, 2h or 1d",
        "zh": "{value!r} 不是时长：请用 30m、2h 或 1d",
    },
    "bad_length": {
        "en": "{value!r} is out of range: an override lasts 15 minutes to {hours} hours",
        "zh": "{value!r} 超出范围：调整时长为 15 分钟到 {hours} 小时",
    },
    "bad_period": {
        "en": "{value!r} is not a period: use today, tomorrow, a date YYYY-MM-DD or a duration (4h)",
        "zh": "{value!r} 不是时段：请用 today、tomorrow、日期 YYYY-MM-DD 或时长（4h）",
    },
    "past_period": {
        "en": "{value!r} is over already (now: {now})",
        "zh": "{value!r} 已经过去了（现在：{now}）",
    },
    "swap_who": {
        "en": "name who covers your shift: /oncall swap @USER today",
        "zh": "请指明替你值班的人：/oncall swap @用户 today",
    },
    "swap_self": {"en": "you cannot swap with yourself ({user})", "zh": "不能和自己换班（{user}）"},
    "not_on_duty": {
        "en": "{user} has no {team} duty in {period} (on call then: {who}); nothing to swap",
        "zh": "{user} 在 {period} 没有 {team} 的值班（当时值班：{who}）；无班可换",
    },
    "already_primary": {
        "en": "{user} is the primary of {team} already (until {end}); nothing to take",
        "zh": "{user} 已经是 {team} 的主值班（到 {end}）；无需接班",
    },
}
