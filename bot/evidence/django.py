"""Django's settings module as the repository names it, and whether its tests use pytest-django.

pytest imports a Django project's test modules only when Django is set up, which only
pytest-django does (with ``DJANGO_SETTINGS_MODULE``). A project that runs its tests with its own
runner (``runtests.py``, ``manage.py test``) names the module in that runner and never needs
pytest-django; setupbot's collection, which runs pytest, does. The plan (bot.graph.build) and the
loop's django_settings rule (bot.loop.repair) read the module from here."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from bot import safefs
from bot.evidence.files import RepoFiles
from bot.evidence.model import Evidence, Source

SETTINGS_ASSIGN = re.compile(
    r"""(?:environ(?:\.setdefault\(|\[)\s*['"]DJANGO_SETTINGS_MODULE['"]\s*(?:,|\]\s*=)\s*['"]"""
    r"""|DJANGO_SETTINGS_MODULE\s*[=:]\s*['"]?|--settings[= ]['"]?|--ds[= ]['"]?)([A-Za-z_][\w.]*)"""
)
# where a repository names its settings module: its runners first, then its configuration
NAMING_FILES = (
    "manage.py",
    "runtests.py",
    "tests/runtests.py",
    "conftest.py",
    "tests/conftest.py",
    "pytest.ini",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
    "justfile",
    "Makefile",
)
# where a repository that uses pytest-django says so
PYTEST_DJANGO_FILES = (
    "pyproject.toml",
    "setup.cfg",
    "pytest.ini",
    "tox.ini",
    "requirements.txt",
    "requirements-dev.txt",
    "requirements/test.txt",
    "requirements/dev.txt",
    "conftest.py",
)


_WORKFLOW = re.compile(r"\.github/workflows/[^/]+\.ya?ml")


def named_settings(repo: Path, tree: Iterable[str] | None = None) -> list[tuple[str, Source]]:
    """Settings modules the repository names itself, each with where: manage.py or runtests.py
    set DJANGO_SETTINGS_MODULE, tox and pytest configuration set it, CI passes --settings. Only
    modules that exist in the tree count (a typo or a placeholder is not evidence), so the value
    is a module path of the repository's own, never free text. ``tree``: the repository's files
    when the caller has listed them already (the scan), else the workflows are looked for."""
    found: dict[str, Source] = {}
    workflows = (
        sorted(rel for rel in tree if _WORKFLOW.fullmatch(rel))[:10]
        if tree is not None
        else safefs.glob_files(repo, lambda rel: _WORKFLOW.fullmatch(rel) is not None, limit=10)
    )
    names = list(NAMING_FILES) + workflows
    for rel in names:
        text = safefs.try_read_text(repo, rel, max_bytes=1_000_000)
        if text is None:
            continue
        for m in SETTINGS_ASSIGN.finditer(text):
            module = m.group(1).rstrip(".")
            parts = module.split(".")
            if module not in found and any(
                safefs.is_file(repo, (Path(base) / Path(*parts)).with_suffix(".py").as_posix())
                or safefs.is_file(repo, (Path(base) / Path(*parts) / "__init__.py").as_posix())
                for base in (".", "src")
            ):
                line = text.count("\n", 0, m.start()) + 1
                found[module] = Source(rel, line, f"sets DJANGO_SETTINGS_MODULE to {module}")
    return list(found.items())


def uses_pytest_django(repo: Path) -> bool:
    """The repository runs its tests under pytest-django (or sets the variable for pytest)."""
    for rel in PYTEST_DJANGO_FILES:
        text = safefs.try_read_text(repo, rel, max_bytes=2_000_000)
        if text is not None and re.search(r"pytest[-_]django|DJANGO_SETTINGS_MODULE\s*=", text):
            return True
    return False


def scan(files: RepoFiles, ev: Evidence) -> None:
    """The settings module a Django project's own runner names, when its tests import Django and
    do not use pytest-django: pytest's collection needs pytest-django and that module
    (``ev.django_settings``)."""
    if not any(u.in_tests and u.module == "django" for u in ev.imports) or uses_pytest_django(files.root):
        return
    named = named_settings(files.root, files.all_files())
    if named:
        ev.django_settings = named[0]
