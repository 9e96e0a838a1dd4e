"""The files setupbot writes into the output folder (default ``.devcontainer/``).

Every file setupbot writes carries a marker line. A file at the same path *without* the marker
was written by a person: setupbot never overwrites it, it reports the diff of what it would
change instead (in the setup report, the PR body and the job summary).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from bot.compile.compose import (app_environment, app_service_name, base_compose, compose_services, context_for,
                                 render_compose)
from bot.compile.devcontainer import build_devcontainer, render_devcontainer
from bot.errors import InputError
from bot.report.model import ReportData, default_reproduce, from_pipeline
from bot.report.render import MARKER_TEXT, render_report

log = logging.getLogger(__name__)

DOCKERFILE = "Dockerfile"
DEVCONTAINER = "devcontainer.json"
COMPOSE = "compose.yaml"
REPORT = "setup-report.md"
PLAN = "setupbot-plan.json"
LOCK = "requirements.lock"   # bot.graph.lock.LOCK_NAME
DOCKERFILE_MARKER = f"# {MARKER_TEXT}: remove this line to keep your own version"
# Only the head of a file is searched, so a marker quoted deep in a hand-written file does not
# hand that file over to setupbot.
MARKER_SCAN_LINES = 5


def has_marker(text: str) -> bool:
    return any(MARKER_TEXT in line.lower() for line in text.splitlines()[:MARKER_SCAN_LINES])


def mark_dockerfile(text: str) -> str:
    """Add the marker line, after any parser directives (``# syntax=``, ``# escape=``), which must
    stay first to keep their meaning."""
    if has_marker(text):
        return text
    lines = text.splitlines()
    at = 0
    while at < len(lines) and lines[at].lstrip().lower().startswith(("# syntax=", "# escape=", "# check=")):
        at += 1
    lines.insert(at, DOCKERFILE_MARKER)
    return "\n".join(lines).rstrip("\n") + "\n"


def fingerprint_files(files: dict[str, str], exclude: Iterable[str] = ()) -> str:
    """A stable hash of what setupbot proposes. The report is excluded: its timings change on
    every run, and a run that changes nothing else must change nothing."""
    skip = set(exclude)
    digest = hashlib.sha256()
    for path in sorted(files):
        if path in skip:
            continue
        digest.update(path.encode() + b"\0" + files[path].encode() + b"\0")
    return digest.hexdigest()[:32]


def unified_diff(path: str, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{path}", tofile=f"b/{path}")) or "(no change)\n"


def check_output_dir(output_dir: str) -> str:
    """The output folder comes from settings a repository can write (.github/setupbot.yml): it
    must stay inside the repository and out of .github/workflows/ (SECURITY.md S6)."""
    raw = output_dir.strip() or ".devcontainer"
    out = posixpath.normpath(raw).strip("/")
    inside = not raw.startswith("/") and "\\" not in raw and out not in ("", ".") and not out.startswith("..")
    if not inside or (out + "/").lower().startswith(".github/workflows/"):
        raise InputError(f"output.dir {output_dir!r} must be a folder inside the repository, "
                         "outside .github/workflows/", "Use the default .devcontainer or another relative folder.")
    return out


@dataclass
class GeneratedOutputs:
    files: dict[str, str]                 # repository-relative path -> content (marked files only)
    report: ReportData
    fingerprint: str
    report_path: str
    kept: dict[str, str] = field(default_factory=dict)   # hand-written path -> diff not applied


ExistingReader = Callable[[str], "str | None"]


def generate_outputs(report: ReportData, *, dockerfile_text: str, plan_json: Any = None,
                     services: Iterable[Any] = (), app_env: dict[str, str] | None = None,
                     output_dir: str = ".devcontainer", project: str = "",
                     post_create: list[str] | None = None, lock_text: str = "",
                     existing: ExistingReader | None = None) -> GeneratedOutputs:
    """Render every output file. ``existing(path)`` returns the current content at a
    repository-relative path (a checkout or the base branch through the API) or None."""
    out = check_output_dir(output_dir)
    services = list(services)
    name = project or report.repository or "setupbot environment"
    env_files: dict[str, str] = {f"{out}/{DOCKERFILE}": mark_dockerfile(dockerfile_text)}
    # the repository's own compose file is extended, not copied (issue 16)
    base_file, base_names = base_compose(services) if services else (None, {})
    base_services = _compose_service_names(existing(base_file) if existing and base_file else None)
    if base_file and not base_services:
        base_file, base_names = None, {}
    app_name = app_service_name(base_services)
    env_files[f"{out}/{DEVCONTAINER}"] = render_devcontainer(build_devcontainer(
        name=name, test_command=report.test_command or ["python", "-m", "pytest"],
        services=[c.name for c in compose_services(services, base_names)],   # the compose keys, exactly
        env=None if services else app_env, post_create=post_create, context=context_for(out),
        compose_files=[f"{context_for(out)}/{base_file}"] if base_file else [], app_service=app_name))
    if services:
        env_files[f"{out}/{COMPOSE}"] = render_compose(services=services, app_env=app_env, output_dir=out,
                                                       base_names=base_names, app_name=app_name)
    if lock_text:
        env_files[f"{out}/{LOCK}"] = lock_text
    if plan_json is not None:
        env_files[f"{out}/{PLAN}"] = json.dumps({"_setupbot": f"{MARKER_TEXT}; the plan behind this environment",
                                                 "plan": plan_json}, indent=2, sort_keys=True) + "\n"

    report_path = f"{out}/{REPORT}"
    files: dict[str, str] = {}
    kept: dict[str, str] = {}
    for path, text in env_files.items():
        current = existing(path) if existing else None
        if current is not None and not has_marker(current):
            kept[path] = unified_diff(path, current, text)
            continue
        files[path] = text
    report.output_dir = out
    report.reproduce = default_reproduce(out, report.test_command, services=bool(services))
    report.files = [*files, report_path]
    report.pending_changes = dict(kept)
    report_text = render_report(report)
    current = existing(report_path) if existing else None
    if current is not None and not has_marker(current):
        kept[report_path] = unified_diff(report_path, current, report_text)
        report.files.remove(report_path)
    else:
        files[report_path] = report_text
    return GeneratedOutputs(files=files, report=report, report_path=report_path, kept=kept,
                            fingerprint=fingerprint_files(files, exclude=[report_path]))


def _compose_service_names(text: str | None) -> list[str]:
    """The service names of a repository's compose file (none when it does not parse)."""
    import yaml

    if not text:
        return []
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    services = data.get("services") if isinstance(data, dict) else None
    return [str(k) for k in services] if isinstance(services, dict) else []


def disk_reader(repo: Path) -> ExistingReader:
    root = repo.resolve()

    def read(path: str) -> str | None:
        target = (root / path)
        # A symlink in the output folder pointing outside the repository is never followed.
        if target.is_symlink() or not target.resolve().is_relative_to(root):
            return "(symlink: setupbot leaves it alone)"
        try:
            return target.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc}") from exc

    return read


