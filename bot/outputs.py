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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot import safefs
from bot.compile import compile_dockerfile
from bot.compile.compose import (
    app_environment,
    app_service_name,
    base_compose,
    compose_services,
    context_for,
    render_compose,
)
from bot.compile.devcontainer import build_devcontainer, render_devcontainer
from bot.errors import InputError
from bot.incremental import InputFiles, environment_inputs
from bot.markers import (
    COMPOSE,
    DEVCONTAINER,
    DOCKERFILE,
    DOCKERIGNORE,
    LOCK,
    MARKER_TEXT,
    PLAN,
    REPORT,
    check_output_dir,
    has_marker,
)
from bot.report.model import ReportData, default_reproduce, from_pipeline
from bot.report.render import render_report
from bot.report.timeline import TIMELINE_FILE, render_timeline_svg

log = logging.getLogger(__name__)

DOCKERFILE_MARKER = f"# {MARKER_TEXT}: remove this line to keep your own version"


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


# What the build context must never carry into an image (issue 15): git metadata (actions/checkout
# leaves the token in .git/config), env files, private keys, setupbot's own run records.
DOCKERIGNORE_PATTERNS = (
    ".git",
    "**/.git",
    ".env",
    ".env.*",
    "**/.env",
    "**/.env.*",
    "*.pem",
    "**/*.pem",
    "*.key",
    "**/*.key",
    "id_rsa*",
    "**/id_rsa*",
    "id_ed25519*",
    "**/id_ed25519*",
    ".setupbot",
    ".netrc",
    "**/.netrc",
    # committed templates of env files hold documentation, not credentials, and
    # test setups copy them (`cp .env.example .env`)
    "!.env.example",
    "!.env.sample",
    "!.env.template",
    "!.env.dist",
    # a key or certificate in a test folder is a fixture the repository commits (pyHanko's
    # pyhanko_tests/data/crypto/keys-rsa/*.key.pem): its tests read it, and the image holds the
    # rest of the source anyway. What a runner step leaves beside the checkout stays out
    "!**/*test*/**/*.pem",
    "!**/*test*/**/*.key",
    "!**/fixtures/**/*.pem",
    "!**/fixtures/**/*.key",
)


def render_dockerignore(copied: Iterable[str] = ()) -> str:
    """The generated .dockerignore (repository root, the build context of every Dockerfile
    setupbot writes). A file the Dockerfile COPYs by name that a pattern would hide gets a
    ``!`` exception, so the compiled Dockerfile still builds with it."""
    import fnmatch

    lines = [
        f"# {MARKER_TEXT}: remove this line to keep your own version",
        "# Keeps credentials and local state out of the build context.",
        *DOCKERIGNORE_PATTERNS,
    ]
    for src in sorted(set(copied)):
        clean = src.strip("/")
        if clean in ("", ".") or any(c in clean for c in "*?[!\n"):
            continue
        if any(
            fnmatch.fnmatch(clean, pat.replace("**/", "*")) or fnmatch.fnmatch(clean.rsplit("/", 1)[-1], pat)
            for pat in DOCKERIGNORE_PATTERNS
            if not pat.startswith("!")
        ):
            lines.append(f"!{clean}")
    return "\n".join(lines) + "\n"


def copied_sources(dockerfile_text: str) -> list[str]:
    """The sources of the COPY instructions of a Dockerfile (shell or JSON form)."""
    out: list[str] = []
    for line in dockerfile_text.splitlines():
        words = line.strip()
        if not words.upper().startswith("COPY "):
            continue
        rest = words[5:].strip()
        if rest.startswith("["):
            try:
                args = [str(a) for a in json.loads(rest)]
            except ValueError:
                continue
        else:
            args = [a for a in rest.split() if not a.startswith("--")]
        out += args[:-1]
    return out


def fingerprint_files(files: dict[str, str], exclude: Iterable[str] = ()) -> str:
    """A stable hash of what setupbot proposes. Every file is a pure function of the inputs (no
    timings, dates or run ids), so the same repository state gives the same fingerprint."""
    skip = set(exclude)
    digest = hashlib.sha256()
    for path in sorted(files):
        if path in skip:
            continue
        digest.update(path.encode() + b"\0" + files[path].encode() + b"\0")
    return digest.hexdigest()[:32]


def unified_diff(path: str, old: str, new: str) -> str:
    return (
        "".join(
            difflib.unified_diff(
                old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=f"a/{path}", tofile=f"b/{path}"
            )
        )
        or "(no change)\n"
    )


