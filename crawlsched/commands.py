"""Which commands a caller of the API may run, and with which token: shared by the command line
(which sends commands to a server) and the API (which runs them), so that neither imports the
other.

Commands that only read need a read token; every other command needs an admin token.
Commands that start processes of their own (demo, standalone, clock, api serve) are refused.
"""

from __future__ import annotations

READ_COMMANDS = {
    ("runs",),  # the old spelling of `run list`
    ("run", "list"),
    ("run", "status"),
    ("run", "children"),
    ("run", "history"),
    ("run", "resources"),
    ("schedules", "list"),
    ("schedules", "show"),
    ("schedules", "next"),
    ("schedules", "missed"),
    ("jobs", "problems"),
    ("jobs", "summary"),
    ("jobs", "list"),
    ("jobs", "show"),
    ("accounts", "list"),
    ("nodes", "list"),
    ("hosts", "list"),
    ("hosts", "show"),
    ("media", "list"),
    ("media", "show"),
    ("pools",),  # the old spelling of `pools show`
    ("pools", "show"),
    ("activity",),
    ("stats",),  # the old spelling of `store stats`
    ("store", "stats"),
    ("results",),
    ("doctor",),
    ("drivers",),
}
LOCAL_ONLY = {"demo", "standalone", "clock", "api"}
MAX_ARGS = 200


def command_path(argv: list[str]) -> tuple[str, ...]:
    """The command's names (`("run", "status")`), from the words before the first option."""
    words = []
    for arg in argv:
        if arg.startswith("-"):
            break
        words.append(arg)
        if len(words) == 2:
            break
    return tuple(words)


def needed_role(argv: list[str]) -> str:
    path = command_path(argv)
    return "read" if path[:1] in READ_COMMANDS or path[:2] in READ_COMMANDS else "admin"


def refusal(argv: list[str]) -> str | None:
    """Why this command cannot run through the API, or None."""
    if len(argv) > MAX_ARGS:
        return f"at most {MAX_ARGS} arguments"
    path = command_path(argv)
    if not path:
        return "no command given"
    if path[0] in LOCAL_ONLY:
        return f"`crawlsched {path[0]}` starts processes of its own: run it on the server"
    return None
