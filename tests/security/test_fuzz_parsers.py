"""Fuzzing the manifest parsers (SECURITY.md, bad input): whatever the bytes or the shapes in a
manifest, each scanner returns with warnings, never an unhandled exception.

scan_repository turns a scanner's exception into a "scanner failed" warning so one bug cannot
cost the whole plan; the fuzz calls each scanner directly so such a bug is found, not hidden.
Examples are bounded (200 per parser) and the deadline is off (file I/O timing varies)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.evidence import (
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
    workflows,
)
from bot.evidence.files import RepoFiles
from bot.evidence.model import Evidence

FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# (file name, scanner)
PARSERS: dict[str, tuple[str, Callable[[RepoFiles, Evidence], None]]] = {
    "pyproject": ("pyproject.toml", pyproject.scan),
    "setup.py": ("setup.py", setup_py.scan),
    "setup.cfg": ("setup.cfg", setup_py.scan),
    "requirements": ("requirements.txt", requirements.scan),
    "Pipfile": ("Pipfile", pipfile.scan),
    "environment.yml": ("environment.yml", pipfile.scan),
    "Pipfile.lock": ("Pipfile.lock", lockfiles.scan),
    "poetry.lock": ("poetry.lock", lockfiles.scan),
    "uv.lock": ("uv.lock", lockfiles.scan),
    ".python-version": (".python-version", pyversion.scan),
    "tox.ini": ("tox.ini", tox.scan),
    "pytest.ini": ("pytest.ini", pytest_config.scan_ini),
    "workflow": (".github/workflows/ci.yml", workflows.scan),
    "compose": ("docker-compose.yml", services.scan_compose),
    "Makefile": ("Makefile", makefile.scan),
}

SEEDS = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools"]\n[project]\nname = "x"\nrequires-python = ">=3.9"\n'
    'dependencies = ["requests>=2", "attrs; python_version<\'3.12\'"]\n'
    '[project.optional-dependencies]\ntest = ["pytest"]\n[tool.poetry.dependencies]\npython = "^3.9"\n'
    '[tool.pytest.ini_options]\naddopts = "-p xdist"\n',
    "setup.py": "from setuptools import setup\nsetup(name='x', install_requires=['requests'], "
    "extras_require={'test': ['pytest']}, python_requires='>=3.8')\n",
    "setup.cfg": "[metadata]\nname = x\n[options]\ninstall_requires =\n    requests\n[options.extras_require]\ntest = pytest\n",
    "requirements.txt": "requests>=2.0\n-r other.txt\n-c constraints.txt\nnumpy==1.26 ; python_version < '3.12'\n",
    "Pipfile": '[packages]\nrequests = "*"\n[dev-packages]\npytest = ">=7"\n[requires]\npython_version = "3.11"\n',
    "environment.yml": "name: x\ndependencies:\n  - python=3.11\n  - numpy\n  - pip:\n    - requests\n",
    "Pipfile.lock": '{"_meta": {"requires": {"python_version": "3.11"}}, "default": {"requests": {"version": "==2.31.0"}}}',
    "poetry.lock": '[[package]]\nname = "requests"\nversion = "2.31.0"\n[metadata]\npython-versions = "^3.9"\n',
    "uv.lock": 'version = 1\nrequires-python = ">=3.9"\n[[package]]\nname = "requests"\nversion = "2.31.0"\n',
    ".python-version": "3.11\n",
    "tox.ini": "[tox]\nenvlist = py311\n[testenv]\ndeps = pytest\ncommands = pytest {posargs}\n",
    "pytest.ini": "[pytest]\naddopts = -p xdist --cov\nDJANGO_SETTINGS_MODULE = app.settings\n",
    ".github/workflows/ci.yml": "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    services:\n      db:\n        image: postgres:16\n"
    "    steps:\n      - uses: actions/setup-python@v5\n        with: {python-version: '3.11'}\n"
    "      - run: pip install -r requirements.txt && pytest\n",
    "docker-compose.yml": "services:\n  db:\n    image: postgres:16\n    ports: ['5432:5432']\n    environment: {POSTGRES_PASSWORD: x}\n",
    "Makefile": "test:\n\tpython -m pytest -x\n",
}

# JSON-like values of any shape: what a wrong-typed manifest holds where a string was expected
leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.text(max_size=30)
)
values = st.recursive(
    leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=12,
)


def _scan(parser: str, content: str | bytes) -> Evidence:
    name, scanner = PARSERS[parser]
    with tempfile.TemporaryDirectory(prefix="setupbot-fuzz-") as tmp:
        root = Path(tmp)
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
        ev = Evidence(repo=root.resolve())
        scanner(RepoFiles(root, ev), ev)  # must not raise
        for w in ev.warnings:
            assert isinstance(w.message, str) and w.message
        return ev


@st.composite
def mutated(draw, seed: str) -> str:
    """The seed with random text spliced in, cut, or a span repeated."""
    text = seed
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 40)))
        op = draw(st.sampled_from(["insert", "delete", "repeat"]))
        if op == "insert":
            text = text[:i] + draw(st.text(max_size=20)) + text[i:]
        elif op == "delete":
            text = text[:i] + text[j:]
        else:
            text = text[:i] + text[i:j] * draw(st.integers(2, 5)) + text[j:]
    return text


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return '""'
    if isinstance(v, (int, float)):
        return repr(v) if isinstance(v, float) else str(max(min(v, 2**63 - 1), -(2**63)))
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"


@pytest.mark.parametrize("parser", sorted(PARSERS))
@FUZZ
@given(data=st.data())
def test_random_bytes_and_mutated_manifests_never_crash(parser, data):
    name = PARSERS[parser][0]
    content = data.draw(st.one_of(st.binary(max_size=400), st.text(max_size=400), mutated(SEEDS[name])))
    _scan(parser, content)


PYPROJECT_KEYS = [
    "project.name",
    "project.dependencies",
    "project.optional-dependencies",
    "project.requires-python",
    "project.dynamic",
    "project.scripts",
    "build-system.requires",
    "build-system.build-backend",
    "tool.poetry.dependencies",
    "tool.poetry.group",
    "tool.poetry.dev-dependencies",
    "tool.pdm.dev-dependencies",
    "tool.uv.dev-dependencies",
    "dependency-groups",
    "tool.hatch.envs",
    "tool.pytest.ini_options",
    "tool.setuptools_scm",
    "tool.tox",
]


@FUZZ
@given(st.dictionaries(st.sampled_from(PYPROJECT_KEYS), values, min_size=1, max_size=6))
def test_pyproject_with_values_of_every_type_never_crashes(assignments):
    tables: dict[str, dict[str, Any]] = {}
    for dotted, value in assignments.items():
        table, key = dotted.rsplit(".", 1) if "." in dotted else ("", dotted)
        tables.setdefault(table, {})[key] = value
    lines = [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in tables.pop("", {}).items()]
    for table, kv in tables.items():
        lines.append(f"[{table}]")
        lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in kv.items()]
    _scan("pyproject", "\n".join(lines) + "\n")


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "on",
                "env",
                "jobs",
                "services",
                "steps",
                "strategy",
                "container",
                "runs-on",
                "with",
                "run",
                "matrix",
                "python-version",
            ]
        ),
        values,
        max_size=5,
    ),
    st.sampled_from(["workflow", "compose", "environment.yml"]),
)
def test_yaml_manifests_with_values_of_every_type_never_crash(shape, parser):
    doc: Any = shape
    if parser == "workflow" and shape:
        # the same values one and two levels down, where jobs and steps live
        doc = {"jobs": {"t": dict(shape, steps=[shape, {"run": shape.get("run")}])}, **shape}
    elif parser == "compose" and shape:
        doc = {"services": {"db": shape, "x": shape.get("services")}}
    elif shape:
        doc = {"dependencies": [shape, {"pip": shape.get("steps")}], **shape}
    _scan(parser, yaml.safe_dump(doc, allow_unicode=True))
