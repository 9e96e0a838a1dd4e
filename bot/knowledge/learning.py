"""Learning: a repair that survived clean replay becomes an experience unit.

The failure's signature line is generalised into a regex (numbers, versions, paths and hex
addresses become patterns; a quoted name that the fix mentions becomes a capture group and the
atoms refer to it as ``{match:N}``), provenance is kept, and a near-duplicate — a unit whose signal
already matches that line and whose atoms say the same thing — is merged instead of added.
A learned unit starts with one success (the replay that proved it); one that keeps failing later
sinks to the cold tier through its telemetry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from bot.atoms import Atom
from bot.errors import KnowledgeError
from bot.knowledge.retrieval import fill_atoms
from bot.knowledge.store import Store
from bot.knowledge.units import Unit

_ERRORISH = re.compile(
    r"(?i)(error|fatal|not found|no such file|cannot|could not|couldn't|unable|missing|refused|"
    r"requires|unknown|unrecognized|not supported|failed|undefined)"
)
# Lines that say "something failed" without saying what: never a good signature.
_GENERIC = re.compile(
    r"(?i)(subprocess-exited-with-error|this error originates from a subprocess|"
    r"failed building wheel for|error: metadata-generation-failed|command errored out|"
    r"^\s*error: failed-wheel-build|exit code: \d+|^\s*[╰│×]|^=+|^-+$|^ERROR: Failed to build|"
    r"short test summary|^FAILED|interrupted: \d+ error|^\s*$)"
)

_GUTTER = re.compile(r"^\s*(?:[E>]\s{2,}|#\d+ [\d.]+ )")
_QUOTED = re.compile(r"""(['"‘“])([^'"’”\s]{1,120})(['"’”])""")
_PATH = re.compile(r"(?<![\w.])(?:/[\w.+@-]+)+/?")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_VERSION = re.compile(r"(?<![\w.])\d+(?:\.\d+)+(?:[a-z]+\d*)?(?![\w.])")
_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")


def signature_line(log_text: str) -> str:
    """The most telling error line: the last specific error-ish line of the output."""
    # pytest's "E   " / ">   " gutters and build-step prefixes are not part of the error
    lines = [_GUTTER.sub("", ln).strip() for ln in (log_text or "").splitlines()]
    for line in reversed(lines):
        if line and _ERRORISH.search(line) and not _GENERIC.search(line):
            return line[:300]
    for line in reversed(lines):
        if line and not _GENERIC.search(line):
            return line[:300]
    raise KnowledgeError("the log has no line to learn a signature from", "Pass the failing command's output.")


def _atom_strings(atoms: Sequence[Atom]) -> list[str]:
    found: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            found.append(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif isinstance(v, Mapping):
            for x in v.values():
                walk(x)

    for a in atoms:
        walk(dict(a.args))
    return found


def generalise(line: str, atoms: Sequence[Atom]) -> tuple[str, list[Atom]]:
    """Regex for ``line`` and atoms templated against it."""
    tokens = _line_tokens(line, _atom_strings(atoms))
    pattern, group_of = _pattern_of(line, tokens)
    return pattern, _template_atoms(atoms, group_of)


def _line_tokens(line: str, atom_values: list[str]) -> list[tuple[int, int, str, str | None]]:
    """The variable parts of ``line``, in order: (start, end, regex, captured value). A value the
    fix names is captured; paths, hex numbers, versions and numbers become wildcards."""
    tokens: list[tuple[int, int, str, str | None]] = []  # (start, end, regex, captured value)
    taken: list[tuple[int, int]] = []

    def free(s: int, e: int) -> bool:
        return all(e <= a or s >= b for a, b in taken)

    # A quoted name that the fix names (module, header, command) becomes a capture group.
    for m in _QUOTED.finditer(line):
        value = m.group(2)
        # only when the fix names exactly that value can it be templated; a capture the atoms do
        # not use would make the unit fire for every other name with the same fixed fix
        if any(value.lower() == v.lower() for v in atom_values):
            s, e = m.span(2)
            tokens.append((s, e, r"([^'\"\s]+)", value))
            taken.append((s, e))
    for rx, repl in ((_PATH, r"\S+"), (_HEX, r"0x[0-9a-fA-F]+"), (_VERSION, r"\d+(?:\.\d+)*\w*"), (_NUMBER, r"\d+")):
        for m in rx.finditer(line):
            s, e = m.span()
            if free(s, e):
                if rx is _PATH:
                    # keep a file name the error is about (a header, a library), drop the directories
                    base = m.group().rstrip("/").rsplit("/", 1)[-1]
                    if re.search(r"\.(h|hpp|so(\.\d+)*|pc|a)$", base):
                        repl_here = r"\S*" + re.escape(base)
                    else:
                        repl_here = repl
                else:
                    repl_here = repl
                tokens.append((s, e, repl_here, None))
                taken.append((s, e))
    tokens.sort()
    return tokens


def _pattern_of(line: str, tokens: list[tuple[int, int, str, str | None]]) -> tuple[str, dict[str, int]]:
    """The regex for ``line`` with its ``tokens`` replaced, and the group number of each
    captured value."""
    parts: list[str] = []
    pos, group_of = 0, {}
    n = 0
    for s, e, regex, value in tokens:
        parts.append(re.escape(line[pos:s]))
        parts.append(regex)
        if value is not None:
            n += 1
            group_of[value] = n
        pos = e
    parts.append(re.escape(line[pos:]))
    pattern = "".join(parts)
    # re.escape escapes spaces; tolerate any run of blanks instead
    pattern = re.sub(r"(?:\\ )+", lambda m: r"\s+", pattern)
    return pattern, group_of


def _template_atoms(atoms: Sequence[Atom], group_of: dict[str, int]) -> list[Atom]:
    """``atoms`` with every argument equal to a captured value replaced by ``{match:N}``."""

    def template(v: Any) -> Any:
        if isinstance(v, str):
            for value, g in group_of.items():
                if v.lower() == value.lower():
                    return f"{{match:{g:d}}}"
            return v
        if isinstance(v, (list, tuple)):
            return [template(x) for x in v]
        if isinstance(v, Mapping):
            return {k: template(x) for k, x in v.items()}
        return v

    return [Atom(a.kind, {k: template(v) for k, v in a.args.items()}) for a in atoms]


def _same_fix(a: Sequence[Atom], b: Sequence[Atom]) -> bool:
    return [x.to_json() for x in a] == [y.to_json() for y in b]


def learn_unit(
    store: Store,
    log_text: str,
    atoms: Sequence[Atom | Mapping[str, Any]],
    provenance: Mapping[str, Any],
    advice: str = "",
    quarantine: bool = False,
) -> str:
    """Add (or merge) a unit from a repair that survived clean replay; return its id. With
    ``quarantine`` a new unit is stored in the "quarantined" category, which retrieval never
    offers, until it is approved."""
    checked = [a if isinstance(a, Atom) else Atom.from_json(a) for a in atoms]
    for a in checked:
        a.validate()
    if not checked:
        raise KnowledgeError("a learned unit needs at least one atom")
    line = signature_line(log_text)
    pattern, templated = generalise(line, checked)
    prov = {
        "learned_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "signature": line,
        **{k: v for k, v in provenance.items() if isinstance(v, (str, int, float, bool))},
    }

    # Near-duplicate: an existing unit whose signal matches this line and whose (filled) atoms are
    # the fix that worked, or a learned unit with the very same pattern.
    for unit in store.all():
        m = unit.match(line)
        same_pattern = pattern in unit.patterns
        if (m is not None and _same_fix(fill_atoms(unit, m, {}), checked)) or (
            same_pattern and _same_fix(unit.atoms, templated)
        ):
            merged = dataclasses.replace(unit, provenance=tuple(unit.provenance) + (prov,))
            store.add(merged, replace=True)
            store.record(unit.id, "success")
            return unit.id

    words = [w.lower() for w in re.findall(r"[A-Za-z]{3,}", line)][:5]
    digest = hashlib.sha256((pattern + repr([a.to_json() for a in templated])).encode()).hexdigest()[:8]
    unit_id = "learned-" + "-".join(words)[:60].strip("-") + "-" + digest
    data = {
        "id": unit_id,
        "category": "quarantined" if quarantine else "learned",
        "title": line[:200],
        "signals": {"patterns": [pattern]},
        "advice": advice
        or f"Learned from a repair that survived clean replay: {'; '.join(a.describe() for a in templated)}.",
        "atoms": [a.to_json() for a in templated],
        "provenance": [prov],
    }
    unit = Unit.from_json(data)
    if not unit.match(line):
        raise KnowledgeError(f"learned pattern {pattern!r} does not match its own signature line")
    store.add(unit, replace=True)
    store.record(unit.id, "success")
    return unit.id
