"""Python packages that build Rust (maturin, setuptools-rust): the Python plan gets a Rust
toolchain, and the report says why (issue #18, item 2).

The toolchain is Debian's rustc and cargo, installed with apt in the Python image: the python
stand-ins and the official images are Debian, so the packages are there offline too. The
-dev packages of the crate's -sys dependencies join them. This is the plain form; a builder
stage that keeps cargo out of the final image needs a multi-stage template, which the one
Dockerfile template does not have yet.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bot.ecosystems.rust.evidence import scan_repository
from bot.evidence.files import RepoFiles, line_of, load_toml
from bot.evidence.model import Evidence, ScanWarning
from bot.graph.model import Node

RUST_BUILDERS = ("maturin", "setuptools-rust")
TOOLCHAIN = ("rustc", "cargo")
PROJECT = "package:@project"
# build-script needs that the Python image already meets (its headers and interpreter)
_PYTHON_IMAGE_HAS = {"python3-dev"}


def rust_builder(repo: Path | str) -> tuple[str, str, int | None] | None:
    """(builder, file, line) when the project's build needs a Rust toolchain: maturin or
    setuptools-rust among the build requirements of pyproject.toml."""
    ev = Evidence(repo=Path(repo).resolve())
    files = RepoFiles(Path(repo), ev)
    loaded = load_toml(files, "pyproject.toml", ev, "pyproject.toml")
    if loaded is None:
        return None
    text, data = loaded
    build: Any = data.get("build-system") if isinstance(data.get("build-system"), dict) else {}
    requires: Any = build.get("requires") if isinstance(build.get("requires"), list) else []
    for req in requires:
        name = re.split(r"[<>=!~\[; ]", str(req).strip().lower(), maxsplit=1)[0].replace("_", "-")
        if name in RUST_BUILDERS:
            return name, "pyproject.toml", line_of(text, str(req))
    backend = str(build.get("build-backend") or "")
    if backend.startswith("maturin"):
        return "maturin", "pyproject.toml", line_of(text, backend)
    return None


def extend_python_plan(plan: Any) -> None:
    """Add rustc, cargo and the crate's -dev packages to a Python plan whose project builds Rust.
    Nothing is added when the project does not build Rust."""
    found = rust_builder(plan.repo)
    if found is None:
        if (Path(plan.repo) / "Cargo.toml").is_file():
            plan.warnings.append(
                ScanWarning(
                    "Cargo.toml",
                    None,
                    "a Cargo.toml beside the Python project, and the "
                    "Python build does not use it (no maturin or setuptools-rust)",
                )
            )
        return
    builder, file, line = found
    graph = plan.graph
    why = f"the project's build runs {builder}, which compiles Rust with cargo"
    packages = list(TOOLCHAIN)
    rust = scan_repository(plan.repo) if (Path(plan.repo) / "Cargo.toml").is_file() else None
    if rust is not None:
        packages += [p for p in rust.packages() if p not in packages and p not in _PYTHON_IMAGE_HAS]
    for package in packages:
        node = graph.add(
            Node(
                f"systemlib:{package}",
                "SYSTEMLIB",
                package,
                "SATISFIED",
                action="apt",
                attrs={"why": why if package in TOOLCHAIN else f"a crate's build script needs {package}"},
            )
        )
        node.add_evidence(file, line, f"build requires {builder}")
        if PROJECT in graph.nodes:
            graph.edge(PROJECT, node.id)
    graph.meta["rust_toolchain"] = {"builder": builder, "why": why, "packages": packages}
