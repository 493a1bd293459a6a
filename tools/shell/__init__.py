"""Whitelisted shell: admin-declared argv templates with typed arguments, run without a shell in a sandbox.

Modules: `whitelist` (request -> validated argv, or ShellRefused naming the argument), `template`
(compiled argv templates, their human form, filling them), `matching` (a `/sh` line's tokens against
one template), `values` (per-argument checks), `sandbox` (bwrap / docker / none back ends, limits,
capped capture), `policy` (allowed / needs confirmation / denied with reasons), `tool`
(run_shell_command and helpers for the registry and audit), `reload` (keep the last good whitelist).
"""
