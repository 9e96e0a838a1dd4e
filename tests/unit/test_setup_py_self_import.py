"""setup.py that imports the checkout (its own package for __version__, versioneer.py) under
`build-backend = "setuptools.build_meta"`: pip's isolated build cannot see the checkout, so the
project is installed without build isolation and with the checkout on PYTHONPATH. Under the
legacy backend (no build-backend named), which puts setup.py's folder on sys.path, nothing
changes.

setup.py that imports an installed distribution at module level (numpy for its headers,
Cython's cythonize) that [build-system] does not require: the isolated build has setuptools
alone, so the project installs without build isolation after the distributions (the real
engine shows both sides: tests/integration/test_plan_build.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.compile.plan import make_plan
from bot.graph.mapping import Registry

SETUP_PY = """from mypkg import __version__
from setuptools import setup, find_packages

setup(name="mypkg", version=__version__, packages=find_packages(), install_requires=["PyYAML>=5.1"])
"""


def _repo(tmp_path: Path, setup_py: str = SETUP_PY, backend: str | None = "setuptools.build_meta") -> Path:
    repo = tmp_path / "r"
    (repo / "mypkg").mkdir(parents=True)
    (repo / "mypkg" / "__init__.py").write_text("__version__ = '0.5.1'\n")
    (repo / "versioneer.py").write_text("def get_version():\n    return '1.0'\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_x.py").write_text("def test_x():\n    import mypkg\n")
    (repo / "setup.py").write_text(setup_py)
    build = '[build-system]\nrequires = ["setuptools>=42", "wheel"]\n'
    if backend:
        build += f'build-backend = "{backend}"\n'
    (repo / "pyproject.toml").write_text(build)
    return repo


def _dockerfile(repo: Path) -> str:
    plan = make_plan(repo, None, available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False))
    return plan.dockerfile.text


def test_the_project_installs_without_isolation_with_the_checkout_on_pythonpath(tmp_path):
    text = _dockerfile(_repo(tmp_path))
    assert "# without build isolation and with the checkout on PYTHONPATH: setup.py imports from it" in text
    assert "python -m pip install --no-cache-dir setuptools wheel" in text
    assert "env PYTHONPATH=/workspace python -m pip install --no-cache-dir --no-build-isolation -e ." in text
    # the comment cites the line of setup.py that imports the package
    assert "setup.py:1" in text


@pytest.mark.parametrize(
    "setup_py",
    [
        "import versioneer\nfrom setuptools import setup\nsetup(name='mypkg', version=versioneer.get_version())\n",
        "try:\n    from mypkg import __version__\nexcept ImportError:\n    __version__ = '0'\n"
        "from setuptools import setup\nsetup(name='mypkg', version=__version__)\n",
    ],
    ids=["versioneer", "in-a-try"],
)
def test_other_imports_of_the_checkout_count_too(tmp_path, setup_py):
    assert "--no-build-isolation" in _dockerfile(_repo(tmp_path, setup_py))


@pytest.mark.parametrize(
    ("setup_py", "backend"),
    [
        (SETUP_PY, None),  # the legacy backend puts setup.py's folder on sys.path
        (SETUP_PY, "setuptools.build_meta:__legacy__"),
        ("import os\nfrom setuptools import setup\nsetup(name='mypkg', version='1.0')\n", "setuptools.build_meta"),
    ],
    ids=["no-backend", "legacy-backend", "no-own-import"],
)
def test_nothing_changes_when_the_build_can_see_the_checkout_or_does_not_need_it(tmp_path, setup_py, backend):
    text = _dockerfile(_repo(tmp_path, setup_py, backend))
    assert "--no-build-isolation" not in text and "PYTHONPATH=/workspace" not in text
    assert "python -m pip install --no-cache-dir -e ." in text


# --- setup.py imports an installed distribution that [build-system] does not require -------------

CYTHON_SETUP = """import numpy
from Cython.Build import cythonize
from setuptools import setup, Extension

setup(name="mqc", ext_modules=cythonize([Extension("mqc.ct", ["src/mqc/ct.pyx"], include_dirs=[numpy.get_include()])]))
"""


def _build_repo(tmp_path: Path, pyproject: str | None, setup_py: str = CYTHON_SETUP) -> Path:
    repo = tmp_path / "b"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_ct.py").write_text("def test_ct():\n    import mqc\n")
    (repo / "setup.py").write_text(setup_py)
    if pyproject is not None:
        (repo / "pyproject.toml").write_text(pyproject)
    return repo


@pytest.mark.parametrize(
    "pyproject",
    [None, '[build-system]\nrequires = ["setuptools", "wheel"]\n', '[tool.pytest.ini_options]\naddopts = "-q"\n'],
    ids=["setup-py-only", "requires-lacks-them", "no-build-system-table"],
)
def test_a_build_import_the_isolated_build_lacks_installs_without_isolation(tmp_path, pyproject):
    text = _dockerfile(_build_repo(tmp_path, pyproject))
    assert "# without build isolation: setup.py imports numpy, Cython, installed above" in text
    assert "python -m pip install --no-cache-dir --no-build-isolation -e ." in text
    # only the checkout's own imports need it on PYTHONPATH
    assert "PYTHONPATH=/workspace" not in text
    # the distributions it imports are installed before the project, and setuptools with them
    install = text.index("--no-build-isolation -e .")
    assert text.index("Cython") < install and text.index("setuptools wheel") < install


@pytest.mark.parametrize(
    ("pyproject", "setup_py"),
    [
        # the isolated build gets what [build-system] requires (Cython's module is Cython)
        ('[build-system]\nrequires = ["setuptools", "Cython>=3", "numpy"]\n', CYTHON_SETUP),
        # an import that tolerates the distribution's absence does not need it
        (
            None,
            "try:\n    import numpy\nexcept ImportError:\n    numpy = None\nfrom setuptools import setup\nsetup(name='mqc')\n",
        ),
        # setuptools and the standard library are always there
        (
            None,
            "import os, sys\nfrom distutils.core import Extension\nfrom setuptools import setup\nsetup(name='mqc')\n",
        ),
    ],
    ids=["required", "in-a-try", "stdlib-and-setuptools"],
)
def test_nothing_changes_when_the_isolated_build_has_what_setup_py_imports(tmp_path, pyproject, setup_py):
    text = _dockerfile(_build_repo(tmp_path, pyproject, setup_py))
    assert "--no-build-isolation" not in text
