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


# A RUN step's BuildKit cache mount is the one piece of mutable state builds share: a cache
# with the same id is handed to every build that names it, whatever repository it comes from.
CACHE_SCOPE = "setupbot-cache-"
_RUN = re.compile(r"^(?P<indent>\s*)RUN(?=\s)", re.IGNORECASE)
_FLAG = re.compile(r"\s+(--\S+)")


def _logical_instructions(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) line index of each instruction, across backslash continuations and the
    comment lines inside them."""
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(lines):
        j = i
        while lines[j].rstrip().endswith("\\") and j + 1 < len(lines):
            j += 1
            while j + 1 < len(lines) and lines[j].lstrip().startswith("#"):
                j += 1
        spans.append((i, j))
        i = j + 1
    return spans


def _scoped_mount(spec: str, scope: str) -> str:
    fields = [f for f in spec.split(",") if f]
    pairs = [f.partition("=") for f in fields]
    kind = next((v for k, _, v in pairs if k.strip().lower() == "type"), "bind")
    if kind.strip().lower() != "cache":
        return spec
    old = next((v for k, _, v in pairs if k.strip().lower() == "id"), "") or next(
        (v for k, _, v in pairs if k.strip().lower() in ("target", "dst", "destination")), "cache"
    )
    kept = [f for (k, _, _v), f in zip(pairs, fields, strict=True) if k.strip().lower() != "id"]
    return ",".join([*kept, f"id={scope}-{old.strip()}"])


def scope_cache_mounts(text: str, scope: str) -> str:
    """A copy of ``text`` whose RUN cache mounts are this build's own: each id gets ``scope``
    in front (no other run's build can read or write them, and a clean replay with a scope of
    its own starts from empty caches), and a shell-form command starts with ``: <scope>;``, a
    no-op that puts the scope into the cache records' descriptions, where the end of the run
    finds them to prune (``Engine.prune_cache_mounts``). An instruction with a mount is put on
    one line, so a flag on a continuation line is seen too."""
    lines = text.splitlines()
    out: list[str] = []
    for first, last in _logical_instructions(lines):
        chunk = lines[first : last + 1]
        m = _RUN.match(chunk[0])
        if not m or "--mount" not in " ".join(chunk):
            out += chunk
            continue
        body = " ".join(
            line.rstrip().removesuffix("\\").strip()
            for line in chunk
            if not (line is not chunk[0] and line.lstrip().startswith("#"))
        )
        rest = body[len(m.group(0).strip()) :]
        flags: list[str] = []
        while (f := _FLAG.match(rest)) is not None:
            flag = f.group(1)
            if flag.lower().startswith("--mount="):
                flag = "--mount=" + _scoped_mount(flag[len("--mount=") :], scope)
            flags.append(flag)
            rest = rest[f.end() :]
        command = rest.strip()
        if not command.startswith("["):
            command = f": {scope}; {command}"
        out.append(" ".join([f"{m.group('indent')}RUN", *flags, command]))
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")