@dataclass
class WriteResult:
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)


def write_outputs(repo: Path, generated: GeneratedOutputs) -> WriteResult:
    """Write the generated files into the checkout, re-checking each marker right before writing
    (a person may have taken a file over since the outputs were generated)."""
    result = WriteResult(kept=dict(generated.kept))
    read = disk_reader(repo)
    for path, text in generated.files.items():
        current = read(path)
        if current is not None and not has_marker(current):
            result.kept[path] = unified_diff(path, current, text)
            continue
        if current == text:
            result.unchanged.append(path)
            continue
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        result.written.append(path)
    log.info("outputs: %d written, %d unchanged, %d hand-written kept",
             len(result.written), len(result.unchanged), len(result.kept))
    return result


# Plan fields that differ between two runs over the same inputs (where the checkout lives, how long
# each phase took); left out of the committed plan so an unchanged repository changes nothing.
VOLATILE_PLAN_KEYS = ("repo", "timings")


def stable_plan_json(plan: Any) -> Any:
    if hasattr(plan, "to_json"):
        data = plan.to_json()
    elif isinstance(plan, dict):
        data = dict(plan)
    else:
        graph = getattr(plan, "graph", None)
        return graph.to_json() if graph is not None and hasattr(graph, "to_json") else None
    return {k: v for k, v in data.items() if k not in VOLATILE_PLAN_KEYS}


def _field(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def outputs_from_pipeline(repo: Path, *, plan: Any = None, run_record: Any = None, verification: Any = None,
                          output_dir: str = ".devcontainer", repository: str = "",
                          image_size: int | None = None,
                          existing: ExistingReader | None = None) -> GeneratedOutputs:
    """Adapter from the pipeline's records to the files. ``plan`` is a ``bot.graph.Plan``; without
    it the plan JSON kept in the run record is used. The Dockerfile is the run record's final one
    (repairs included) when there is a run record, else the plan's compiled one."""
    report = from_pipeline(plan, run_record, verification, repository=repository,
                           output_dir=output_dir, image_size=image_size)
    source = plan if plan is not None else _field(run_record, "plan")
    if source is None:
        raise InputError("nothing to write: neither a plan nor a run record was given")
    dockerfile_text = _field(run_record, "dockerfile", "") or ""
    if not dockerfile_text:
        compiled = _field(source, "dockerfile")
        if isinstance(compiled, str):
            dockerfile_text = compiled
        elif compiled is not None:
            dockerfile_text = compiled.text
        else:
            from bot.compile import compile_dockerfile  # the compiler is the one source of Dockerfiles

            dockerfile_text = compile_dockerfile(source.graph).text
    services = list(_field(source, "services", []) or [])
    app_env = {str(k): str(v) for k, v in dict(_field(source, "env", {}) or {}).items()}
    if services:
        app_env = app_environment(services, app_env)
    return generate_outputs(report, dockerfile_text=dockerfile_text, plan_json=stable_plan_json(source),
                            services=services, app_env=app_env, output_dir=output_dir,
                            project=repository or repo.name,
                            post_create=_field(source, "post_create_command"),
                            lock_text=_field(run_record, "lock_text", "") or "",
                            existing=existing or disk_reader(repo))