@dataclass
class GeneratedOutputs:
    files: dict[str, str]  # repository-relative path -> content (marked files only)
    report: ReportData
    fingerprint: str
    report_path: str
    kept: dict[str, str] = field(default_factory=dict)  # hand-written path -> diff not applied
    not_written: dict[str, str] = field(default_factory=dict)  # path setupbot may not write -> why
    note: str = ""  # e.g. "environment inputs unchanged since <sha>"
    # files that describe this run rather than the environment (the stage timeline): they go with
    # the environment, but a change in them alone is no change (not in the fingerprint, no drift,
    # no pull request of their own)
    volatile: list[str] = field(default_factory=list)


ExistingReader = Callable[[str], "str | None"]
CustomiseDevcontainer = Callable[[dict[str, Any], Any], dict[str, Any]]


@dataclass
class _Placement:
    """Where each rendered file goes: into ``files`` to be written; when a person wrote the
    file at that path (no marker), into ``kept`` as the diff setupbot does not apply; when the
    path is or lies under a symlink, into ``not_written`` with why."""

    existing: ExistingReader | None
    files: dict[str, str] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)
    not_written: dict[str, str] = field(default_factory=dict)

    def place(self, path: str, text: str) -> bool:
        """File ``text`` at ``path``; False when the file there is kept or may not be written."""
        current = self.existing(path) if self.existing else None
        if current == SYMLINK_PLACEHOLDER:
            self.not_written[path] = SYMLINK_REASON
            return False
        if current is not None and not has_marker(current):
            self.kept[path] = unified_diff(path, current, text)
            return False
        self.files[path] = text
        return True


def generate_outputs(
    report: ReportData,
    *,
    dockerfile_text: str,
    plan_json: Any = None,
    services: Iterable[Any] = (),
    app_env: dict[str, str] | None = None,
    output_dir: str = ".devcontainer",
    project: str = "",
    post_create: list[str] | None = None,
    lock_text: str = "",
    existing: ExistingReader | None = None,
    inputs: dict[str, Any] | None = None,
    customise_devcontainer: CustomiseDevcontainer | None = None,
    timeline_steps: Iterable[dict[str, Any]] = (),
) -> GeneratedOutputs:
    """Render every output file. ``existing(path)`` returns the current content at a
    repository-relative path (a checkout or the base branch through the API) or None.
    ``customise_devcontainer(config, plan_json)`` adds to the devcontainer.json dict (the
    ecosystems' editor extensions; the caller passes ``bot.ecosystems.devcontainer_for``).
    ``inputs`` (``bot.incremental.environment_inputs``) goes into the plan JSON, so the next run
    can tell whether anything the plan read has changed. ``timeline_steps`` (the trajectory,
    ``Step.to_json()`` dicts) become the stage timeline SVG next to the report."""
    out = check_output_dir(output_dir)
    services = list(services)
    name = project or report.repository or "setupbot environment"
    env_files = _environment_files(
        report,
        out,
        name,
        dockerfile_text=dockerfile_text,
        plan_json=plan_json,
        services=services,
        app_env=app_env,
        post_create=post_create,
        lock_text=lock_text,
        existing=existing,
        customise_devcontainer=customise_devcontainer,
    )
    placement = _Placement(existing)
    for path, text in env_files.items():
        placement.place(path, text)
    files = placement.files
    if plan_json is not None:
        text = render_plan_json(plan_json, report, inputs=inputs, outputs={p: _sha(t) for p, t in files.items()})
        placement.place(f"{out}/{PLAN}", text)

    volatile = _place_timeline(placement, report, out, name, timeline_steps)
    report_path = _place_report(placement, report, out, services)
    return GeneratedOutputs(
        files=files,
        report=report,
        report_path=report_path,
        kept=placement.kept,
        not_written=placement.not_written,
        fingerprint=fingerprint_files(files, exclude=volatile),
        volatile=volatile,
    )


def _environment_files(
    report: ReportData,
    out: str,
    name: str,
    *,
    dockerfile_text: str,
    plan_json: Any,
    services: list[Any],
    app_env: dict[str, str] | None,
    post_create: list[str] | None,
    lock_text: str,
    existing: ExistingReader | None,
    customise_devcontainer: CustomiseDevcontainer | None,
) -> dict[str, str]:
    """The files that make the environment (Dockerfile, devcontainer.json, compose file, lock,
    .dockerignore), by repository-relative path, before any is checked against what is there."""
    env_files: dict[str, str] = {f"{out}/{DOCKERFILE}": mark_dockerfile(dockerfile_text)}
    # the repository's own compose file is extended, not copied (issue 16)
    base_file, base_names = base_compose(services) if services else (None, {})
    base_services = _compose_service_names(existing(base_file) if existing and base_file else None)
    if base_file and not base_services:
        base_file, base_names = None, {}
    app_name = app_service_name(base_services)
    devcontainer = build_devcontainer(
        name=name,
        test_command=report.test_command or ["python", "-m", "pytest"],
        services=[c.name for c in compose_services(services, base_names)],  # the compose keys, exactly
        env=None if services else app_env,
        post_create=post_create,
        context=context_for(out),
        compose_files=[f"{context_for(out)}/{base_file}"] if base_file else [],
        app_service=app_name,
    )
    if customise_devcontainer is not None:
        # the plan's ecosystems add their editor extensions (bot.ecosystems.devcontainer_for)
        devcontainer = customise_devcontainer(devcontainer, plan_json)
    env_files[f"{out}/{DEVCONTAINER}"] = render_devcontainer(devcontainer)
    if services:
        env_files[f"{out}/{COMPOSE}"] = render_compose(
            services=services,
            app_env=app_env,
            output_dir=out,
            base_names=base_names,
            app_name=app_name,
            # the plan says whether its image can run the localhost relay (a Python program)
            relay=not isinstance(plan_json, dict) or plan_json.get("localhost_relay", True) is not False,
        )
    if lock_text:
        env_files[f"{out}/{LOCK}"] = lock_text
    env_files[DOCKERIGNORE] = render_dockerignore(copied_sources(dockerfile_text))
    return env_files


