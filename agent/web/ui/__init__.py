"""Web pages of what happened: tasks and their steps, audit, alerts, pending confirmations (under /ui).

auth.py         token login, signed session cookie, CSRF, what a viewer may see and do
data.py         what the pages show, read from the same stores as chat and the CLI
actions.py      approve / reject from the page with chat's binding rules
views.py        Starlette routes rendering templates/*.html (Jinja2, autoescaped)
wecom_oauth.py  optional "log in with WeCom"
"""
