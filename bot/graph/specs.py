"""What the graph says to install and to run: the pip install and constraint specs of its
packages, and the test command chosen from the evidence (bot.compile.plan builds the plan with
them; the loop's era trials and the lock read the specs)."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.utils import canonicalize_name

from bot.evidence.model import Evidence, ImportUse, ServiceRequirement, Source
from bot.graph.build import install_spec
from bot.graph.model import DepGraph


def choose_test_command(ev: Evidence, g: DepGraph) -> tuple[list[str], list[tuple[str, int | None, str]]]:
    installed = {n.name for n in g.of_type("PACKAGE") if n.action == "pip"}
    uses_pytest = (
        ev.pytest_config is not None
        or "pytest" in installed
        or any(_is_pytest(c.argv) and not c.docs for c in ev.test_commands)
    )
    ranked = [(c.argv, c.source) for c in sorted(ev.test_commands, key=lambda c: c.docs)]
    if uses_pytest:
        selection, ci_src = ci_pytest_selection(ev, installed)
        if selection:
            return ["python", "-m", "pytest", *selection], [(s.file, s.line, s.detail) for s in ci_src]
        for argv, src in ranked:
            if _is_pytest(argv):
                return ["python", "-m", "pytest"], [(src.file, src.line, src.detail)]
        return ["python", "-m", "pytest"], [
            (ev.pytest_config.file, ev.pytest_config.line, "pytest configuration")
        ] if ev.pytest_config else []
    for argv, src in ranked:
        if argv[0] in ("tox", "nox"):
            continue
        cmd = ["python", *argv[1:]] if argv[0].startswith("python") else list(argv)
        if any(ch in a for a in cmd for ch in "*?["):
            # the target runs without a shell, so a glob would reach the runner unexpanded:
            # pytest runs unittest-style tests from the folder just as well
            folders = sorted({a.rsplit("/", 1)[0] for a in cmd if "/" in a and any(ch in a for ch in "*?[")})
            return ["python", "-m", "pytest", *folders], [(src.file, src.line, src.detail + " (glob: run with pytest)")]
        return cmd, [(src.file, src.line, src.detail)]
    return ["python", "-m", "pytest"], []


def _is_pytest(argv: list[str]) -> bool:
    """A test command that runs pytest (``pytest``, ``py.test``, ``python -m pytest``)."""
    return "pytest" in argv[:3] or argv[0] in ("pytest", "py.test")


_SAFE_ARG = re.compile(r"^[\w./:\-\[\]=,@]{1,200}$")
_SAFE_EXPR = re.compile(r"^[\w .:\-()\[\]=,'\"]{1,200}$")


def pytest_selection(argv: list[str], tree: frozenset[str], installed: set[str]) -> list[str]:
    """What a pytest command line selects, and only that: test paths that are in the
    repository, ``-m``/``-k`` expressions, ``--ignore``/``--deselect``, and ``--timeout`` when
    pytest-timeout is installed. Output, coverage, xdist and every other option are left to the
    run, which adds its own (the command line is the repository's, so it is read as data)."""
    at = next((i for i, a in enumerate(argv) if a in ("pytest", "py.test") or a.endswith("/pytest")), None)
    if at is None:
        return []
    rest, out, i = argv[at + 1 :], [], 0
    while i < len(rest):
        a = rest[i]
        name, eq, val = a.partition("=")
        if a in ("-m", "-k") or name in ("--ignore", "--ignore-glob", "--deselect", "--timeout"):
            if not eq:
                if i + 1 >= len(rest):
                    break
                val = rest[i + 1]
                i += 1
            key = a if a in ("-m", "-k") else name
            if key in ("-m", "-k"):
                if _SAFE_EXPR.match(val):
                    out += [key, val]
            elif key == "--timeout":
                if val.isdigit() and "pytest-timeout" in installed:
                    out.append(f"--timeout={val}")
            elif _SAFE_ARG.match(val) and _inside(val):
                out.append(f"{key}={val}")
        elif not a.startswith("-") and _SAFE_ARG.match(a) and _inside(a) and _in_tree(a, tree):
            out.append(a.removeprefix("./"))
        i += 1
    return out


def _inside(path: str) -> bool:
    p = path.split("::")[0]
    return bool(p) and not p.startswith(("/", "~")) and ".." not in Path(p).parts


def _in_tree(path: str, tree: frozenset[str]) -> bool:
    """A file of the repository or a folder that holds one (read from the scan's file list,
    so a link out of the repository is never followed to check)."""
    p = path.split("::")[0].removeprefix("./").rstrip("/")
    if p in ("", "."):
        return True
    return p in tree or any(f.startswith(p + "/") for f in tree)


def ci_pytest_selection(ev: Evidence, installed: set[str]) -> tuple[list[str], list[Source]]:
    """The tests CI runs, when its pytest commands agree on them (``make local-test`` runs
    ``pytest -m "fast or local"``: the rest need cloud accounts). A CI command that selects
    nothing runs the configured suite, and commands that select differently leave it to the
    configuration too: then nothing is kept. tox and docs commands are not read here: tox
    environments commonly split one suite between them."""
    ci = [c for c in ev.test_commands if c.ci and not c.docs and _is_pytest(c.argv)]
    if not ci or any(c.cwd for c in ci):
        return [], []  # a command run in another folder selects paths that are not the root's
    selections = [pytest_selection(c.argv, ev.tree, installed) for c in ci]
    first = selections[0]
    if not first or any(sel != first for sel in selections[1:]):
        return [], []
    return first, [ci[0].source]


def command_paths(command: list[str]) -> list[str]:
    """The files and folders a ``python -m pytest`` command names (node ids without their
    ``::`` part); [] when it names none, so that it runs the configured suite, or is not pytest."""
    if command[:3] != ["python", "-m", "pytest"]:
        return []
    paths, rest = [], command[3:]
    i = 0
    while i < len(rest):
        a = rest[i]
        if a in ("-m", "-k"):
            i += 2  # the expression that follows is not a path
            continue
        if not a.startswith("-"):
            paths.append(a.split("::")[0].rstrip("/"))
        i += 1
    return [p for p in paths if p and p != "."]


def untargeted_test_imports(ev: Evidence, command: list[str]) -> list[ImportUse]:
    """The tests' imports that a test command naming its folders never runs: those of test
    modules outside them, which pytest does not collect, and those inside a function of an
    ``__init__.py`` above them, which loading the package does not run (bm25s runs
    ``tests/core``; its comparison tests and the helpers in ``tests/__init__.py`` import beir,
    transformers and bm25_pt, and through them torch). A conftest.py above them, any other
    helper module and every import outside the tests still count. A test that reaches one of
    these after all fails on the missing module, which the loop's repairs install."""
    targets = command_paths(command)
    if not targets:
        return []

    def under(path: str) -> bool:
        return any(path == t or path.startswith(t + "/") for t in targets)

    def above(folder: str) -> bool:
        return any(folder == "" or t.startswith(folder + "/") for t in targets)

    out = []
    for use in ev.imports:
        path = use.source.file
        if not use.in_tests or under(path):
            continue
        folder, _, name = path.rpartition("/")
        if name in ("conftest.py", "__init__.py"):
            loaded = above(folder)  # pytest loads the conftest.py and packages above what it runs
            if not loaded or (name == "__init__.py" and use.lazy):
                out.append(use)
        elif name.startswith("test_") or name.endswith("_test.py"):
            out.append(use)  # a test module the command does not collect
    return out


def planned_test_command(ev: Evidence, g: DepGraph) -> tuple[list[str], list[tuple[str, int | None, str]]]:
    """The command the tests run with and the evidence for it: CI's or the default
    (``choose_test_command``), in a workspace narrowed to its members' folders
    (``member_test_command``). The plan, its test-import rule and the Python ecosystem all ask
    here, so they never disagree on the command."""
    return member_test_command(ev, *choose_test_command(ev, g))


def member_test_command(ev: Evidence, command: list[str], cmd_ev: list) -> tuple[list[str], list]:
    """In a workspace, pytest runs the test folders of the members CI tests (all members when
    no workflow names one), each file imported by its path so that two members' tests/test_x.py
    do not collide. The record splits the results per member."""
    members = list(getattr(ev, "members", []) or [])
    if not members or command[:3] != ["python", "-m", "pytest"] or len(command) > 3:
        return command, cmd_ev
    tested = [m for m in members if m.ci is not None] or members
    # a member with no test of its own (nonebot2's envs/test: a package of test dependencies)
    # adds no folder to the run
    tested = [m for m in tested if m.tests or _holds_tests(m.path, ev.tree)]
    if not tested:
        return command, cmd_ev
    folders = [m.tests or m.path for m in tested]
    why = [(m.ci.file, m.ci.line, m.ci.detail) for m in tested if m.ci is not None] or [
        (m.source.file, m.source.line, f"workspace member {m.name}") for m in tested
    ]
    root = getattr(ev, "root_tests", None)
    if root is not None:
        # the root is a package with tests of its own: they come first
        folders.insert(0, root.file.rstrip("/"))
        why.insert(0, (root.file, root.line, root.detail))
    return ["python", "-m", "pytest", "--import-mode=importlib", *folders], [*cmd_ev, *why]


def _holds_tests(folder: str, tree: frozenset[str]) -> bool:
    """A test module (``test_*.py``, ``*_test.py``) somewhere below ``folder`` (the scan's file list)."""
    prefix = folder.rstrip("/") + "/"
    for rel in tree:
        name = rel.rsplit("/", 1)[-1]
        if rel.startswith(prefix) and name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
            return True
    return False


def install_specs(g: DepGraph) -> list[str]:
    specs = []
    for n in g.of_type("PACKAGE") + g.of_type("TOOL"):
        if n.action in ("pip", "tool", "repair-pip") and "spec" in n.attrs:
            specs.append(install_spec(n.attrs["spec"], n.attrs.get("pinned")))
    return sorted(set(specs))


def constraint_specs(g: DepGraph) -> list[str]:
    """Every pin that applies to every pip install: repairs' pip_constraint atoms, -c files, and
    the lock file's pins for packages nothing else constrains."""
    out: list[str] = []
    for n in g.of_type("CONFIG"):
        if n.action != "constraint":
            continue
        if n.attrs.get("kind") == "lock":
            continue
        out.append(n.attrs["spec"])
    lock = g.nodes.get("config:lock")
    if lock is not None and lock.action == "constraint":
        taken = {canonicalize_name(re.split(r"[<>=!~\[; ]", s, maxsplit=1)[0]) for s in out}
        direct = {n.name for n in g.of_type("PACKAGE") if n.action in ("pip", "repair-pip")}
        for name, version in sorted(lock.attrs.get("pins", {}).items()):
            if name not in taken and name not in direct:
                out.append(f"{name}=={version}")
    return out


def service_requirements(g: DepGraph) -> list[ServiceRequirement]:
    """The services the graph holds (the plan's, and those a kept repair started), with their
    evidence: what a run starts beside its tests and the compose file carries."""
    return [
        ServiceRequirement(
            n.name,
            n.attrs.get("kind", "other"),
            n.attrs.get("image", ""),
            list(n.attrs.get("ports", [])),
            dict(n.attrs.get("env", {})),
            [Source(f, ln, d) for f, ln, d in n.evidence],
        )
        for n in g.of_type("SERVICE")
    ]