def _place_timeline(
    placement: _Placement, report: ReportData, out: str, name: str, timeline_steps: Iterable[dict[str, Any]]
) -> list[str]:
    """Place the stage timeline SVG when there are steps; returns the volatile paths."""
    volatile: list[str] = []
    report.timeline = ""
    steps = list(timeline_steps)
    if steps:
        # the timeline's durations change on every run, so it stays out of the plan's output hashes
        # and out of the fingerprint; the report links it only when setupbot writes it
        svg_path = f"{out}/{TIMELINE_FILE}"
        svg = render_timeline_svg(steps, title=f"stage timeline: {name}")
        if placement.place(svg_path, svg):
            volatile.append(svg_path)
            report.timeline = TIMELINE_FILE
    return volatile


def _place_report(placement: _Placement, report: ReportData, out: str, services: list[Any]) -> str:
    """Render the setup report over everything placed so far and place it; returns its path."""
    report_path = f"{out}/{REPORT}"
    report.output_dir = out
    report.reproduce = default_reproduce(out, report.test_command, services=bool(services))
    report.files = [*placement.files, report_path]
    report.pending_changes = dict(placement.kept)
    report.not_written = dict(placement.not_written)
    report_text = render_report(report)
    if not placement.place(report_path, report_text):
        report.files.remove(report_path)
    return report_path


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def render_plan_json(
    plan_json: Any, report: ReportData, *, inputs: dict[str, Any] | None = None, outputs: dict[str, str] | None = None
) -> str:
    """The committed plan: the plan itself, what it read (``inputs``), what was verified (the
    base branch's record a pull request is compared with) and the hash of each environment file.
    No timings, dates or run ids: the same inputs give the same bytes."""
    data: dict[str, Any] = {
        "_setupbot": f"{MARKER_TEXT}; the plan behind this environment",
        "plan": scrub_volatile(plan_json),
    }
    if inputs is not None:
        data["inputs"] = inputs
    data["verified"] = {
        "verdict": report.verdict,
        "replay_ok": report.replay_ok,
        "tests": {
            "collected": report.tests.collected,
            "passed": report.tests.passed,
            "failed": report.tests.failed,
            "skipped": report.tests.skipped,
            "errors": report.tests.errors,
        },
    }
    if outputs:
        data["outputs"] = dict(sorted(outputs.items()))
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


SYMLINK_PLACEHOLDER = "(symlink: setupbot leaves it alone)"
SYMLINK_REASON = "it is, or lies under, a symlink; setupbot neither follows nor writes through one"


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
        target = root / path
        # A symlink in the output folder is never followed: reported as a hand-written file.
        if target.is_symlink() or not target.resolve().is_relative_to(root):
            return SYMLINK_PLACEHOLDER
        try:
            return safefs.read_text(root, path, max_bytes=4 * 1024 * 1024)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except safefs.UnsafePath:
            return SYMLINK_PLACEHOLDER
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc}") from exc

    return read


def prepare_build_context(repo: Path) -> str | None:
    """Put the generated .dockerignore in place before the first build, so the working and
    replay images never take .git/config or env files in either. A hand-written .dockerignore
    (no marker) is left alone; the returned note says so."""
    current = disk_reader(repo)(DOCKERIGNORE)
    if current is not None and not has_marker(current):
        return f"{DOCKERIGNORE} is the repository's own (no setupbot marker): setupbot did not change it"
    text = render_dockerignore()
    if current != text:
        try:
            safefs.write_text(repo, DOCKERIGNORE, text, allowed=[DOCKERIGNORE])
        except (safefs.UnsafePath, OSError) as exc:
            return f"{DOCKERIGNORE} not written: {getattr(exc, 'what', exc)}"
    return None


