"""Python packages that build Rust (maturin, setuptools-rust): the Python plan gets a Rust
toolchain, and the report says why (issue #18, item 2).

The toolchain is Debian's, installed with apt in the Python image: the python stand-ins and the
official images are Debian, so the packages are there offline too. Debian ships two: ``rustc`` /
``cargo`` (bookworm 1.63, trixie 1.85) and the ``rustc-web`` / ``cargo-web`` pair that follows
Firefox (bookworm 1.85, trixie and bookworm-security 1.96). A python:X.Y-slim image may be built
on either suite (the bookworm stand-ins are), so the plain pair is chosen only when no floor of
the crate (rust-version, edition, Cargo.lock format) is above what both suites' plain rustc
meets; otherwise the -web pair. The -dev packages of the crate's -sys dependencies join them. This is the plain form; a builder
stage that keeps cargo out of the final image needs a multi-stage template, which the one
Dockerfile template does not have yet.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bot.ecosystems.rust.evidence import scan_repository, version_key
from bot.ecosystems.rust.toolchain import floors
from bot.evidence.files import RepoFiles, line_of, load_toml
from bot.evidence.model import Evidence, ScanWarning
from bot.graph.model import Node

RUST_BUILDERS = ("maturin", "setuptools-rust")
# (rustc package, cargo package, the oldest rustc it has in a suite a Python image is built on)
PLAIN = ("rustc", "cargo", "1.63")  # bookworm 1.63, trixie 1.85
WEB = ("rustc-web", "cargo-web", "1.85")  # bookworm 1.85, trixie 1.96
NEWEST_DEBIAN = "1.96"  # rustc-web in trixie and bookworm-security
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


def debian_toolchain(rust: Any) -> tuple[tuple[str, str], str, str | None, str]:
    """((rustc package, cargo package), why, floor, warning) for a Python image: the plain pair
    when every floor the crate states is met by both suites' plain rustc, else the -web pair.
    The warning is non-empty when even the newest Debian toolchain is below the floor."""
    hard = floors(rust) if rust is not None else []
    if not hard or version_key(hard[0][0]) <= version_key(PLAIN[2]):
        why = "Debian's rustc and cargo" + (
            f" meet {hard[0][1]}" if hard else " (the crate states no rustc floor above 1.63)"
        )
        return PLAIN[:2], why, hard[0][0] if hard else None, ""
    floor, floor_why = hard[0]
    why = (
        f"{floor_why}: Debian's plain rustc is {PLAIN[2]} on a bookworm-based image, so the plan "
        f"installs rustc-web and cargo-web, Debian's newer toolchain ({WEB[2]} or newer in every suite)"
    )
    warning = ""
    if version_key(floor) > version_key(NEWEST_DEBIAN):
        warning = (
            f"{floor_why}, and the newest Rust toolchain Debian ships is rustc-web {NEWEST_DEBIAN}: "
            "the Rust build will fail until the crate's floor is lowered or a newer toolchain is installed"
        )
    elif version_key(floor) > version_key(WEB[2]):
        warning = (
            f"{floor_why}: rustc-web is {WEB[2]} in bookworm's main archive and {NEWEST_DEBIAN} in trixie and "
            "bookworm-security; a bookworm-based image without the security archive will fail the build"
        )
    return WEB[:2], why, floor, warning


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
    rust = scan_repository(plan.repo) if (Path(plan.repo) / "Cargo.toml").is_file() else None
    pair, pair_why, floor, warning = debian_toolchain(rust)
    toolchain = list(pair)
    packages = list(toolchain)
    if warning:
        plan.warnings.append(ScanWarning("Cargo.toml", None, warning))
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
                attrs=(
                    {"why": why, "toolchain_why": pair_why}
                    if package in toolchain
                    else {"why": f"a crate's build script needs {package}"}
                ),
            )
        )
        node.add_evidence(file, line, f"build requires {builder}")
        if PROJECT in graph.nodes:
            graph.edge(PROJECT, node.id)
    graph.meta["rust_toolchain"] = {
        "builder": builder,
        "why": why,
        "packages": packages,
        "toolchain": toolchain,
        "floor": floor,
        "toolchain_why": pair_why,
    }
