"""Terminal output as plain text: the colour codes a build or test run writes are not part of
what a rule or an experience unit matches (the legacy builder colours a step's stderr:
``\\x1b[91mE\\x1b[0m\\x1b[91m: Unable to locate package``)."""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


# pip's resolver after many rounds of backtracking (it says so once, and goes on downloading)
PIP_BACKTRACKING = re.compile(r"This is taking longer than usual\. You might need to provide the dependency resolver")


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


# A host outside that could not be reached: no environment change helps that in a sandbox with no
# network. A refused connection is not here: that is a service that was not started.
OUTSIDE_NETWORK = re.compile(
    r"Temporary failure in name resolution|Name or service not known|nodename nor servname"
    r"|getaddrinfo failed|No address associated with hostname|Network is unreachable"
    r"|NameResolutionError|Failed to resolve|Could not resolve host|ProxyError"
    r"|Max retries exceeded with url|ConnectTimeout|Connection timed out|urlopen error"
    r"|HTTP Error 403: Forbidden|HTTP Error 407|Tunnel connection failed"
    r"|(?:could ?n[o']t|cannot|can't|unable to) (?:connect|reach) (?:to )?'?https?://"
    r"(?!localhost|127\.|0\.0\.0\.0|\[::1\])"
    r"|requires? (?:an? )?(?:internet|network) (?:access|connection)|no internet|network access",
    re.IGNORECASE,
)
_LOCAL_HOST = re.compile(r"\b(?:localhost|127\.0\.0\.1|0\.0\.0\.0)\b|\[?::1\]?")
_HOST = re.compile(
    r"host='([^']+)'|Failed to resolve '([^']+)'|Could not resolve host:? '?([\w.\-]+)|https?://([\w.\-]+)", re.I
)


def outside_host(line: str) -> str | None:
    """The outside host a line of output failed to reach ("" when it names none), or None when the
    line is not such a failure (a local address is a service, not the outside)."""
    if not OUTSIDE_NETWORK.search(line):
        return None
    m = _HOST.search(line)
    host = next((g for g in m.groups() if g), "") if m else ""
    if _LOCAL_HOST.search(host or line):
        return None
    return host
