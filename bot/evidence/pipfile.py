"""Pipfile (TOML) and conda environment files."""

from __future__ import annotations

import re

from bot.evidence.files import RepoFiles, line_of, load_toml
from bot.evidence.model import MAIN, TEST, Evidence, PythonConstraint, Source
from bot.evidence.yamlload import load_yaml

CONDA_FILES = (
    "environment.yml",
    "environment.yaml",
    "conda.yml",
    "conda.yaml",
    "ci/environment.yml",
    "environment-dev.yml",
    "environment_dev.yml",
)
# another name a conda environment file goes by (conda_environment.yaml, conda/env.yml, ...),
# in the folders such files live in; a variant for another platform or purpose is not the one
_CONDA_NAME = re.compile(r"(?:^|[-_.])(?:environment|conda|env)(?:[-_.]|$)", re.I)
_CONDA_FOLDERS = ("", "conda/", "binder/", ".binder/", "ci/", "envs/")
_VARIANT = re.compile(
    r"(?:^|[-_.])(?:win\w*|mac\w*|osx|darwin|arm\w*|m1|gpu|cuda|rocm|docs?|rtd|readthedocs)(?:[-_.]|$)", re.I
)


def scan(files: RepoFiles, ev: Evidence) -> None:
    _pipfile(files, ev)
    found = [rel for rel in CONDA_FILES if _conda(files, ev, rel)]
    if not found:
        other = conda_file(files.all_files())
        if other:
            _conda(files, ev, other, named=False)


def conda_file(names: list[str]) -> str | None:
    """The conda environment file of a repository whose file has none of the usual names: a YAML
    file named like one (conda_environment.yaml) at the top or in a folder such files live in,
    not a variant for another platform or for the docs; the first such by name."""
    for folder in _CONDA_FOLDERS:
        for rel in sorted(names):
            if not rel.startswith(folder) or "/" in rel[len(folder) :]:
                continue
            stem, dot, ext = rel[len(folder) :].rpartition(".")
            if dot and ext.lower() in ("yml", "yaml") and _CONDA_NAME.search(stem) and not _VARIANT.search(stem):
                return rel
    return None


def _pipfile(files: RepoFiles, ev: Evidence) -> None:
    rel = "Pipfile"
    loaded = load_toml(files, rel, ev, "TOML")
    if loaded is None:
        return
    text, data = loaded
    ev.project.manager = ev.project.manager or "pipenv"
    for section, group in (("packages", MAIN), ("dev-packages", TEST)):
        table = data.get(section) or {}
        start = line_of(text, f"[{section}]") or 1
        for name, value in table.items() if isinstance(table, dict) else []:
            version = (
                value if isinstance(value, str) else (value.get("version", "*") if isinstance(value, dict) else "*")
            )
            if isinstance(value, dict) and ("path" in value or "editable" in value and "git" not in value):
                continue
            spec = name + ("" if version in ("*", "") else (version if version[0] in "<>=!~" else f"=={version}"))
            ev.add_requirement(spec, group, Source(rel, line_of(text, name, start), f"Pipfile [{section}]"))
    py = (data.get("requires") or {}).get("python_version")
    if isinstance(py, str) and re.match(r"^3\.\d+", py):
        ev.python.append(
            PythonConstraint(
                "pin",
                ".".join(py.split(".")[:2]),
                Source(rel, line_of(text, "python_version"), "Pipfile python_version"),
            )
        )


def _conda(files: RepoFiles, ev: Evidence, rel: str, named: bool = True) -> bool:
    """Read ``rel`` as a conda environment file; whether it is one (a mapping; one found by a
    name less certain than ``CONDA_FILES`` must also have dependencies)."""
    text = files.read_text(rel)
    if text is None:
        return False
    data = load_yaml(ev, rel, text)
    if not isinstance(data, dict) or not (named or isinstance(data.get("dependencies"), list)):
        return False
    deps = data.get("dependencies") or []
    if not isinstance(deps, list):
        ev.warn(rel, None, "dependencies is not a list; ignored")
        return True
    ev.project.manager = ev.project.manager or "conda"
    for dep in deps:
        if isinstance(dep, dict) and isinstance(dep.get("pip"), list):
            for spec in dep["pip"]:
                if isinstance(spec, str) and not spec.startswith("-"):
                    ev.add_requirement(spec, MAIN, Source(rel, line_of(text, spec), "environment pip"))
            continue
        if not isinstance(dep, str):
            continue
        name = re.split(r"[=<>!\s]", dep.split("::")[-1], maxsplit=1)[0]
        if name == "python":
            m = re.search(r"3\.\d+", dep)
            if m:
                ev.python.append(PythonConstraint("pin", m.group(0), Source(rel, line_of(text, dep), "conda python")))
            continue
        if name in ("pip", "setuptools", "wheel") or not name:
            continue
        spec = re.sub(r"(?<![=<>!])=(?!=)", "==", dep.split("::")[-1].replace(" ", ""))
        spec = re.sub(r"==([0-9.]+)\*$", r"==\1*", spec)
        ev.add_requirement(
            spec if not spec.endswith(".*") else spec, "conda", Source(rel, line_of(text, dep), "conda dependency")
        )
    return True
