"""`xihe chat --user ID`: a terminal conversation on the same session code as WeCom, which follows
what it starts.

While it lives the process runs the jobs that follow what conversations started (`Job.follows`:
DolphinScheduler runs, confirmations that expire, the alerts a run raised, orphaned tasks), beside
any `xihe serve` or other chat on the same store; their leases decide which process handles each
row, so every message is made once. Late messages for a terminal conversation wait in the store's
mail (`xihe.agent.mailbox`): this process prints its own conversation's (`[xihe → cli:alice] …`,
where a reply reads `xihe> …`), whichever process made them, and never another's.
"""

from __future__ import annotations

import argparse
from typing import Any

MAIL_SECONDS = 1.0  # how often the chat looks for its conversation's mail


def cmd_chat(args: argparse.Namespace) -> int:
    from xihe.agent import scheduler
    from xihe.agent.app import build_app
    from xihe.agent.cli.terminal import Screen, prompt_lines
    from xihe.agent.feature import Job, Runtime
    from xihe.agent.inbound import Inbound
    from xihe.agent.mailbox import Mailbox

    app = build_app(args.config)
    conversation = args.conversation or f"cli:{args.user}"
    screen = Screen(f"{args.user}> ")
    mailbox = Mailbox(app.deps.engine, app.deps.clock)

    def show_mail(_app: Runtime) -> None:
        for text in mailbox.take(conversation):
            screen.show(f"[xihe → {conversation}] {text}")

    show_mail(app)  # what came while this conversation's chat was closed
    jobs = scheduler.start(app, [*scheduler.follow_jobs(app), Job("chat_mail", show_mail, MAIL_SECONDS)])
    try:
        for text in prompt_lines(screen):
            if text in ("/quit", "/exit"):
                break
            reply = app.session.handle(Inbound(args.user, conversation, text, "cli"))
            screen.show(f"xihe> {reply}")
    finally:
        jobs.shutdown(wait=True)
        scheduler.release_leases(app)  # another process takes over this one's tasks at once
        show_mail(app)
        app.deps.engine.dispose()
    return 0


def register(sub: Any) -> None:
    """Add `chat` to the xihe sub-parsers."""
    chat = sub.add_parser("chat", help="chat in the terminal (and follow what it starts while it runs)")
    chat.add_argument("--user", required=True, help="who you are (a user id from access.yaml)")
    chat.add_argument("--conversation", help="conversation id (default cli:USER)")
    chat.set_defaults(func=cmd_chat)
