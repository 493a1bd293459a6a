"""WeCom `text` messages (the AI bot's welcome, robot and app text): outside text that pages nobody.

WeCom renders no markup in a text message except one: `<@userid>` in `content` mentions that member
(消息推送: "text/markdown类型消息支持在content中使用<@userid>扩展语法"), and `@all` only through
`mentioned_list`, which xihe never fills from text. So `text` swaps every `<` for `＜` (no mention
can form, whatever is hidden between `<` and `@`) and drops the characters `wecom_markdown` drops
(controls, bidirectional overrides, invisible spaces); line breaks stay.
"""

from __future__ import annotations

from xihe.agent.wecom_markdown import drop_invisible


def text(value: object) -> str:
    """`value` for the content of a WeCom text message: no mention, no control or bidi character."""
    return drop_invisible(str(value).replace("\r\n", "\n").replace("\r", "\n")).replace("<", "＜")
