"""CircleCI (.circleci/config.yml), read as a GitHub workflow is (bot.evidence.workflows): the
Python versions of its primary images (``cimg/python:3.11``, with ``<< parameters.v >>``
filled from its parameters' defaults and its workflows' matrices), the services of its
secondary images with their environment, job and executor environment, and its run steps
(apt and pip lines, test commands). Steps that run in the background start daemons beside the
tests, which setupbot does not start, and are left out."""

from __future__ import annotations

import itertools
import re
from typing import Any

from bot.evidence import shellcmd
from bot.evidence.files import RepoFiles, line_of
from bot.evidence.model import Evidence, PythonConstraint, ServiceRequirement, Source
from bot.evidence.services import service_kind
from bot.evidence.yamlload import load_yaml

CIRCLECI = ".circleci/config.yml"
# CircleCI's pipeline values: ``<< parameters.v >>``, ``<< matrix.v >>``, ``<< pipeline.git.branch >>``
_PARAM = re.compile(r"<<\s*(parameters|matrix|pipeline)\.([A-Za-z0-9_.-]+)\s*>>")
_PYTHON_IMAGE = re.compile(r"^(?:cimg/python|circleci/python|python|library/python):(3\.\d+)")
_TEST_JOB = re.compile(r"test|pytest|check|\bci\b", re.I)
# an image with more combinations of parameter values than this names only its first ones
MAX_EXPANSIONS = 16


def scan(files: RepoFiles, ev: Evidence) -> None:
    text = files.read_text(CIRCLECI)
    if text is not None:
        scan_text(ev, text)


def scan_text(ev: Evidence, text: str) -> None:
    data = load_yaml(ev, CIRCLECI, text)
    if data is None:
        return
    if not isinstance(data, dict):
        ev.warn(CIRCLECI, None, "not a mapping; ignored")
        return
    values = _parameter_values(data)
    executors = _mapping(data.get("executors"))
    seen_images: set[tuple[int, str]] = set()
    for name, executor in executors.items():
        if isinstance(executor, dict):
            _environment(ev, text, executor.get("environment"), f"executor {name} environment")
            _images(ev, text, executor.get("docker"), values, seen_images)
    commands = {k: v for k, v in _mapping(data.get("commands")).items() if isinstance(v, dict)}
    done: set[str] = set()
    for name, job in _mapping(data.get("jobs")).items():
        if not isinstance(job, dict) or not _tests(name, job.get("steps")):
            continue  # a deploy or lint job: its variables and packages are not the tests'
        _environment(ev, text, job.get("environment"), f"job {name} environment")
        _images(ev, text, job.get("docker"), values, seen_images)
        _steps(ev, text, job.get("steps"), f"CircleCI job {name}", commands, done)


def _mapping(value: Any) -> dict[str, Any]:
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def _parameter_values(data: dict[str, Any]) -> dict[str, list[str]]:
    """Every value a parameter may take: the defaults of the parameters that executors, jobs
    and commands declare, and the values the workflows pass (``v: "3.9"``) or sweep
    (``matrix: {parameters: {v: [...]}}``)."""
    values: dict[str, list[str]] = {}

    def add(name: str, value: Any) -> None:
        for v in value if isinstance(value, list) else [value]:
            text = _scalar(v)
            if text is not None and text not in values.setdefault(name, []):
                values[name].append(text)

    for section in ("executors", "jobs", "commands"):
        for holder in _mapping(data.get(section)).values():
            params = holder.get("parameters") if isinstance(holder, dict) else None
            for name, spec in _mapping(params).items():
                if isinstance(spec, dict) and "default" in spec:
                    add(name, spec["default"])
    for workflow in _mapping(data.get("workflows")).values():
        jobs = workflow.get("jobs") if isinstance(workflow, dict) else None
        for entry in jobs if isinstance(jobs, list) else []:
            for args in entry.values() if isinstance(entry, dict) else []:
                if not isinstance(args, dict):
                    continue
                for name, value in args.items():
                    if name not in ("name", "requires", "filters", "context", "matrix", "type"):
                        add(str(name), value)
                matrix = args.get("matrix")
                params = matrix.get("parameters") if isinstance(matrix, dict) else None
                for name, value in _mapping(params).items():
                    add(name, value)
    return values


