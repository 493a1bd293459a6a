"""Environment variables a whitelisted command may not set (`env:`) or pass through (`env_pass:`)."""

from __future__ import annotations

# Variables that change what a program loads or runs; never settable or passed through.
DANGEROUS_ENV_PREFIXES = ("LD_", "DYLD_", "GCONV_", "MALLOC_", "PYTHON", "PERL5", "PERLLIB", "RUBY", "GIT_")
DANGEROUS_ENV_NAMES = frozenset(
    {
        "BASH_ENV",
        "ENV",
        "IFS",
        "CDPATH",
        "NODE_OPTIONS",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "HOSTALIASES",
        "RESOLV_HOST_CONF",
        "LOCALDOMAIN",
        "NLSPATH",
        "TMPDIR",
        "KUBECONFIG_EXEC",
        "SSH_ASKPASS",
        "EDITOR",
        "VISUAL",
        "PAGER",
    }
)


# Even an admin's fixed value for these would be a foot-gun: they inject code into every process.
LOADER_ENV_PREFIXES = ("LD_", "DYLD_", "GCONV_")
LOADER_ENV_NAMES = frozenset(
    {
        "BASH_ENV",
        "ENV",
        "PYTHONSTARTUP",
        "PYTHONPATH",
        "PYTHONHOME",
        "PERL5OPT",
        "NODE_OPTIONS",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "IFS",
    }
)


def dangerous_env(name: str) -> bool:
    """True when an environment variable name can make a program load or run other code."""
    upper = name.upper()
    return upper in DANGEROUS_ENV_NAMES or upper.startswith(DANGEROUS_ENV_PREFIXES)


def loader_env(name: str) -> bool:
    """True for the variables that inject code into every process; not even fixed values are allowed."""
    upper = name.upper()
    return upper in LOADER_ENV_NAMES or upper.startswith(LOADER_ENV_PREFIXES)
