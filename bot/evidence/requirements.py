"""requirements*.txt files and requirements/ folders: -r/-c includes, markers, hashes,
editable and path lines, index options (ignored with a note)."""

from __future__ import annotations

import posixpath
import re

from packaging.utils import canonicalize_name

from bot.evidence.files import RepoFiles
from bot.evidence.model import MAIN, TEST, Evidence, Requirement, Source
from bot.evidence.reqparse import parse_spec

_MAIN_NAMES = re.compile(
    r"(^|[-_.])(requirements|base|main|prod|production|common|install|runtime|core|default)([-_.]|$)"
)
# whole words only: "grpcio" is not "ci", "litestar" is not "test"
_TEST_NAMES = re.compile(r"(^|[-_.])(tests?|testing|dev|develop|development|ci|check|pytest|unit)([-_.]|$)")
_SKIP_NAMES = re.compile(
    r"(^|[-_.])(docs?|lint|typing|types|mypy|release|bench|benchmarks?|style|format|pre-commit|build|publish|deploy|notebooks?|examples?)([-_.]|$)"
)


def classify(rel: str) -> str:
    """main, test or other, from the file name."""
    name = posixpath.basename(rel).lower()
    stem = re.sub(r"\.(txt|in|pip)$", "", name)
    stem_core = re.sub(r"^requirements[-_.]?|[-_.]?requirements$", "", stem) or "requirements"
    if _SKIP_NAMES.search(stem_core):
        return "other"
    if _TEST_NAMES.search(stem_core):
        return TEST
    if _MAIN_NAMES.search(stem_core) or stem == "requirements":
        return MAIN
    parent = posixpath.basename(posixpath.dirname(rel)).lower()
    if parent.startswith("requirement"):
        return "other"
    return "other"


def companion_file(rel: str) -> bool:
    """Whether the lines of a requirements file that one cell of a test matrix installs go
    together for the tests (requirements/sanic-latest.txt); a file or folder named for
    documentation, linting, examples and the like does not."""
    stems = [re.sub(r"\.(txt|in|pip)$", "", part.lower()) for part in rel.split("/")]
    return rel.endswith((".txt", ".in")) and not any(_SKIP_NAMES.search(stem) for stem in stems)


def candidates(files: RepoFiles) -> list[str]:
    out = []
    for rel in files.all_files():
        parts = rel.split("/")
        name = parts[-1].lower()
        if len(parts) > 3:
            continue
        in_req_dir = len(parts) >= 2 and parts[-2].lower().startswith("requirement")
        if len(parts) > 1 and not in_req_dir and parts[0] not in ("ci", ".ci", "tests", "test", "dev"):
            continue
        if name.endswith(".txt") and ("requirement" in name or in_req_dir):
            out.append(rel)
        elif name.endswith(".in") and in_req_dir:
            # pip-tools inputs: use them only when the compiled .txt is absent
            if rel[:-3] + ".txt" not in files.all_files():
                out.append(rel)
    return sorted(out)


def scan(files: RepoFiles, ev: Evidence) -> None:
    done: set[str] = set()
    for rel in candidates(files):
        group = classify(rel)
        if rel in done:
            continue
        scan_file(files, ev, rel, group, via_ok=True, done=done)


def scan_file(
    files: RepoFiles,
    ev: Evidence,
    rel: str,
    group: str,
    *,
    via_ok: bool = False,
    done: set[str] | None = None,
    depth: int = 0,
    constraint: bool = False,
) -> list[Requirement]:
    """Parse one requirements file (and what it includes). ``via_ok`` lets the compiled Dockerfile
    install the file with ``-r`` when every line is a plain requirement."""
    done = done if done is not None else set()
    rel = posixpath.normpath(rel)
    if rel in done or depth > 10:
        return []
    done.add(rel)
    text = files.read_text(rel)
    if text is None:
        if depth:
            ev.warn(rel, None, "included requirements file not found or unreadable")
        return []
    out: list[Requirement] = []
    base = posixpath.dirname(rel)
    clean = True
    for lineno, line in _logical_lines(text):
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if not line:
            continue
        src = Source(rel, lineno, "requirements")
        if line.startswith(("-r ", "--requirement", "-r", "-c ", "--constraint", "-c")):
            clean = False  # -r needs the included file in the build context too: install line by line
            out += _include(files, ev, base, line, group, done, depth)
            continue
        if line.startswith(("-e ", "--editable")):
            clean = False
            out += _editable(ev, rel, lineno, line, src, group)
            continue
        if line.startswith("-"):
            _pip_option(ev, rel, lineno, line)
            clean = False
            continue
        req = _requirement_line(ev, rel, lineno, line, src, group, constraint)
        if req is None:
            clean = False
            continue
        out.append(req)
    if via_ok and clean and depth == 0 and group in (MAIN, TEST):
        hashed = "--hash" in text
        for r in out:
            r.via_file = rel
            r.hashed = hashed
    return out


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """The file's logical lines (backslash continuations joined), each with its first line number."""
    logical: list[tuple[int, str]] = []
    buf, start = "", 0
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not buf:
            start = i
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        logical.append((start, buf))
        buf = ""
    if buf:
        logical.append((start, buf))
    return logical


