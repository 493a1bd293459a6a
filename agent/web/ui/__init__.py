"""Web pages of what happened: tasks and their steps, audit, alerts, pending confirmations (under /ui).

router.py       the routes: one page module each, over the shared Pages
page.py         Pages: session, CSRF, templates, cookies, the audit, the page wrapper
login.py        token login, logout, the way into the WeCom login (agent/web/wecom_oauth.py)
tasks.py        the task list, one task's timeline and JSON, artifacts
audit.py        the audit trail and its JSON
alerts.py       channel health, maintenance, failure events, outbox, pushes
runs.py         one run's trace
pending.py      open confirmations; approve / reject with chat's binding rules
auth.py         token check, signed session cookie, CSRF, what a viewer may see and do
data.py         what the pages show, read from the same stores as chat and the CLI
"""
