"""GitHub workflow files: setup-python versions and matrices, services, apt-get lines, env,
test commands."""

from __future__ import annotations

import re
from typing import Any

from bot.evidence import shellcmd
from bot.evidence.files import RepoFiles, line_of
from bot.evidence.model import Evidence, PythonConstraint, ServiceRequirement, Source
from bot.evidence.services import service_kind
from bot.evidence.yamlload import load_yaml

_EXPR = re.compile(r"\$\{\{.*?\}\}")


def scan(files: RepoFiles, ev: Evidence) -> None:
    for rel in files.all_files():
        if rel.startswith(".github/workflows/") and rel.endswith((".yml", ".yaml")) and rel.count("/") == 2:
            text = files.read_text(rel)
            if text is not None:
                scan_text(ev, rel, text)


def _versions(value: Any) -> list[str]:
    vals = value if isinstance(value, list) else [value]
    out = []
    for v in vals:
        m = re.match(r"^\s*(?:cpython-)?(3\.\d+)", str(v))
        if m:
            out.append(m.group(1))
    return out


def _literal_env(env: Any) -> dict[str, str]:
    out = {}
    if isinstance(env, dict):
        for k, v in env.items():
            if isinstance(v, (str, int, float)) and not isinstance(v, bool) and not _EXPR.search(str(v)):
                out[str(k)] = str(v)
            elif isinstance(v, bool):
                out[str(k)] = "true" if v else "false"
    return out


def scan_text(ev: Evidence, rel: str, text: str) -> None:
    data = load_yaml(ev, rel, text)
    if data is None:
        return
    if not isinstance(data, dict):
        ev.warn(rel, None, "a workflow must be a mapping; ignored")
        return
    jobs = data.get("jobs")
    if not isinstance(jobs, dict):
        ev.warn(rel, None, "no jobs mapping; ignored")
        return
    for k, v in _literal_env(data.get("env")).items():
        ev.env.setdefault(k, (v, Source(rel, line_of(text, f"{k}:"), "workflow env")))
    cwd = _working_directory(data, "")
    for job_name, job in jobs.items():
        if isinstance(job, dict):
            _scan_job(ev, rel, text, job_name, job, cwd)


def _working_directory(holder: Any, inherited: str) -> str:
    """The folder a workflow's, a job's (``defaults.run.working-directory``) or a step's
    (``working-directory``) shell lines run in, when it is not the checkout's root: their
    relative paths are relative to it."""
    wd: Any = None
    if isinstance(holder, dict):
        wd = holder.get("working-directory")
        defaults = holder.get("defaults")
        if wd is None and isinstance(defaults, dict) and isinstance(defaults.get("run"), dict):
            wd = defaults["run"].get("working-directory")
    if not isinstance(wd, str):
        return inherited
    wd = wd.strip().removeprefix("./").rstrip("/")
    return "" if wd in ("", ".") else wd


def _matrix_pythons(strategy: Any) -> list[str]:
    """The Python versions of a job's strategy matrix, its ``include`` entries after its axes."""
    matrix = strategy.get("matrix") if isinstance(strategy, dict) else None
    matrix_py: list[str] = []
    if isinstance(matrix, dict):
        for key in ("python-version", "python", "python_version", "py", "pyver", "python-versions"):
            if key in matrix:
                matrix_py += _versions(matrix[key])
        for inc in matrix.get("include") or []:
            if isinstance(inc, dict):
                for key in ("python-version", "python", "python_version", "py"):
                    if key in inc:
                        matrix_py += _versions(inc[key])
    return matrix_py


def _checkout_path(steps: Any) -> str:
    """Where a job checks the repository out (``actions/checkout`` with ``path:``), when not
    at the workspace's root: a working-directory of that folder is the checkout's root."""
    for step in steps if isinstance(steps, list) else []:
        if isinstance(step, dict) and str(step.get("uses") or "").startswith("actions/checkout"):
            given = step.get("with")
            with_: dict[str, Any] = given if isinstance(given, dict) else {}
            if with_.get("repository") not in (None, "", "${{ github.repository }}"):
                continue  # another repository's checkout
            path = with_.get("path")
            return path.strip().removeprefix("./").rstrip("/") if isinstance(path, str) else ""
    return ""


