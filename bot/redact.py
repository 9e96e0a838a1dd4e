"""Redaction: the backstop, not the defence (SECURITY.md S4). Secrets never reach containers
or prompts in the first place; this masks them if they show up in logs or reports anyway."""

from __future__ import annotations

import base64
import logging
import os
import re
from collections.abc import Iterable

MASK = "***"
# Environment variable names whose values are treated as secrets wherever they come from.
SECRET_ENV_NAMES = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|PRIVATE_KEY|CREDENTIAL)", re.I)

# Secrets by their shape, masked even when nobody registered them (issue 15): GitHub's token
# families (classic and fine-grained) and OpenAI-style API keys.
TOKEN_SHAPES = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,255}"
    r"|github_pat_[A-Za-z0-9_]{20,255}"
    r"|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})"
)
# Credentials inside URLs: scheme://user:password@host keeps the user, masks the password;
# scheme://token@host (no password) masks the token when it is longer than a user name.
URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s/:@'\"]*):([^\s/@'\"]+)@")
URL_TOKEN_USER = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]{1,20}://)([A-Za-z0-9_.~-]{24,})@")


def mask_shapes(text: str) -> str:
    """Mask what looks like a credential whether or not it was registered."""
    text = TOKEN_SHAPES.sub(MASK, text)
    text = URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{MASK}@", text)
    return URL_TOKEN_USER.sub(lambda m: f"{m.group(1)}{MASK}@", text)


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
        # the same bytes inside a longer encoded text start at one of three alignments; the
        # characters that depend on the neighbours are left off
        if len(secret) >= 8:
            for pad in (b"a", b"aa"):
                forms.add(base64.b64encode(pad + raw).decode().rstrip("=")[4:-4])
        for f in forms:
            if f and f not in self._patterns:
                self._patterns.append(f)
        self._patterns.sort(key=len, reverse=True)

    def __call__(self, text: str) -> str:
        if not text:
            return text
        for p in self._patterns:
            text = text.replace(p, MASK)
        return mask_shapes(text)

    @classmethod
    def from_environment(cls, extra: Iterable[str] = (), environ: dict[str, str] | None = None) -> Redactor:
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


class RedactingFormatter(logging.Formatter):
    """Redacts the whole formatted record, so a logged traceback (``log.exception``, exc_info)
    and its exception text are masked too, not only the message."""

    def format(self, record: logging.LogRecord) -> str:
        return _global(super().format(record))


def redacting_handler(fmt: str = "%(levelname).1s %(name)s: %(message)s") -> logging.Handler:
    handler = logging.StreamHandler()
    handler.addFilter(RedactingFilter())
    handler.setFormatter(RedactingFormatter(fmt))
    return handler


def setup_logging(debug: bool = False) -> None:
    root = logging.getLogger("bot")
    root.handlers[:] = [redacting_handler()]
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    root.propagate = False
    # libraries (PyGithub, urllib3, httpx) log through the root logger: same redaction there
    top = logging.getLogger()
    top.handlers[:] = [h for h in top.handlers if not getattr(h, "_setupbot", False)]
    fallback = redacting_handler("%(levelname).1s %(name)s: %(message)s")
    fallback._setupbot = True  # type: ignore[attr-defined]
    fallback.setLevel(logging.WARNING)
    top.addHandler(fallback)
