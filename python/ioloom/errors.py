"""How errors reach the user: one line that says what is wrong and what to do, and an exit status.

Errors the user can act on are OSError (a missing or unreadable path, a full disk) and ioloom's own exception
types (a damaged trace or container, a missing build); any other exception is a bug in ioloom."""
from __future__ import annotations

import errno

USER_ERROR, INTERNAL_ERROR = 2, 70  # 70: EX_SOFTWARE (sysexits.h)
NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def is_user_error(err: BaseException) -> bool:
    """An error whose message is meant for the user (OSError, or an exception type defined by ioloom)."""
    return isinstance(err, OSError) or type(err).__module__.split(".")[0] == "ioloom"


def explain(err: BaseException) -> tuple[str, int]:
    """The one line that tells the user what went wrong and what to do, and the exit status."""
    if isinstance(err, OSError) and err.strerror:
        where = f"{err.filename}: " if err.filename else ""
        if err.errno in NO_SPACE:
            return f"{where}{err.strerror}; free space (or raise the quota) or write elsewhere, then run again", \
                USER_ERROR
        if isinstance(err, PermissionError):
            return f"{where}{err.strerror}; choose a path you may read or write, or fix its permissions", USER_ERROR
        return f"{where}{err.strerror}; check the path and run again", USER_ERROR
    if is_user_error(err):
        return str(err) or type(err).__name__, USER_ERROR
    return (f"internal error ({type(err).__name__}: {str(err)[:200]}); this is a bug in ioloom: run again with "
            "`ioloom --debug ...` and report the traceback"), INTERNAL_ERROR
