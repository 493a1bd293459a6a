"""`config/shell.yaml`: the whitelisted shell commands (argv templates with typed arguments) and the sandbox.

Modules: `template` (the argv template syntax), `entry` (one whitelisted command and its typed
arguments), `env` (environment variables no command may set or pass through), `sandbox` (resource
limits and the uid range), `entry_checks` (cross-checks of one entry), `file` (ShellConfig: the whole
file, its cross-checks, and loading with `file:line: key: problem` errors).
"""
