"""Text from the repository, made harmless before it reaches GitHub.

Everything setupbot quotes from a repository (requirement names, warnings, test ids, README
commands, reasons) is attacker-controlled. Rendered into a pull request body, a comment, a job
summary or the committed report it must not:

- notify anyone: ``@someone`` and ``@org/team`` get a zero-width joiner after the ``@``;
- close an issue when the pull request merges: ``fixes #12``, ``Closes owner/repo#3``,
  ``resolved: https://github.com/o/r/issues/4`` get a zero-width joiner inside the keyword;
- load a remote image (a tracking pixel in a reviewer's browser): Markdown images become plain
  links and HTML media tags are escaped.

Code spans and fenced blocks are left as they are: GitHub neither notifies, closes nor loads
anything from inside them, and changing them would change commands a reviewer copies.
"""

from __future__ import annotations

import re

ZWJ = "\u200d"

_FENCE = re.compile(r"^(?P<f>```+|~~~+).*?(?:^(?P=f)[ \t]*$|\Z)", re.M | re.S)
_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
_MENTION = re.compile(r"(?<![\w`@/.+-])@(?=[A-Za-z0-9][A-Za-z0-9-]*(?:/[A-Za-z0-9._-]+)?)")
_KEYWORDS = re.compile(
    r"\b(close[sd]?|fix(?:e[sd])?|resolve[sd]?)(?=\s*:?\s*(?:[\w.-]+/[\w.-]+)?#\d"
    r"|\s*:?\s*https?://\S+/(?:issues|pull)/\d)",
    re.I,
)
_MD_IMAGE = re.compile(r"!(?=\[[^\]\n]*\]\s*[\[(])")
_HTML_MEDIA = re.compile(r"<(?=\s*/?\s*(?:img|picture|source|video|audio|image|svg|iframe|object|embed)\b)", re.I)


def _prose(text: str) -> str:
    text = _MENTION.sub("@" + ZWJ, text)
    text = _KEYWORDS.sub(lambda m: m.group(1)[0] + ZWJ + m.group(1)[1:], text)
    text = _MD_IMAGE.sub("", text)
    return _HTML_MEDIA.sub("&lt;", text)


def _outside_spans(text: str) -> str:
    out, at = [], 0
    for m in _SPAN.finditer(text):
        out.append(_prose(text[at : m.start()]))
        out.append(m.group(0))
        at = m.end()
    out.append(_prose(text[at:]))
    return "".join(out)


def neutralise(text: str) -> str:
    """``text`` with mentions, closing keywords and remote images defused outside code."""
    if not text:
        return text
    out, at = [], 0
    for m in _FENCE.finditer(text):
        out.append(_outside_spans(text[at : m.start()]))
        out.append(m.group(0))
        at = m.end()
    out.append(_outside_spans(text[at:]))
    return "".join(out)