def _relative_to_checkout(wd: str, checkout: str) -> str:
    """``wd`` (the workspace's folder a line runs in) as a folder of the checkout; "" for its
    root. A folder outside the checkout keeps its name, so it is never read as the root."""
    if not checkout:
        return wd
    if wd == checkout:
        return ""
    if wd.startswith(checkout + "/"):
        return wd[len(checkout) + 1 :]
    return wd or "(the workspace)"


def _scan_job(ev: Evidence, rel: str, text: str, job_name: Any, job: dict, cwd: str = "") -> None:
    cwd = _working_directory(job, cwd)
    checkout = _checkout_path(job.get("steps"))
    job_line = line_of(text, f"{job_name}:")
    test_job = bool(re.search(r"test|pytest|ci|check|build", str(job_name), re.I))
    for v in _matrix_pythons(job.get("strategy") or {}):
        ev.python.append(
            PythonConstraint("tested", v, Source(rel, line_of(text, v, job_line or 1), f"CI matrix {job_name}"))
        )
    for k, v in _literal_env(job.get("env")).items():
        ev.env.setdefault(k, (v, Source(rel, line_of(text, f"{k}:", job_line or 1), f"job {job_name} env")))
    services = job.get("services")
    if isinstance(services, dict):
        for name, svc in services.items():
            _service(ev, rel, text, str(name), svc, job_line)
    for step in job.get("steps") or []:
        if isinstance(step, dict):
            _scan_step(ev, rel, text, job_name, job_line, test_job, step, cwd, checkout)


def _scan_step(
    ev: Evidence,
    rel: str,
    text: str,
    job_name: Any,
    job_line: int | None,
    test_job: bool,
    step: dict,
    cwd: str = "",
    checkout: str = "",
) -> None:
    uses = str(step.get("uses") or "")
    if uses.startswith("actions/setup-python") and isinstance(step.get("with"), dict):
        for v in _versions(step["with"].get("python-version")):
            ev.python.append(
                PythonConstraint(
                    "tested", v, Source(rel, line_of(text, "python-version", job_line or 1), "setup-python")
                )
            )
    run = step.get("run")
    if isinstance(run, str):
        run_line = line_of(text, run.splitlines()[0][:60], job_line or 1) if run.strip() else None
        shellcmd.record_shell(
            ev,
            _EXPR.sub("", run),
            rel,
            run_line,
            f"workflow {job_name}",
            tests=True,
            cwd=_relative_to_checkout(_working_directory(step, cwd), checkout),
        )
    if (
        isinstance(step.get("env"), dict)
        and test_job
        and isinstance(run, str)
        and shellcmd.test_command(run.strip().splitlines()[-1] if run.strip() else "")
    ):
        for k, v in _literal_env(step["env"]).items():
            ev.env.setdefault(k, (v, Source(rel, line_of(text, f"{k}:", job_line or 1), "test step env")))


def _service(ev: Evidence, rel: str, text: str, name: str, svc: Any, job_line: int | None) -> None:
    if isinstance(svc, str):
        svc = {"image": svc}
    if not isinstance(svc, dict) or not isinstance(svc.get("image"), str):
        ev.warn(rel, line_of(text, f"{name}:", job_line or 1), f"service {name!r} has no image; ignored")
        return
    image = svc["image"]
    if _EXPR.search(image):
        ev.warn(rel, line_of(text, image), f"service {name!r} image is an expression ({image}); ignored")
        return
    ports = [str(p) for p in (svc.get("ports") or []) if not _EXPR.search(str(p))]
    line = line_of(text, image, job_line or 1)
    ev.services.append(
        ServiceRequirement(
            name,
            service_kind(image, name),
            image,
            ports,
            _literal_env(svc.get("env")),
            [Source(rel, line, f"CI service {name}")],
        )
    )
