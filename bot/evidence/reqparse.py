"""Requirement text helpers shared by the scanners."""

from __future__ import annotations

import re

from packaging.requirements import InvalidRequirement, Requirement

_POETRY_CARET = re.compile(r"^\^\s*([0-9][0-9a-zA-Z.*]*)$")
_POETRY_TILDE = re.compile(r"^~\s*([0-9][0-9a-zA-Z.*]*)$")


def parse_spec(spec: str) -> tuple[str, str] | None:
    """(name, normalised text) for a PEP 508 requirement, or None when it does not parse."""
    text = spec.strip()
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return None
    return req.name, str(req)


def _bump(parts: list[int], index: int) -> str:
    upper = parts[: index + 1]
    upper[index] += 1
    return ".".join(str(p) for p in upper)


def poetry_constraint(text: str) -> str:
    """Poetry's version syntax (^1.2, ~1.2, 1.2.*, *, >=1,<2, "1.2 || 2.0") as PEP 440."""
    text = str(text).strip()
    if text in ("", "*"):
        return ""
    if "||" in text or "|" in text:
        # PEP 440 has no "or"; the lowest alternative keeps the floor honest.
        text = re.split(r"\|\|?", text)[0].strip()
    out = []
    for piece in re.split(r"\s*,\s*|\s+(?=[<>=!~^])", text):
        piece = piece.strip()
        if not piece:
            continue
        m = _POETRY_CARET.match(piece)
        if m:
            nums = [int(x) for x in re.findall(r"\d+", m.group(1))[:3]]
            if not nums:
                continue
            first_nonzero = next((i for i, v in enumerate(nums) if v), len(nums) - 1)
            out.append(f">={m.group(1)},<{_bump(nums + [0] * (3 - len(nums)), first_nonzero)}")
            continue
        m = _POETRY_TILDE.match(piece)
        if m:
            nums = [int(x) for x in re.findall(r"\d+", m.group(1))[:3]]
            if not nums:
                continue
            idx = 0 if len(nums) == 1 else 1
            out.append(f">={m.group(1)},<{_bump(nums, idx)}")
            continue
        if piece[0].isdigit():
            out.append(f"=={piece}")
        else:
            out.append(piece)
    return ",".join(out)


def poetry_markers(value: object) -> list[str]:
    """The PEP 508 markers of a Poetry dependency table: its ``python`` constraint
    (``{ version = "^6.0", python = "<3.9" }``) as ``python_version`` comparisons, and its
    ``markers`` as written. [] for a plain version string."""
    if not isinstance(value, dict):
        return []
    markers: list[str] = []
    if isinstance(value.get("python"), str):
        py = poetry_constraint(value["python"])
        terms = re.findall(r"(>=|<=|==|!=|<|>)\s*([0-9.]+)", py) if py else []
        if terms:
            markers.append(" and ".join(f'python_version {op} "{v}"' for op, v in terms))
    if isinstance(value.get("markers"), str):
        markers.append(value["markers"])
    return markers
