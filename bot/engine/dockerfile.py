"""The few Dockerfile facts the engine needs: which images the FROM lines name, and a copy of a
Dockerfile with some of them replaced (used only for the transient file given to the builder)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_FROM = re.compile(r"^(?P<indent>\s*)FROM(?P<flags>(\s+--\S+)*)\s+(?P<image>\S+)(?P<rest>.*)$", re.IGNORECASE)
_ARG = re.compile(r"^\s*ARG\s+(?P<name>[A-Za-z_][A-Za-z0-9_]*)(=(?P<value>\S*))?\s*$", re.IGNORECASE)
_AS = re.compile(r"\s+AS\s+(?P<name>\S+)", re.IGNORECASE)


@dataclass(frozen=True)
class FromLine:
    index: int  # line number (0-based) in the Dockerfile
    image: str  # with global ARG defaults substituted
    stage_ref: bool  # names an earlier build stage, not an image


def _substitute(text: str, args: dict[str, str]) -> str:
    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return args.get(name, m.group(0))

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", repl, text)


def from_lines(text: str) -> list[FromLine]:
    args: dict[str, str] = {}
    stages: set[str] = set()
    seen_from = False
    found: list[FromLine] = []
    for i, line in enumerate(text.splitlines()):
        arg = _ARG.match(line)
        if arg and not seen_from:
            args[arg.group("name")] = (arg.group("value") or "").strip("\"'")
            continue
        m = _FROM.match(line)
        if not m:
            continue
        seen_from = True
        image = _substitute(m.group("image"), args)
        found.append(FromLine(i, image, image.lower() in stages))
        alias = _AS.search(m.group("rest"))
        if alias:
            stages.add(alias.group("name").lower())
    return found


def base_images(text: str) -> list[str]:
    """External images named by FROM (no stage references, no ``scratch``), in order."""
    out: list[str] = []
    for f in from_lines(text):
        if not f.stage_ref and f.image != "scratch" and f.image not in out:
            out.append(f.image)
    return out


def replace_bases(text: str, mapping: dict[str, str]) -> str:
    """A copy of ``text`` whose FROM lines name ``mapping[image]`` instead of ``image``."""
    lines = text.splitlines(keepends=True)
    for f in from_lines(text):
        if f.stage_ref or f.image not in mapping:
            continue
        m = _FROM.match(lines[f.index].rstrip("\r\n"))
        assert m is not None
        ending = lines[f.index][len(lines[f.index].rstrip("\r\n")) :]
        lines[f.index] = f"{m.group('indent')}FROM{m.group('flags')} {mapping[f.image]}{m.group('rest')}{ending}"
    return "".join(lines)


def declare_args(text: str, names: list[str]) -> str:
    """A copy of ``text`` with ``ARG name`` (no value) after every FROM line, so build arguments
    given on the command line reach the RUN steps of every stage without being written here."""
    lines = text.splitlines(keepends=True)
    for f in reversed(from_lines(text)):
        ending = lines[f.index][len(lines[f.index].rstrip("\r\n")) :] or "\n"
        if not lines[f.index].endswith(("\n", "\r")):
            lines[f.index] += ending
        lines.insert(f.index + 1, "".join(f"ARG {n}{ending}" for n in names))
    return "".join(lines)
