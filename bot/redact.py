"""Redaction: the backstop, not the defence (SECURITY.md S4). Secrets never reach containers
or prompts in the first place; this masks them if they show up in logs or reports anyway."""

from __future__ import annotations

import base64
import logging
import os
import re
from typing import Iterable

MASK = "***"
# Environment variable names whose values are treated as secrets wherever they come from.
SECRET_ENV_NAMES = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|PRIVATE_KEY|CREDENTIAL)", re.I)


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._patterns: list[str] = []
        for s in secrets:
            self.add(s)

    def add(self, secret: str) -> None:
        if not secret or len(secret) < 4:
            return
        forms = {secret}
        raw = secret.encode()
        forms.add(base64.b64encode(raw).decode().rstrip("="))
        # "x-access-token:<token>" and "user:<token>" as git and basic auth encode them
        for prefix in (b"x-access-token:", b"x-oauth-basic:", b":"):
            forms.add(base64.b64encode(prefix + raw).decode().rstrip("="))
        for f in forms:
            if f and f not in self._patterns:
                self._patterns.append(f)
        self._patterns.sort(key=len, reverse=True)

    def __call__(self, text: str) -> str:
        if not text:
            return text
        for p in self._patterns:
            text = text.replace(p, MASK)
        return text

    @classmethod
    def from_environment(cls, extra: Iterable[str] = (), environ: dict[str, str] | None = None) -> "Redactor":
        env = os.environ if environ is None else environ
        values = [v for k, v in env.items() if SECRET_ENV_NAMES.search(k) and v]
        return cls([*values, *extra])


_global = Redactor()


def global_redactor() -> Redactor:
    return _global


def register_secret(secret: str) -> None:
    _global.add(secret)


class RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = _global(record.getMessage())
        record.args = ()
        return True


def setup_logging(debug: bool = False) -> None:
    handler = logging.StreamHandler()
    handler.addFilter(RedactingFilter())
    handler.setFormatter(logging.Formatter("%(levelname).1s %(name)s: %(message)s"))
    root = logging.getLogger("bot")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    root.propagate = False
