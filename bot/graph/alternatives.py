"""Debian packages that exclude each other, and the choice between them.

A plan collects system packages from several places (a CI step, the table of what a
distribution needs, a repair); two of them can be alternatives that apt refuses to install
together (``libcurl4-gnutls-dev`` conflicts with ``libcurl4-openssl-dev``). Each group lists
the alternatives, the preferred one first: the one Debian's own Python packages build against.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

APT_ALTERNATIVES: tuple[tuple[str, ...], ...] = (
    ("libcurl4-openssl-dev", "libcurl4-gnutls-dev", "libcurl4-nss-dev"),
    ("libjack-jackd2-dev", "libjack-dev"),
    ("libmariadb-dev-compat", "libmysqlclient-dev"),
    ("libgnutls28-dev", "libgnutls-dev"),
    ("libssl-dev", "libssl1.0-dev"),
    ("libncurses-dev", "libncurses5-dev", "libncursesw5-dev"),
    ("libreadline-dev", "libreadline-gplv2-dev"),
    ("libgdbm-dev", "libgdbm-compat-dev"),
    ("libzmq3-dev", "libzmq5-dev"),
    ("netcat-openbsd", "netcat-traditional"),
)


def group_of(package: str) -> tuple[str, ...] | None:
    return next((g for g in APT_ALTERNATIVES if package in g), None)


def choose(packages: Iterable[str], declared: Sequence[str] = ()) -> dict[str, str]:
    """For each package that an alternative in ``packages`` excludes: the one kept instead.
    The repository's own choice (``declared``: what its CI or docs install) wins over the
    table's preference; among several declared ones the table's order decides."""
    present = list(dict.fromkeys(packages))
    dropped: dict[str, str] = {}
    for group in APT_ALTERNATIVES:
        members = [p for p in group if p in present]
        if len(members) < 2:
            continue
        own = [p for p in members if p in declared]
        keep = (own or members)[0]
        for p in members:
            if p != keep:
                dropped[p] = keep
    return dropped
