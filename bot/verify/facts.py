"""What the prosecutor checks against, read statically from the repository: core and optional
requirements, console scripts, commands in the README, the project's own top-level modules, and
imports the source guards with ``try/except ImportError`` (optional by the code's own word)."""

from __future__ import annotations

import ast
import configparser
import logging
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from bot import safefs
from bot.evidence.reqparse import poetry_markers

log = logging.getLogger(__name__)

_SKIP_DIRS = {
    ".git",
    ".tox",
    ".nox",
    "node_modules",
    "build",
    "dist",
    ".venv",
    "venv",
    "__pycache__",
    "site-packages",
    ".eggs",
    "docs",
    "tests",
    "test",
    "testing",
    "examples",
    "benchmarks",
}


@dataclass
class CoreRequirement:
    name: str  # canonical distribution name
    marker: str = ""  # environment marker, evaluated in the container


@dataclass
class RepoFacts:
    project_name: str = ""
    core: list[CoreRequirement] = field(default_factory=list)
    optional: set[str] = field(default_factory=set)  # canonical dist names only in extras
    console_scripts: dict[str, str] = field(default_factory=dict)  # name -> "module:func"
    readme_commands: list[list[str]] = field(default_factory=list)
    own_modules: list[str] = field(default_factory=list)  # top-level importable names
    guarded_imports: set[str] = field(default_factory=set)  # top-level names under try/except ImportError
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "project_name": self.project_name,
            "core": [{"name": c.name, "marker": c.marker} for c in self.core],
            "optional": sorted(self.optional),
            "console_scripts": self.console_scripts,
            "readme_commands": self.readme_commands,
            "own_modules": self.own_modules,
            "guarded_imports": sorted(self.guarded_imports),
        }

    @classmethod
    def from_repo(cls, repo: Path) -> RepoFacts:
        facts = cls()
        _read_pyproject(repo, facts)
        _read_setup_cfg(repo, facts)
        if not facts.core:
            _read_requirements(repo, "requirements.txt", facts)
        facts.own_modules = own_modules(repo)
        facts.guarded_imports = guarded_imports(repo)
        facts.readme_commands = readme_commands(repo, facts.console_scripts, facts.own_modules)
        core_names = {c.name for c in facts.core}
        facts.optional -= core_names
        return facts


def _add_requirement(text: str, facts: RepoFacts, optional: bool, where: str) -> None:
    text = text.strip()
    if not text or text.startswith(("#", "-")):
        return
    try:
        req = Requirement(text)
    except InvalidRequirement:
        facts.warnings.append(f"{where}: cannot parse requirement {text!r}")
        return
    name = canonicalize_name(req.name)
    marker = str(req.marker) if req.marker else ""
    if optional or "extra" in marker:
        facts.optional.add(name)
    elif all(c.name != name for c in facts.core):
        facts.core.append(CoreRequirement(name, marker))


def _read(repo: Path, rel: str, facts: RepoFacts) -> str | None:
    """Every file read here goes through the safe reader: a requirements.txt linked to
    /etc/passwd once put the host's accounts into the report (SECURITY.md S13)."""
    return safefs.try_read_text(repo, rel, warnings=facts.warnings)


def _read_pyproject(repo: Path, facts: RepoFacts) -> None:
    text = _read(repo, "pyproject.toml", facts)
    if text is None:
        return
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        facts.warnings.append(f"pyproject.toml: {exc}")
        return
    except RecursionError:  # tomllib recurses: 100,000 nested arrays are not a crash
        facts.warnings.append("pyproject.toml: nested too deeply; not read")
        return
    project = data.get("project") or {}
    facts.project_name = str(project.get("name") or "")
    for dep in project.get("dependencies") or []:
        _add_requirement(str(dep), facts, False, "pyproject.toml")
    for extra in (project.get("optional-dependencies") or {}).values():
        for dep in extra or []:
            _add_requirement(str(dep), facts, True, "pyproject.toml")
    facts.console_scripts.update({str(k): str(v) for k, v in (project.get("scripts") or {}).items()})
    poetry = (data.get("tool") or {}).get("poetry") or {}
    if poetry:
        facts.project_name = facts.project_name or str(poetry.get("name") or "")
        for name, spec in (poetry.get("dependencies") or {}).items():
            if name.lower() == "python":
                continue
            optional = isinstance(spec, dict) and bool(spec.get("optional"))
            # a dependency for older Pythons only (importlib-resources with python = "<3.9")
            # is not installed on the image's Python: not a core import there
            marker = " and ".join(f"({m})" for m in poetry_markers(spec))
            _add_requirement(f"{name} ; {marker}" if marker else name, facts, optional, "pyproject.toml")
        facts.console_scripts.update(
            {str(k): str(v) for k, v in (poetry.get("scripts") or {}).items() if isinstance(v, str)}
        )


