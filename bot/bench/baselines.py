"""The two baselines setupbot is measured against, rendered through one template
(``templates/bench/declared.Dockerfile.j2``) on the image a person would pick by default.

- ``declared``: what the manifests declare. Every ``requirements*.txt`` at the top level and
  every ``*.txt`` in ``requirements/``, then the project itself (``pip install -e .[extras]``
  with the extras named test/tests/testing/dev that it declares), then pytest.
- ``pipreqs``: requirements inferred from the imports by the PyPI ``pipreqs`` tool (run on the
  host, time-boxed), then pytest. The project itself is not installed: the baseline is the
  import-inference approach as published (Graph2Env's "pipreqs static baseline").

A Rust repository's ``declared`` baseline is the naive Rust template
(``templates/bench/declared-rust.Dockerfile.j2``): the newest ``rust:X.Y-slim`` offered, the
repository copied in, the crates fetched and the test binaries built in the image, ``cargo test``.
``pipreqs`` infers Python imports and has no Rust counterpart.
"""

from __future__ import annotations

import ast
import configparser
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from bot.hostenv import host_env
from bot.templating import make_environment

BASE_IMAGE = "python:3.11-slim"
TEST_EXTRAS = ("test", "tests", "testing", "dev")
TEMPLATE = "bench/declared.Dockerfile.j2"
RUST_TEMPLATE = "bench/declared-rust.Dockerfile.j2"
_REQ_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9_,.\- ]+\])?$")


@dataclass
class Produced:
    """A Dockerfile from one system, or the reason there is none."""

    system: str
    dockerfile: str = ""
    seconds: float = 0.0
    ok: bool = True
    reason: str = ""
    details: dict = field(default_factory=dict)
    # files the Dockerfile needs next to it in the build context (repository-relative path ->
    # text), e.g. the requirements lock it installs from
    files: dict = field(default_factory=dict)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _template(name: str = TEMPLATE) -> jinja2.Template:
    return make_environment(trim_blocks=True, lstrip_blocks=True).get_template(name)


def render_baseline(
    system: str,
    *,
    requirement_files: Sequence[str] = (),
    packages: Sequence[str] = (),
    project_spec: str = "",
    provenance: str = "",
    base_image: str = BASE_IMAGE,
) -> str:
    return _template().render(
        system=system,
        base_image=base_image,
        requirement_files=list(requirement_files),
        packages=list(packages),
        project_spec=project_spec,
        provenance=provenance,
    )


# --- declared --------------------------------------------------------------------------------


def find_requirement_files(repo: Path) -> list[str]:
    """requirements*.txt at the top level and *.txt in requirements/ (sorted, posix paths)."""
    found = [p.name for p in sorted(repo.glob("requirements*.txt")) if p.is_file()]
    req_dir = repo / "requirements"
    if req_dir.is_dir() and not req_dir.is_symlink():
        found += [f"requirements/{p.name}" for p in sorted(req_dir.glob("*.txt")) if p.is_file()]
    return found


