"""Evidence: what a repository says about itself, read statically. One module per source;
``scan_repository`` runs them all. Malformed inputs become warnings and the scan goes on."""

from __future__ import annotations

import logging
from pathlib import Path

from bot.errors import InputError
from bot.evidence import (
    circleci,
    django,
    dockerfile,
    docs,
    imports,
    lockfiles,
    makefile,
    pipfile,
    pyproject,
    pytest_config,
    pyversion,
    requirements,
    services,
    setup_py,
    tox,
    travis,
    workflows,
    workspace,
)
from bot.evidence.files import RepoFiles
from bot.evidence.model import (
    Evidence,
    ImportUse,
    LockFile,
    Project,
    PythonConstraint,
    Requirement,
    ScanWarning,
    ServiceRequirement,
    Source,
)

log = logging.getLogger(__name__)

# The scanners in the order they run. Manifests first: later scanners (imports) are judged
# against what the manifests declared.
SCANNERS = (
    ("pyproject", pyproject.scan),
    ("setup.py/setup.cfg", setup_py.scan),
    ("requirements", requirements.scan),
    ("Pipfile/conda", pipfile.scan),
    ("lock files", lockfiles.scan),
    (".python-version", pyversion.scan),
    ("tox/nox", tox.scan),
    ("pytest configuration", pytest_config.scan_ini),
    ("workflows", workflows.scan),
    ("Travis CI", travis.scan),
    ("CircleCI", circleci.scan),
    ("compose", services.scan_compose),
    ("Dockerfile", dockerfile.scan),
    ("Makefile/justfile", makefile.scan),
    ("docs", docs.scan),
    ("workspace", workspace.scan),
    ("imports", imports.scan),
    # after the imports: only a project whose tests import Django is read for its settings
    ("Django settings", django.scan),
)


def scan_repository(repo: Path | str, output_dir: str | None = None) -> Evidence:
    """``output_dir`` is the run's output folder (output.dir): setupbot's files there, like
    everywhere, are not evidence (bot.evidence.generated)."""
    root = Path(repo)
    if not root.is_dir():
        raise InputError(f"{root} is not a directory", "Pass the path of a repository checkout.")
    ev = Evidence(repo=root.resolve())
    files = RepoFiles(root, ev, output_dir)
    for name, scanner in SCANNERS:
        try:
            scanner(files, ev)
        except RecursionError:
            ev.warn(".", None, f"{name}: input nested too deeply; skipped")
        except Exception as exc:  # a scanner bug must not cost the whole plan
            log.debug("scanner %s failed", name, exc_info=True)
            ev.warn(".", None, f"{name} scanner failed on this repository ({type(exc).__name__}: {exc}); skipped")
    # requirement files named by CI, tox, nox or docs that the file-name scan did not pick up
    seen = {r.source.file for r in ev.requirements}
    for path, _src in ev.requirement_files:
        path = path.strip().lstrip("./") if path.startswith("./") else path.strip()
        if path not in seen and files.exists(path):
            group = requirements.classify(path)
            requirements.scan_file(
                files, ev, path, "test" if group == "other" and "doc" not in path else group, via_ok=True
            )
            seen.add(path)
    _note_what_is_missing(files, ev)
    ev.tree = frozenset(files.all_files())
    return ev


MANIFESTS = ("pyproject.toml", "setup.py", "setup.cfg", "Pipfile", "environment.yml", "environment.yaml")


def _note_what_is_missing(files: RepoFiles, ev: Evidence) -> None:
    """A repository without a manifest or without tests is planned anyway; the report says what
    the plan had to go on (SECURITY.md, bad input)."""
    names = files.all_files()
    base = [n.rsplit("/", 1)[-1] for n in names]
    conda = ev.project.manager == "conda"  # an environment file, whatever its name
    if not conda and not any(
        b in MANIFESTS or (b.startswith("requirements") and b.endswith((".txt", ".in"))) for b in base
    ):
        ev.warn(
            ".",
            None,
            "no dependency manifest (pyproject.toml, setup.py, setup.cfg, requirements*.txt, "
            "Pipfile, environment.yml); the packages come from the source imports only",
        )
    if not ev.test_commands and not any(n.endswith(".py") and imports.in_tests(n) for n in names):
        ev.warn(
            ".",
            None,
            "no tests found (no test_*.py, *_test.py or tests/ folder); the run can only "
            "show that the project installs and imports",
        )


__all__ = [
    "Evidence",
    "ImportUse",
    "LockFile",
    "Project",
    "PythonConstraint",
    "Requirement",
    "ScanWarning",
    "ServiceRequirement",
    "Source",
    "scan_repository",
]