def _read_setup_cfg(repo: Path, facts: RepoFacts) -> None:
    text = _read(repo, "setup.cfg", facts)
    if text is None:
        return
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read_string(text)
    except configparser.Error as exc:
        facts.warnings.append(f"setup.cfg: {exc}")
        return
    facts.project_name = facts.project_name or cfg.get("metadata", "name", fallback="")
    for line in cfg.get("options", "install_requires", fallback="").splitlines():
        _add_requirement(line, facts, False, "setup.cfg")
    if cfg.has_section("options.extras_require"):
        for _, value in cfg.items("options.extras_require"):
            for line in value.splitlines():
                _add_requirement(line, facts, True, "setup.cfg")
    for line in cfg.get("options.entry_points", "console_scripts", fallback="").splitlines():
        if "=" in line:
            name, target = line.split("=", 1)
            facts.console_scripts[name.strip()] = target.strip()


def _read_requirements(repo: Path, rel: str, facts: RepoFacts) -> None:
    text = _read(repo, rel, facts)
    if text is not None:
        for line in text.splitlines():
            _add_requirement(line.split(" #", 1)[0], facts, False, rel)


def _candidate_roots(repo: Path) -> list[Path]:
    return [p for p in (repo / "src", repo) if p.is_dir() and safefs.inside(repo, p)]


def own_modules(repo: Path) -> list[str]:
    """Top-level packages (directories with __init__.py) and modules of the project, under
    ``src/`` or the repository root; tests, docs and setup scripts are not the project."""
    names: list[str] = []
    for root in _candidate_roots(repo):
        for child in sorted(root.iterdir()):
            if child.name in _SKIP_DIRS or child.name.startswith((".", "_")):
                continue
            if child.is_symlink():
                continue
            if child.is_dir() and (child / "__init__.py").is_file() and child.name.isidentifier():
                names.append(child.name)
            elif (
                child.suffix == ".py"
                and child.stem.isidentifier()
                and root != repo
                and child.stem not in ("setup", "conftest")
            ):
                names.append(child.stem)
        if names:
            break
    return names


def _python_files(repo: Path, limit: int = 2000) -> Iterable[str]:
    """Repository-relative .py files, from the iterative walk (Path.rglob recursed into a
    1,100-level tree until RecursionError)."""
    count = 0
    for rel, dirnames, filenames in safefs.walk(repo):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")]
        for name in filenames:
            if not name.endswith(".py"):
                continue
            path = f"{rel}/{name}" if rel else name
            if (repo / path).is_symlink():
                continue
            count += 1
            if count > limit:
                return
            yield path


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names: list[str] = []
    t = handler.type
    if t is None:
        return True
    for node in t.elts if isinstance(t, ast.Tuple) else [t]:
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
    return any(n in ("ImportError", "ModuleNotFoundError", "Exception", "BaseException") for n in names)


def guarded_imports(repo: Path) -> set[str]:
    """Top-level module names imported inside ``try:`` blocks that catch ImportError: the code
    itself says they are optional."""
    found: set[str] = set()
    for rel in _python_files(repo):
        text = safefs.try_read_text(repo, rel)
        if text is None:
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Try) or not any(_catches_import_error(h) for h in node.handlers):
                continue
            for stmt in node.body:
                for sub in ast.walk(stmt):
                    if isinstance(sub, ast.Import):
                        found.update(a.name.split(".")[0] for a in sub.names)
                    elif isinstance(sub, ast.ImportFrom) and sub.module and not sub.level:
                        found.add(sub.module.split(".")[0])
    return found


_FENCE = re.compile(r"^```[ \t]*(\w*)[^\n]*\n(.*?)^```", re.S | re.M)


def readme_commands(repo: Path, scripts: dict[str, str], modules: list[str]) -> list[list[str]]:
    """Programs a README tells people to run that belong to this project: a declared console
    script or ``python -m <own package>``. Only the program is kept; the prosecutor adds
    ``--help``, so nothing the README does beyond launching is run."""
    names = sorted(p.name for p in repo.glob("README*"))
    text = next(
        (t for t in (safefs.try_read_text(repo, n, max_bytes=200_000, head=True) for n in names) if t is not None), None
    )
    if text is None:
        return []
    out: list[list[str]] = []
    for lang, body in _FENCE.findall(text):
        if lang.lower() not in ("", "bash", "sh", "shell", "console", "shell-session", "text", "zsh"):
            continue
        for line in body.splitlines():
            line = line.strip()
            line = line[2:] if line.startswith(("$ ", "% ", "> ")) else line
            words = line.split()
            if not words:
                continue
            if words[0] in scripts and [words[0]] not in out:
                out.append([words[0]])
            elif (
                len(words) >= 3
                and re.fullmatch(r"python[\d.]*", words[0])
                and words[1] == "-m"
                and words[2].split(".")[0] in modules
            ):
                cmd = ["python", "-m", words[2]]
                if cmd not in out:
                    out.append(cmd)
    return out[:10]
