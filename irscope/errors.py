"""irscope's error hierarchy and exit codes: each error is one line for the user and a code."""

from __future__ import annotations

import errno
import sys

EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED = 0, 2, 130
EXIT_ENVIRONMENT, EXIT_INTERNAL = 1, 70  # the machine refused (disk, permissions); a bug
# Errors from the machine and what they mean to the user.
DISK_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


class IrscopeError(Exception):
    """A problem the user can fix; printed as one line on stderr, never as a traceback, then
    its ``details`` (lines that show where: an expression and a caret under the problem)."""

    exit_code = 1
    details: tuple[str, ...] = ()


class UsageError(IrscopeError):
    """The command line or an expression in it is malformed."""

    exit_code = 2


class InputError(IrscopeError):
    """A file or folder given by the user is missing, unreadable or not what it claims."""


class RunError(IrscopeError):
    """A run directory is missing, damaged, or from a newer irscope."""


class RunWarning(UserWarning):
    """A run is read, but part of it is damaged (its run.json): what it held is unknown."""


class MissingDependency(IrscopeError):
    """A feature needs an optional package (torch, jax, triton) or tool that is not installed."""

    def __init__(self, package: str, feature: str, extra: str | None = None):
        hint = f"pip install 'irscope[{extra}]'" if extra else f"install {package}"
        super().__init__(f"{feature} needs {package}, which is not installed ({hint})")


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is the machine refusing a write for want of room (an OSError, or
    SQLite's "database or disk is full" / "disk I/O error")."""
    if isinstance(exc, OSError):
        return exc.errno in DISK_FULL
    sqlite3 = sys.modules.get("sqlite3")
    return sqlite3 is not None and isinstance(exc, sqlite3.Error) and (
        "full" in str(exc) or "disk I/O" in str(exc))


def environment_error(exc: BaseException) -> tuple[str, int]:
    """One line and an exit status for an exception no command turned into an IrscopeError:
    a refusal by the machine (permissions, a full disk, memory) or, failing that, a bug."""
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        if exc.errno in DISK_FULL:
            return f"{where}cannot write: disk full or file too large ({exc.strerror})", \
                EXIT_ENVIRONMENT
        if isinstance(exc, PermissionError):
            return f"{where}permission denied", EXIT_ENVIRONMENT
        return f"{where}{exc.strerror or exc}", EXIT_ENVIRONMENT
    if isinstance(exc, MemoryError):
        return "out of memory", EXIT_ENVIRONMENT
    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is not None and isinstance(exc, sqlite3.Error):
        text = str(exc)
        if disk_full(exc):
            return f"cannot write the run's index: disk full or not writable ({text})", \
                EXIT_ENVIRONMENT
        return f"the run's index: {text}", EXIT_ENVIRONMENT
    return (f"internal error ({type(exc).__name__}: {exc}); IRSCOPE_DEBUG=1 shows where",
            EXIT_INTERNAL)