def _setup_py_extras(text: str) -> set[str]:
    """Keys of an ``extras_require`` dict literal in setup.py (no code is run)."""
    names: set[str] = set()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return set(re.findall(r"['\"]([A-Za-z0-9_.-]+)['\"]\s*:", text)) if "extras_require" in text else set()
    for node in ast.walk(tree):
        value = None
        if isinstance(node, ast.keyword) and node.arg == "extras_require":
            value = node.value
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and "extra" in t.id.lower() for t in node.targets
        ):
            value = node.value
        if isinstance(value, ast.Dict):
            names |= {k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
            names |= {kw.arg for kw in value.keywords if kw.arg}
    return names


def declared_extras(repo: Path) -> tuple[set[str], list[str]]:
    """All extras the project declares, and warnings for manifests that could not be read."""
    extras: set[str] = set()
    warnings: list[str] = []
    pyproject = repo / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8", errors="replace"))
            extras |= set((data.get("project") or {}).get("optional-dependencies") or {})
            extras |= set(((data.get("tool") or {}).get("poetry") or {}).get("extras") or {})
        except tomllib.TOMLDecodeError as exc:
            warnings.append(f"pyproject.toml: {exc}")
    setup_cfg = repo / "setup.cfg"
    if setup_cfg.is_file():
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(setup_cfg.read_text(encoding="utf-8", errors="replace"))
            if parser.has_section("options.extras_require"):
                extras |= set(parser.options("options.extras_require"))
        except configparser.Error as exc:
            warnings.append(f"setup.cfg: {exc.__class__.__name__}")
    setup_py = repo / "setup.py"
    if setup_py.is_file():
        extras |= _setup_py_extras(setup_py.read_text(encoding="utf-8", errors="replace"))
    return extras, warnings


def is_installable_project(repo: Path) -> bool:
    """A setup.py, or a pyproject.toml that names a build system or project metadata (a
    pyproject holding only tool configuration is not a package)."""
    if (repo / "setup.py").is_file():
        return True
    pyproject = repo / "pyproject.toml"
    if not pyproject.is_file():
        return False
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8", errors="replace"))
    except tomllib.TOMLDecodeError:
        return True  # a person would still try `pip install -e .`; the build will tell
    tool = data.get("tool") or {}
    return bool(data.get("build-system") or data.get("project") or tool.get("poetry") or tool.get("flit"))


def produce_declared(repo: Path) -> Produced:
    started = time.monotonic()
    requirement_files = find_requirement_files(repo)
    extras, warnings = declared_extras(repo)
    chosen = sorted(e for e in extras if _normalize(e) in TEST_EXTRAS)
    project_spec = ""
    if is_installable_project(repo):
        project_spec = f".[{','.join(chosen)}]" if chosen else "."
    text = render_baseline(
        "declared",
        requirement_files=requirement_files,
        project_spec=project_spec,
        provenance="Requirements files and the project's test extras.",
    )
    return Produced(
        "declared",
        text,
        time.monotonic() - started,
        details={
            "requirement_files": requirement_files,
            "extras": chosen,
            "project_install": bool(project_spec),
            "warnings": warnings,
        },
    )


def produce_declared_rust(rust_versions: Sequence[str]) -> Produced:
    """The naive Rust Dockerfile on the newest ``rust:X.Y-slim`` in ``rust_versions`` (oldest
    first, as ``bot.ecosystems.rust.setup.offered_versions`` gives them); none offered: no
    Dockerfile, and the reason."""
    started = time.monotonic()
    if not rust_versions:
        return Produced(
            "declared",
            seconds=time.monotonic() - started,
            ok=False,
            reason="no rust:X.Y-slim image is offered on this engine (`setupbot images bootstrap --ecosystem rust`)",
        )
    image = f"rust:{rust_versions[-1]}-slim"
    text = _template(RUST_TEMPLATE).render(
        system="declared", base_image=image, provenance="the newest Rust image offered, cargo fetch, cargo test."
    )
    return Produced("declared", text, time.monotonic() - started, details={"base_image": image})


# --- pipreqs ---------------------------------------------------------------------------------


def _pipreqs_argv(repo: Path, savepath: Path, pypi_server: str | None) -> list[str]:
    """pipreqs' command line; its own default index unless ``pypi_server`` is given."""
    exe = shutil.which("pipreqs")
    head = [exe] if exe else [sys.executable, "-m", "pipreqs.pipreqs"]
    return [
        *head,
        *(["--pypi-server", pypi_server] if pypi_server else []),
        "--mode",
        "no-pin",
        "--no-follow-links",
        "--force",
        "--savepath",
        str(savepath),
        str(repo),
    ]


def parse_pipreqs_output(text: str) -> tuple[list[str], list[str]]:
    """Requirement names from pipreqs' file; lines that are not a plain name are dropped
    (they would go to pip as argv, so only well-formed names pass)."""
    packages: list[str] = []
    dropped: list[str] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name = re.split(r"[=<>~!; ]", line, maxsplit=1)[0]
        (packages if _REQ_NAME.match(name) else dropped).append(name if _REQ_NAME.match(name) else line)
    return sorted(dict.fromkeys(packages), key=str.lower), dropped


def produce_pipreqs(repo: Path, scratch: Path, timeout: int = 300, pypi_server: str | None = None) -> Produced:
    started = time.monotonic()
    savepath = scratch / "requirements.pipreqs.txt"
    env = host_env()
    # requests uses certifi unless told otherwise; the host bundle carries the proxy's CA.
    if env.get("SSL_CERT_FILE") and not env.get("REQUESTS_CA_BUNDLE"):
        env["REQUESTS_CA_BUNDLE"] = env["SSL_CERT_FILE"]
    argv = _pipreqs_argv(repo, savepath, pypi_server)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=str(scratch))
    except subprocess.TimeoutExpired:
        return Produced(
            "pipreqs", seconds=time.monotonic() - started, ok=False, reason=f"pipreqs did not finish within {timeout}s"
        )
    except OSError as exc:
        return Produced(
            "pipreqs", seconds=time.monotonic() - started, ok=False, reason=f"pipreqs could not start: {exc}"
        )
    seconds = time.monotonic() - started
    if proc.returncode != 0 or not savepath.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return Produced(
            "pipreqs", seconds=seconds, ok=False, reason=f"pipreqs exited {proc.returncode}: {' | '.join(tail)[-400:]}"
        )
    packages, dropped = parse_pipreqs_output(savepath.read_text(errors="replace"))
    text = render_baseline(
        "pipreqs", packages=packages, provenance="Requirements inferred from imports by pipreqs (no pins)."
    )
    return Produced("pipreqs", text, seconds, details={"packages": packages, "dropped": dropped})