@dataclass
class WriteResult:
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)
    not_written: dict[str, str] = field(default_factory=dict)


def write_outputs(repo: Path, generated: GeneratedOutputs) -> WriteResult:
    """Write the generated files into the checkout, re-checking each marker right before writing
    (a person may have taken a file over since the outputs were generated)."""
    result = WriteResult(kept=dict(generated.kept), not_written=dict(generated.not_written))
    read = disk_reader(repo)
    allowed = [check_output_dir(generated.report.output_dir or ".devcontainer"), DOCKERIGNORE]
    for path, text in generated.files.items():
        current = read(path)
        if current == SYMLINK_PLACEHOLDER:  # became a symlink since the outputs were generated
            result.not_written[path] = SYMLINK_REASON
            continue
        if current is not None and not has_marker(current):
            result.kept[path] = unified_diff(path, current, text)
            continue
        if current == text:
            result.unchanged.append(path)
            continue
        try:
            # the one safe writer: inside the output folder (or the repository-root
            # .dockerignore) only, and never through a symlinked folder or file
            safefs.write_text(repo, path, text, allowed=allowed)
        except safefs.UnsafePath as exc:
            result.not_written[path] = exc.what
            log.warning("outputs: %s", exc.what)
            continue
        result.written.append(path)
    log.info(
        "outputs: %d written, %d unchanged, %d hand-written kept, %d not written",
        len(result.written),
        len(result.unchanged),
        len(result.kept),
        len(result.not_written),
    )
    return result


# Plan fields that differ between two runs over the same inputs (where the checkout lives, how long
# each phase took); left out of the committed plan so an unchanged repository changes nothing.
VOLATILE_PLAN_KEYS = ("repo", "timings")
# Keys that hold durations or moments wherever they appear (the resolver's ``seconds``).
VOLATILE_KEYS = frozenset({"seconds", "timings", "elapsed", "started_at", "finished_at", "run_id"})


def scrub_volatile(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: scrub_volatile(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [scrub_volatile(v) for v in value]
    return value


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


def outputs_from_pipeline(
    repo: Path,
    *,
    plan: Any = None,
    run_record: Any = None,
    verification: Any = None,
    output_dir: str = ".devcontainer",
    repository: str = "",
    image_size: int | None = None,
    existing: ExistingReader | None = None,
    settings: Any = None,
    gate: str = "",
    refused_config: Iterable[tuple[str, str]] = (),
    customise_devcontainer: CustomiseDevcontainer | None = None,
    input_files: InputFiles | None = None,
) -> GeneratedOutputs:
    """Adapter from the pipeline's records to the files. ``plan`` is a ``bot.graph.Plan``; without
    it the plan JSON kept in the run record is used. The Dockerfile is the run record's final one
    (repairs included) when there is a run record, else the plan's compiled one. ``input_files``:
    the files the ecosystems name as their plan's inputs, recorded with the others."""
    report = from_pipeline(
        plan, run_record, verification, repository=repository, output_dir=output_dir, image_size=image_size
    )
    report.refused_config = [f"{key}: {why}" for key, why in refused_config]
    if gate:
        report.gate = gate
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
            dockerfile_text = compile_dockerfile(source.graph).text
    services = list(_field(source, "services", []) or [])
    app_env = {str(k): str(v) for k, v in dict(_field(source, "env", {}) or {}).items()}
    if services:
        app_env = app_environment(services, app_env)
    return generate_outputs(
        report,
        dockerfile_text=dockerfile_text,
        plan_json=stable_plan_json(source),
        services=services,
        app_env=app_env,
        output_dir=output_dir,
        project=repository or repo.name,
        post_create=_field(source, "post_create_command"),
        lock_text=_field(run_record, "lock_text", "") or "",
        existing=existing or disk_reader(repo),
        inputs=_inputs(repo, settings, input_files),
        customise_devcontainer=customise_devcontainer,
        timeline_steps=trajectory_steps(run_record),
    )


def trajectory_steps(run_record: Any) -> list[dict[str, Any]]:
    """The run's trajectory as ``Step.to_json()`` dicts: from a ``RunRecord`` (its ``Trajectory``)
    or a record already in JSON form (a list of step dicts); none without a run record."""
    trajectory = _field(run_record, "trajectory")
    steps = getattr(trajectory, "steps", trajectory)
    if not isinstance(steps, (list, tuple)):
        return []
    return [s.to_json() if hasattr(s, "to_json") else s for s in steps if hasattr(s, "to_json") or isinstance(s, dict)]


def _inputs(repo: Path, settings: Any, input_files: InputFiles | None = None) -> dict[str, Any] | None:
    try:
        return environment_inputs(repo, settings, input_files)
    except (OSError, InputError) as exc:  # no record: the next run simply does the work again
        log.warning("inputs not recorded: %s", exc)
        return None
