"""setup.py that imports the checkout (its own package for __version__, versioneer.py) under
`build-backend = "setuptools.build_meta"`: pip's isolated build cannot see the checkout, so the
project is installed without build isolation and with the checkout on PYTHONPATH. Under the
legacy backend (no build-backend named), which puts setup.py's folder on sys.path, nothing
changes."""

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