def _include(
    files: RepoFiles, ev: Evidence, base: str, line: str, group: str, done: set[str], depth: int
) -> list[Requirement]:
    """-r / -c: the included file's requirements (a constraints file adds constraints only)."""
    is_c = line.startswith(("-c", "--constraint"))
    target = re.sub(r"^(-r|-c|--requirement|--constraint)\s*=?\s*", "", line).strip()
    path = posixpath.normpath(posixpath.join(base, target))
    if is_c:
        for _ in scan_file(files, ev, path, "constraint", done=done, depth=depth + 1, constraint=True):
            pass
        return []
    child_group = group if group != "other" else classify(path)
    return scan_file(files, ev, path, child_group, done=done, depth=depth + 1)


def _editable(ev: Evidence, rel: str, lineno: int, line: str, src: Source, group: str) -> list[Requirement]:
    """-e: a local path is installed with the project; a VCS URL with #egg= is a requirement."""
    target = re.sub(r"^(-e|--editable)\s*=?\s*", "", line).strip()
    if target.startswith((".", "/")) or "://" not in target and "@" not in target:
        _local_extras(ev, target, src, group)
        ev.warn(rel, lineno, f"editable path {target!r}: installed with the project, not before it")
        req = Requirement(target, "", group, src, local=True)
        ev.requirements.append(req)
        return []
    m = re.search(r"#egg=([A-Za-z0-9_.\-]+)", target)
    if m:
        r = ev.add_requirement(f"{m.group(1)} @ {target.split('#')[0]}", group, src)
        if r:
            return [r]
    return []


def _pip_option(ev: Evidence, rel: str, lineno: int, line: str) -> None:
    """A pip option line: warned about and ignored (the default index is used)."""
    opt = line.split()[0]
    if opt in (
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "--trusted-host",
        "--pre",
        "--prefer-binary",
        "--no-binary",
        "--only-binary",
        "--use-feature",
    ):
        ev.warn(rel, lineno, f"pip option {opt} ignored (the default index is used)")
        return
    ev.warn(rel, lineno, f"unknown pip option {opt}; ignored")


def _requirement_line(
    ev: Evidence, rel: str, lineno: int, line: str, src: Source, group: str, constraint: bool
) -> Requirement | None:
    """One requirement line, recorded; None for a local path or a line that does not parse."""
    spec = re.sub(r"\s--hash[=\s]\S+", "", line).strip()
    if spec.startswith((".", "/")) or spec in (".",) or re.match(r"^file:", spec):
        _local_extras(ev, spec, src, group)
        ev.warn(rel, lineno, f"local path {spec!r}: installed with the project, not before it")
        ev.requirements.append(Requirement(spec, "", group, src, local=True))
        return None
    parsed = parse_spec(spec)
    if parsed is None:
        # a conda-style pin (name=1.0) is a common slip
        m = re.match(r"^([A-Za-z0-9_.\-]+)=([0-9][^=]*)$", spec)
        if m:
            parsed = parse_spec(f"{m.group(1)}=={m.group(2)}")
        if parsed is None:
            ev.warn(rel, lineno, f"cannot parse requirement {spec!r}; ignored")
            return None
    name, text_spec = parsed
    req = Requirement(text_spec, canonicalize_name(name), group, src)
    if constraint:
        ev.constraints.append(req)
    else:
        ev.requirements.append(req)
    return req


def _local_extras(ev: Evidence, target: str, src: Source, group: str) -> None:
    """``.[full]`` or ``-e .[test]`` in a test requirements file names the project's test extras."""
    m = re.match(r"^\.?/?\.?\[([^\]]+)\]$", target.strip())
    if m and group in (MAIN, TEST):
        for extra in m.group(1).split(","):
            ev.test_extras.append((extra.strip(), src))
