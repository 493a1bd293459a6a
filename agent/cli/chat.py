"""`xihe chat --user ID`: a terminal conversation on the same session code as WeCom, which follows
what it starts.

While it lives the process runs the jobs that follow what conversations started (`Job.follows`:
DolphinScheduler runs, confirmations that expire, the alerts a run raised, orphaned tasks), beside
any `xihe serve` or other chat on the same store; their leases decide which process handles each
row, so every message is made once. Late messages for a terminal conversation wait in the store's
mail (`xihe.agent.mailbox`): this process prints its own conversation's (`[xihe → cli:alice] …`,
where a reply reads `xihe> …`), whichever process made them, and never another's.

On a terminal the prompt comes first: the bot (config, store, features, jobs: most of a start-up's
~0.5 s, nearly all of it imports) is made behind it while the user types, and a line sent before it
is ready waits for it. The mail that came while the chat was closed then prints above the prompt, as
late mail does. A start-up that fails ends the prompt and reports as it would have before it. From
a pipe nothing is read before the bot is ready, so a script meets the same order as ever.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

MAIL_SECONDS = 1.0  # how often the chat looks for its conversation's mail


class _Bot:
    """The app, its jobs and the mailbox, made by `start` (in a thread while the prompt is shown)."""

    def __init__(self, args: argparse.Namespace, conversation: str, screen: Any) -> None:
        self.args, self.conversation, self.screen = args, conversation, screen
        self.app: Any = None
        self.jobs: Any = None
        self.mailbox: Any = None
        self.error: BaseException | None = None
        self.ready = threading.Event()

    def start(self, interrupt: int | None = None) -> None:
        """Make the bot and start its jobs; on failure keep the error and, when `interrupt` names
        the thread reading the prompt, wake it (SIGINT) so the prompt ends."""
        try:
            from xihe.agent import scheduler
            from xihe.agent.app import build_app
            from xihe.agent.feature import Job
            from xihe.agent.mailbox import Mailbox

            self.app = build_app(self.args.config)
            self.mailbox = Mailbox(self.app.deps.engine, self.app.deps.clock)
            self.show_mail(self.app)  # what came while this conversation's chat was closed
            jobs = [*scheduler.follow_jobs(self.app), Job("chat_mail", self.show_mail, MAIL_SECONDS)]
            self.jobs = scheduler.start(self.app, jobs)
        except BaseException as exc:  # handed to the reading thread, raised there
            self.error = exc
            if interrupt is not None:
                signal.pthread_kill(interrupt, signal.SIGINT)
        finally:
            self.ready.set()

    def show_mail(self, _app: Any) -> None:
        for text in self.mailbox.take(self.conversation):
            self.screen.show(f"[xihe → {self.conversation}] {text}")

    def failed(self) -> bool:
        return self.error is not None

    def wait(self) -> Any:
        """The app once made (the start-up's error raised here)."""
        self.ready.wait()
        if self.error is not None:
            raise self.error
        return self.app

    def stop(self) -> None:
        """Stop the jobs, hand this process's leases on, print the last mail, close the store."""
        self.ready.wait()
        if self.error is not None or self.app is None:
            return
        from xihe.agent import scheduler

        self.jobs.shutdown(wait=True)
        scheduler.release_leases(self.app)  # another process takes over this one's tasks at once
        self.show_mail(self.app)
        self.app.deps.engine.dispose()


def cmd_chat(args: argparse.Namespace) -> int:
    from xihe.agent.cli.terminal import Screen, prompt_lines
    from xihe.agent.inbound import Inbound

    conversation = args.conversation or f"cli:{args.user}"
    screen = Screen(f"{args.user}> ")
    bot = _Bot(args, conversation, screen)
    if sys.stdin.isatty():
        reader = threading.get_ident()
        threading.Thread(target=bot.start, args=(reader,), name="chat-start", daemon=True).start()
    else:
        bot.start()
    try:
        try:
            for text in prompt_lines(screen, stop=bot.failed):
                if text in ("/quit", "/exit"):
                    break
                reply = bot.wait().session.handle(Inbound(args.user, conversation, text, "cli"))
                screen.show(f"xihe> {reply}")
        except KeyboardInterrupt:  # the start-up's wake-up, landing outside the prompt
            if not bot.failed():
                raise
        bot.wait()  # a start-up that failed reports here
    finally:
        bot.stop()
    return 0


def register(sub: Any) -> None:
    """Add `chat` to the xihe sub-parsers."""
    chat = sub.add_parser("chat", help="chat in the terminal (and follow what it starts while it runs)")
    chat.add_argument("--user", required=True, help="who you are (a user id from access.yaml)")
    chat.add_argument("--conversation", help="conversation id (default cli:USER)")
    chat.set_defaults(func=cmd_chat)