def _expand(template: str, values: dict[str, list[str]]) -> list[str]:
    """``template`` with each ``<< parameters.x >>`` (or ``<< matrix.x >>``) filled with each
    value ``x`` may take; [] when one has no known value."""
    names = list(dict.fromkeys(m.group(2) for m in _PARAM.finditer(template)))
    if not names:
        return [template]
    choices = [values.get(n) or [] for n in names]
    out = []
    for combo in itertools.islice(itertools.product(*choices), MAX_EXPANSIONS):
        out.append(_fill(template, dict(zip(names, combo, strict=True))))
    return [t for t in out if not _PARAM.search(t)]


def _fill(template: str, filled: dict[str, str]) -> str:
    return _PARAM.sub(lambda m: filled.get(m.group(2), m.group(0)), template)


def _images(ev: Evidence, text: str, docker: Any, values: dict[str, list[str]], seen: set[tuple[int, str]]) -> None:
    """The primary image (the first) gives the Python version; the others are services that
    share its network, reached on localhost."""
    if not isinstance(docker, list):
        return
    for index, entry in enumerate(docker):
        image = entry.get("image") if isinstance(entry, dict) else None
        if not isinstance(image, str) or not image.strip():
            continue
        line = line_of(text, image)
        for concrete in _expand(image.strip(), values):
            if (index, concrete) in seen:
                continue
            seen.add((index, concrete))
            if index == 0:
                m = _PYTHON_IMAGE.match(concrete)
                if m:
                    ev.python.append(
                        PythonConstraint("tested", m.group(1), Source(CIRCLECI, line, f"image {concrete}"))
                    )
                _environment(ev, text, entry.get("environment"), "primary container environment")
                continue
            _service(ev, text, concrete, entry, line)


def _service(ev: Evidence, text: str, image: str, entry: dict[str, Any], line: int | None) -> None:
    kind = service_kind(image, str(entry.get("name") or ""))
    name = str(entry.get("name") or "") or kind
    if kind == "other":
        ev.warn(CIRCLECI, line, f"CircleCI service image {image!r} is not one setupbot can start; ignored")
        return
    if any(s.kind == kind and s.name == name for s in ev.services):
        return  # a matrix over its versions names one service: its first version, under one name
    env = {}
    for key, value in _mapping(entry.get("environment")).items():
        text_value = _scalar(value)
        if text_value is not None and not _PARAM.search(text_value) and "$" not in text_value:
            env[key] = text_value
    ev.services.append(
        ServiceRequirement(name, kind, image, [], env, [Source(CIRCLECI, line, f"CircleCI service {image}")])
    )


def _environment(ev: Evidence, text: str, env: Any, what: str) -> None:
    """Plain values only: one that names a parameter, a variable or a command is left out."""
    for key, value in _mapping(env).items():
        text_value = _scalar(value)
        if text_value is None or _PARAM.search(text_value) or re.search(r"[$`\\\n]", text_value):
            continue
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            ev.env.setdefault(key, (text_value, Source(CIRCLECI, line_of(text, f"{key}:"), f"CircleCI {what}")))


def _run_command(step: Any) -> str | None:
    """The shell text of a ``run`` step, None for another step or one run in the background."""
    run = step.get("run") if isinstance(step, dict) else None
    if isinstance(run, dict):
        return None if run.get("background") is True else run.get("command")
    return run if isinstance(run, str) else None


def _tests(name: str, steps: Any) -> bool:
    """A job that runs the tests: its name says so, or one of its own run steps is a test command."""
    if _TEST_JOB.search(name):
        return True
    lines = (_run_command(s) or "" for s in (steps if isinstance(steps, list) else []))
    return any(shellcmd.test_command(cmd) for line in lines for cmd in shellcmd.commands(_PARAM.sub("", line)))


def _steps(
    ev: Evidence, text: str, steps: Any, detail: str, commands: dict[str, dict[str, Any]], done: set[str]
) -> None:
    """A job's run steps, and those of the reusable commands it invokes (each once)."""
    for step in steps if isinstance(steps, list) else []:
        invoked = step if isinstance(step, str) else next(iter(step), None) if isinstance(step, dict) else None
        if isinstance(invoked, str) and invoked in commands and invoked not in done:
            done.add(invoked)
            _steps(ev, text, commands[invoked].get("steps"), f"CircleCI command {invoked}", commands, done)
            continue
        command = _run_command(step)  # a step in the background is a daemon, not a setup step
        if not isinstance(command, str) or not command.strip():
            continue
        first = command.strip().splitlines()[0][:60]
        shellcmd.record_shell(ev, _PARAM.sub("", command), CIRCLECI, line_of(text, first), detail, tests=True, ci=True)
