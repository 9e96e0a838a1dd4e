"""Pipfile (TOML) and conda environment files."""

from __future__ import annotations

import re

from bot.evidence.files import RepoFiles, line_of, load_toml
from bot.evidence.model import MAIN, TEST, Evidence, PythonConstraint, Source
from bot.evidence.yamlload import load_yaml


def scan(files: RepoFiles, ev: Evidence) -> None:
    _pipfile(files, ev)
    for rel in (
        "environment.yml",
        "environment.yaml",
        "conda.yml",
        "conda.yaml",
        "ci/environment.yml",
        "environment-dev.yml",
        "environment_dev.yml",
    ):
        _conda(files, ev, rel)


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


def _conda(files: RepoFiles, ev: Evidence, rel: str) -> None:
    text = files.read_text(rel)
    if text is None:
        return
    data = load_yaml(ev, rel, text)
    if not isinstance(data, dict):
        return
    deps = data.get("dependencies") or []
    if not isinstance(deps, list):
        ev.warn(rel, None, "dependencies is not a list; ignored")
        return
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
