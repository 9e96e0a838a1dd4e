"""Reading the shell lines people write in CI steps, tox commands and README blocks: which
test command they run, which extras and requirement files they install, which Debian packages
they add. Only read, never run."""

from __future__ import annotations

import re
import shlex

from bot.evidence.model import Evidence, Source, TestCommand

_SPLIT = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")


def _tokens(cmd: str) -> list[str]:
    try:
        return shlex.split(cmd, comments=True)
    except ValueError:
        return cmd.split()


def commands(text: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", text)
    out: list[str] = []
    for line in joined.splitlines():
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        out.extend(c for c in _SPLIT.split(line) if c.strip())
    return out


def test_command(cmd: str) -> list[str] | None:
    """The argv of a test run in ``cmd`` (pytest, unittest, nose, tox, nox...), else None."""
    toks = [t for t in _tokens(cmd) if not re.match(r"^[A-Z_][A-Z0-9_]*=", t)]
    while toks and toks[0] in (
        "sudo",
        "time",
        "xvfb-run",
        "poetry",
        "pdm",
        "uv",
        "hatch",
        "pipenv",
        "run",
        "-a",
        "exec",
        "env",
    ):
        toks = toks[1:]
    if not toks:
        return None
    if toks[0].startswith("python") and toks[1:3] == ["-m", "coverage"]:
        toks = toks[2:]
    if toks[0].startswith("python") and len(toks) >= 4 and toks[1:3] == ["-m", "manage"] and toks[3] == "test":
        return toks
    if toks[0] in ("pytest", "py.test"):
        return toks
    if toks[0].startswith("python") and len(toks) >= 3 and toks[1] == "-m":
        if toks[2] in ("pytest", "unittest", "nose", "nose2", "twisted.trial", "trial"):
            return toks
    if toks[0] == "coverage" and len(toks) > 1 and toks[1] == "run":
        if "-m" in toks:
            i = toks.index("-m")
            if i + 1 < len(toks) and toks[i + 1] in ("pytest", "unittest", "nose", "twisted.trial", "manage"):
                return ["python", *toks[i:]]
        else:
            script = [t for t in toks[2:] if not t.startswith("-")]
            if script and script[0].endswith(".py") and re.search(r"test", script[0]):
                return ["python", *toks[toks.index(script[0]) :]]
    if (
        toks[0].startswith("python")
        and len(toks) >= 2
        and toks[1] in ("setup.py", "runtests.py", "run_tests.py", "manage.py")
        and (len(toks) > 2 and toks[2] == "test" or toks[1] in ("runtests.py", "run_tests.py"))
    ):
        return toks
    if toks[0] in ("nosetests", "nose2", "trial"):
        return toks
    return None


def pip_install(cmd: str) -> dict[str, list[str]] | None:
    """For ``pip install ...``: {"extras": [...], "files": [...], "packages": [...]}."""
    toks = _tokens(cmd)
    for i in range(len(toks) - 1):
        if toks[i] in ("pip", "pip3") or toks[i].endswith("/pip") or (toks[i] == "-m" and toks[i + 1] == "pip"):
            rest = toks[i + 1 :] if toks[i] != "-m" else toks[i + 2 :]
            if rest and rest[0] == "install":
                return _install_args(rest[1:])
    if len(toks) > 2 and toks[0] == "uv" and toks[1] == "pip" and toks[2] == "install":
        return _install_args(toks[3:])
    return None


def _install_args(args: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"extras": [], "files": [], "packages": []}
    skip = False
    for j, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a in ("-r", "--requirement", "-c", "--constraint"):
            if j + 1 < len(args) and a in ("-r", "--requirement"):
                out["files"].append(args[j + 1])
            skip = True
            continue
        if a in ("-e", "--editable", "-U", "--upgrade", "--user", "--pre", "--system", "-q", "--quiet", "-v"):
            continue
        if a.startswith("-"):
            if a in ("-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--group"):
                skip = True
            continue
        m = re.match(r"^\.?/?\.?\[([^\]]+)\]$", a) or re.match(r"^\.\[([^\]]+)\]$", a)
        if m:
            out["extras"].extend(x.strip() for x in m.group(1).split(","))
            continue
        if a in (".", "./") or a.startswith(("./", "/", "$", "{", "http")):
            continue
        out["packages"].append(a)
    return out


def apt_packages(cmd: str) -> list[str]:
    toks = _tokens(cmd)
    while toks and toks[0] in ("sudo", "DEBIAN_FRONTEND=noninteractive", "env"):
        toks = toks[1:]
    if len(toks) < 3 or toks[0] not in ("apt-get", "apt") or "install" not in toks:
        return []
    pkgs = []
    for t in toks[toks.index("install") + 1 :]:
        if t.startswith("-") or "$" in t or "{" in t:
            continue
        if re.match(r"^[a-z0-9][a-z0-9+.\-]+(=[\w.:~+-]+)?$", t):
            pkgs.append(t.split("=")[0])
    return pkgs


_TARGET = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}$")


def make_targets(cmd: str) -> list[str]:
    """The targets of a ``make``/``just`` command (``make -j2 local-test`` -> [local-test]);
    options and variable assignments are not targets."""
    toks = _tokens(cmd)
    while toks and toks[0] in ("sudo", "time", "env"):
        toks = toks[1:]
    if not toks or toks[0] not in ("make", "gmake", "just"):
        return []
    out, skip = [], False
    for t in toks[1:]:
        if skip:
            skip = False
        elif t in ("-C", "-f", "--file", "--directory", "--justfile", "--working-directory"):
            return []  # another folder's or file's recipes: not the repository's Makefile
        elif t in ("-j", "--jobs", "-l", "-o", "-W"):
            skip = True
        elif not t.startswith("-") and "=" not in t and _TARGET.match(t):
            out.append(t)
    return out


def record_shell(
    ev: Evidence,
    text: str,
    rel: str,
    line: int | None,
    detail: str,
    *,
    tests: bool = True,
    cwd: str = "",
    ci: bool = False,
    docs: bool = False,
) -> None:
    """Record test commands, pip extras/files and apt packages found in shell ``text``; in a
    CI workflow (``rel`` under .github/workflows), also the make/just targets it runs. Each
    test command carries whether CI runs it (a workflow's line, or ``ci`` for a recipe a
    workflow names), the folder it runs in (``cwd``, and any ``cd`` in ``text``: its relative
    paths are not the checkout's), and ``docs`` for documentation's commands."""
    ci = ci or rel.startswith(".github/workflows/")
    for _i, cmd in enumerate(commands(text)):
        where = f" (in {cwd})" if cwd else ""
        src = Source(rel, line, f"{detail}{where}: {cmd[:80]}")
        toks = _tokens(cmd)
        if toks[:1] == ["cd"] and toks[1:] not in ([], ["."], ["./"]):
            cwd = (cwd + "/" if cwd else "") + (toks[1] if len(toks) > 1 else "~")
            continue
        if tests and rel.startswith((".github/workflows/", ".circleci/")) and not cwd:
            ev.ci_targets.extend((t, src) for t in make_targets(cmd))
        argv = test_command(cmd)
        if argv and tests:
            ev.test_commands.append(TestCommand(argv, src, ci=ci, cwd=cwd, docs=docs))
        pip = pip_install(cmd)
        if pip:
            for extra in pip["extras"]:
                ev.test_extras.append((extra, src))
            for f in pip["files"]:
                ev.requirement_files.append((f, src))
        for pkg in apt_packages(cmd):
            (ev.docs_apt_packages if docs else ev.apt_packages).append((pkg, src))
