"""Names that reach paths, interface names and shell commands on the nodes
(a prefix, a bridge, a node's name, host and user) are checked once, here,
against a strict pattern: a bad one is one error naming it, never a path
outside the tool's own or a word the shell would split."""

from __future__ import annotations

import re

PATTERNS = {
    # ns "<prefix>n<k>" and its veth "<prefix>n<k>-h" must fit IFNAMSIZ (15)
    "--prefix": (
        r"[A-Za-z0-9][A-Za-z0-9_]{0,8}-?",
        "1-10 letters, digits or _, then an optional -",
    ),
    "--bridge": (r"[A-Za-z][A-Za-z0-9_-]{0,14}", "a letter, then up to 14 letters, digits, _ or -"),
    "name": (r"(?!\.{1,2}$)[A-Za-z0-9][A-Za-z0-9_.-]{0,62}", "letters, digits, _ . or -"),
    # a test's name: one directory of the store, never a path out of it
    "--name": (
        r"[A-Za-z0-9][A-Za-z0-9_.-]{0,199}",
        "1-200 letters, digits, _ . or -, starting with a letter or digit (no / or ..)",
    ),
    "host": (r"[A-Za-z0-9_:][A-Za-z0-9_.:%-]{0,252}", "a host name or an IP address"),
    "user": (r"[a-z_][a-z0-9_.-]{0,31}", "a user name"),
}


def bad_name(kind: str, value: object) -> str | None:
    """Why `value` is not a valid `kind`, or None."""
    pattern, what = PATTERNS[kind]
    if not isinstance(value, str) or not re.fullmatch(pattern, value):
        return f"{kind} {value!r} is not allowed: {what}"
    return None
