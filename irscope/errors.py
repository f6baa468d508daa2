"""irscope's error hierarchy: each error is one line for the user and an exit code."""

from __future__ import annotations


class IrscopeError(Exception):
    """A problem the user can fix; printed as one line on stderr, never as a traceback."""

    exit_code = 1


class UsageError(IrscopeError):
    """The command line or an expression in it is malformed."""

    exit_code = 2


class InputError(IrscopeError):
    """A file or folder given by the user is missing, unreadable or not what it claims."""


class RunError(IrscopeError):
    """A run directory is missing, damaged, or from a newer irscope."""


class MissingDependency(IrscopeError):
    """A feature needs an optional package (torch, jax, triton) or tool that is not installed."""

    def __init__(self, package: str, feature: str, extra: str | None = None):
        hint = f"pip install 'irscope[{extra}]'" if extra else f"install {package}"
        super().__init__(f"{feature} needs {package}, which is not installed ({hint})")
