"""Web pages of what happened: tasks and their steps, audit, alerts, pending confirmations (under /ui).

router.py       the routes: one page module each, over the shared Pages
page.py         Pages: session lookup, POST checks, templates, cookies, the audit, the page wrapper
login.py        token login, logout, the way into the WeCom login (agent/web/wecom_oauth.py)
tasks.py        the task list, one task's timeline and JSON, artifacts
audit.py        the audit trail and its JSON
alerts.py       channel health, maintenance, failure events, outbox, pushes
runs.py         one run's trace
pending.py      open confirmations; approve / reject with chat's binding rules
status.py       /ui/readyz: readiness reasons in full, for admins
auth.py         token check, signed cookies, CSRF tokens, who the configuration still lets in
sessions.py     server-side sessions in the store: idle and absolute lifetimes, ending them
throttle.py     failed-login counting and lockouts in the store (every replica)
login_audit.py  the few audit rows failed and refused logins leave, with an unverified actor
visibility.py   the one rule for who sees which record (tasks, runs, alerts, audit, artifacts)
params.py       strict query and path parameters (400 naming the parameter)
data.py         what the pages show, read from the same stores as chat and the CLI
"""
