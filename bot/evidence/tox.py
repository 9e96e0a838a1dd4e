"""tox.ini (and legacy_tox_ini) and noxfile.py: test commands, test deps, extras, tested
Python versions."""

from __future__ import annotations

import ast
import configparser
import re
from collections.abc import Callable

from bot.evidence import shellcmd
from bot.evidence.files import RepoFiles, line_of
from bot.evidence.model import TEST, Evidence, PythonConstraint, Source, TestCommand


def _expand_braces(text: str) -> list[str]:
    m = re.search(r"\{([^{}]*)\}", text)
    if not m:
        return [text]
    out = []
    for alt in m.group(1).split(","):
        out += _expand_braces(text[: m.start()] + alt.strip() + text[m.end() :])
    return out


def _envs(envlist: str) -> list[str]:
    out = []
    for part in re.split(r",(?![^{]*\})|\n", envlist):
        part = part.strip()
        if part:
            out += _expand_braces(part)
    return out


def scan(files: RepoFiles, ev: Evidence) -> None:
    text = files.read_text("tox.ini")
    if text is not None:
        scan_text(ev, text, "tox.ini")
    _scan_nox(files, ev)


# the project's own declarations: a tox factor's pin of one of them (numpy123: numpy==1.23.*,
# devdeps: numpy>=0.0.dev0) is that environment's variation, not the project's requirement
_MANIFESTS = ("pyproject.toml", "setup.py", "setup.cfg")

# Source of a needle in the file being scanned: (needle, detail) -> Source
_Src = Callable[[str, str], Source]


def scan_text(ev: Evidence, text: str, rel: str, line_offset: int = 0) -> None:
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read_string(text, source=rel)
    except configparser.Error as exc:
        ev.warn(rel, getattr(exc, "lineno", None), f"malformed tox configuration: {str(exc).splitlines()[0]}")
        return

    def src(needle: str, detail: str) -> Source:
        ln = line_of(text, needle)
        return Source(rel, (ln + line_offset) if ln else None, detail)

    if parser.has_option("tox", "envlist"):
        for env in _envs(parser.get("tox", "envlist")):
            for factor in env.split("-"):
                m = re.match(r"^py3(\d+)$", factor)
                if m:
                    ev.python.append(PythonConstraint("tested", f"3.{m.group(1)}", src("envlist", f"tox env {env}")))
    sections = [
        s
        for s in parser.sections()
        if s == "testenv" or s.startswith("testenv:") and re.search(r"test|py|unit|cov", s[8:])
    ]
    factored: dict[str, tuple[str, Source]] = {}
    plain: set[str] = set()
    for section in sections:
        _scan_section(ev, parser, section, rel, src, factored, plain)
    # a dependency that only appears behind a factor (django42: Django>=4.2,<5) still has to be
    # installed: the last one listed is usually the newest
    from packaging.utils import canonicalize_name

    declared = {r.name for r in ev.requirements if r.source.file in _MANIFESTS}
    for name, (spec, source) in factored.items():
        if canonicalize_name(name) not in plain and canonicalize_name(name) not in declared:
            ev.add_requirement(spec, TEST, source)


def _scan_section(
    ev: Evidence,
    parser: configparser.RawConfigParser,
    section: str,
    rel: str,
    src: _Src,
    factored: dict[str, tuple[str, Source]],
    plain: set[str],
) -> None:
    """One test environment: its deps, extras, commands and setenv."""
    if parser.has_option(section, "deps"):
        _scan_deps(ev, parser.get(section, "deps"), section, src, factored, plain)
    if parser.has_option(section, "extras"):
        for extra in re.split(r"[,\s]+", parser.get(section, "extras")):
            extra = extra.strip()
            if extra and ":" not in extra and "{" not in extra:
                ev.test_extras.append((extra, src("extras", f"{section} extras")))
    if parser.has_option(section, "commands"):
        body = parser.get(section, "commands")
        body = re.sub(r"^\s*[\w,!\-]+:\s+", "", body, flags=re.M)
        body = body.replace("{posargs}", "").replace("{toxinidir}/", "").replace("{envpython}", "python")
        body = re.sub(r"\{posargs:[^}]*\}", "", body)
        shellcmd.record_shell(ev, body, rel, src("commands", section).line, f"{section} commands")
    if parser.has_option(section, "setenv"):
        for raw in parser.get(section, "setenv").splitlines():
            m = re.match(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$", raw)
            if m and "{" not in m.group(2) and m.group(1) not in ("PYTHONPATH",):
                ev.env.setdefault(m.group(1), (m.group(2).strip(), src(raw.strip(), f"{section} setenv")))


def _scan_deps(
    ev: Evidence, deps: str, section: str, src: _Src, factored: dict[str, tuple[str, Source]], plain: set[str]
) -> None:
    """A ``deps`` value: requirement files, plain requirements (added, their names into ``plain``)
    and factor-conditional ones (``factored``, by name; added later when no plain one exists)."""
    for raw in deps.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "{[" in line or "{env" in line:
            continue
        m = re.match(r"^([\w,!{}.\-]+):\s*(.+)$", line)
        if line.startswith(("-r", "-c")):
            target = _named_file(line)
            ev.requirement_files.append((target, src(line, f"{section} deps")))
            continue
        if m and not re.match(r"^[A-Za-z0-9_.\-\[\]]+\s*[<>=!~;@]", line):
            spec = m.group(2).strip()
            if spec.startswith(("-r", "--requirement")) and "{" not in spec.replace("{toxinidir}/", ""):
                ev.matrix_files.append((_named_file(spec), src(line, f"{section} deps ({m.group(1)})")))
                continue
            if spec.startswith(("-", ".")) or "{" in spec:
                continue
            name = re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].lower()
            if not _admits_prereleases(spec):  # a nightly environment's (devdeps: astropy>=0.0.dev0)
                factored[name] = (spec, src(line, f"{section} deps ({m.group(1)})"))
            continue
        if line.startswith("-") or line.startswith(".") or "{" in line:
            continue
        req = ev.add_requirement(line, TEST, src(line, f"{section} deps"))
        if req:
            plain.add(req.name)


def _named_file(option: str) -> str:
    """The file a deps line's ``-r``/``-c`` (or ``--requirement``) option names, relative to the
    tox.ini's folder."""
    return re.sub(r"^(-[rc]\s*|--requirement[\s=]*)", "", option).replace("{toxinidir}/", "").strip()


def _admits_prereleases(spec: str) -> bool:
    """A requirement whose version specifier names a pre-release or development version."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return bool(Requirement(spec).specifier.prereleases)
    except InvalidRequirement:
        return False


def _scan_nox(files: RepoFiles, ev: Evidence) -> None:
    rel = "noxfile.py"
    text = files.read_text(rel)
    if text is None:
        return
    try:
        tree = ast.parse(text, rel)
    except (SyntaxError, ValueError) as exc:
        ev.warn(rel, getattr(exc, "lineno", None), f"cannot parse noxfile.py: {exc}")
        return
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        is_session = False
        for dec in fn.decorator_list:
            dec_call = dec if isinstance(dec, ast.Call) else None
            target = dec_call.func if dec_call else dec
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name in ("session", "nox_session"):
                is_session = True
                for kw in dec_call.keywords if dec_call else []:
                    if kw.arg in ("python", "py"):
                        try:
                            val = ast.literal_eval(kw.value)
                        except (ValueError, SyntaxError):
                            continue
                        for v in [val] if isinstance(val, str) else val if isinstance(val, list) else []:
                            if isinstance(v, str) and re.match(r"^3\.\d+$", v):
                                ev.python.append(
                                    PythonConstraint(
                                        "tested", v, Source(rel, kw.value.lineno, f"nox session {fn.name}")
                                    )
                                )
        if not is_session or not re.search(r"test|unit|cov|pytest", fn.name):
            continue
        for call in ast.walk(fn):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
                continue
            args = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            src = Source(rel, call.lineno, f"nox session {fn.name}")
            if call.func.attr == "install":
                for j, a in enumerate(args):
                    if a in ("-r", "-e", "-c"):
                        if a == "-r" and j + 1 < len(args):
                            ev.requirement_files.append((args[j + 1], src))
                        continue
                    m = re.match(r"^(?:-e\s*)?\.\[([^\]]+)\]$", a)
                    if m:
                        for e in m.group(1).split(","):
                            ev.test_extras.append((e.strip(), src))
                    elif not a.startswith(("-", ".")) and (j == 0 or args[j - 1] not in ("-r", "-c")):
                        ev.add_requirement(a, TEST, src)
            elif call.func.attr == "run" and args:
                argv = shellcmd.test_command(" ".join(args))
                if argv:
                    ev.test_commands.append(TestCommand(argv, src))
