"""Rust behind the ecosystem seam: detection, the Protocol, the registry, the plan that the
Python setup loop refuses (Rust has its own, tests/unit/test_rust_setup.py), and a maturin
project's Python plan getting a Rust toolchain."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.ecosystems import REGISTRY, parse_only, select, select_files
from bot.ecosystems.base import Ecosystem
from bot.ecosystems.rust import RustEcosystem
from bot.ecosystems.rust.pyrust import extend_python_plan, rust_builder
from bot.errors import NotSupported
from bot.evidence.model import ScanWarning
from bot.graph.model import DepGraph, Node

REPOS = Path(__file__).resolve().parents[1] / "fixtures" / "repos"


def test_rust_satisfies_the_protocol_and_is_registered():
    assert isinstance(REGISTRY["rust"], Ecosystem)
    assert parse_only("python,rust") == ["python", "rust"]


def test_detection_from_files_and_checkouts():
    rust = RustEcosystem()
    assert rust.detect_files(["Cargo.toml", "Cargo.lock", "src/lib.rs"]).confidence == 1.0
    assert rust.detect_files(["bindings/rust/Cargo.toml", "setup.py"]).confidence == 0.6
    assert rust.detect_files(["package.json"]) is None
    assert select(REPOS / "rust-workspace").names == ["rust"]
    mixed = select(REPOS / "rust-maturin")
    assert mixed.names == ["python", "rust"] and mixed.lead.name == "python"  # Python leads, Rust joins
    assert select_files("x", ["Cargo.toml", "go.mod"]).foreign == ["go.mod"]


def test_the_python_loop_is_refused_a_rust_plan_plainly():
    rust = RustEcosystem()
    with pytest.raises(NotSupported) as err:
        rust.make_plan(REPOS / "rust-crate", None, available_rust=["1.85"])
    assert "Rust" in str(err.value.what)
    plan = rust.make_plan(REPOS / "rust-crate", None, available_rust=["1.85"], for_setup_loop=False)
    assert plan.choice.image == "rust:1.85-slim" and "cargo fetch --locked" in plan.dockerfile


def test_setupbot_plan_shows_a_rust_plan_as_text_and_refuses_json(capsys, monkeypatch):
    from bot.cli import main

    # the unit tier has no engine to ask which rust images it holds
    monkeypatch.setattr(RustEcosystem, "available_versions", lambda self, settings: ["1.85"])

    assert main(["plan", str(REPOS / "rust-sys"), "--no-resolve"]) == 0
    out = capsys.readouterr().out
    # the -sys crate's Debian packages, the fetch layer before the source, and the test command
    assert "libssl-dev" in out and "pkg-config" in out
    assert out.index("cargo fetch --locked") < out.index('COPY [".", "."]')
    assert "rust: rust:1.85-slim" in out and "tests: cargo test --locked" in out
    assert "`setupbot run` builds and proves this plan" in out
    assert main(["plan", str(REPOS / "rust-sys"), "--no-resolve", "--json", "-"]) == 3
    assert "led by rust" in capsys.readouterr().err


def test_devcontainer_gets_rust_analyzer():
    out = RustEcosystem().devcontainer({"customizations": {"vscode": {"extensions": ["a"]}}}, None)
    assert out["customizations"]["vscode"]["extensions"] == ["a", "rust-lang.rust-analyzer"]


class _Plan:
    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.graph = DepGraph()
        self.graph.add(Node("package:@project", "PACKAGE", "@project", "SATISFIED", action="project"))
        self.warnings: list[ScanWarning] = []


def test_maturin_project_gets_rustc_and_cargo_with_the_reason():
    """The fixture's Cargo.lock is format 4 (cargo 1.78): above bookworm's plain rustc 1.63, so
    the plan takes Debian's -web pair and says why."""
    assert rust_builder(REPOS / "rust-maturin")[0] == "maturin"
    plan = _Plan(REPOS / "rust-maturin")
    extend_python_plan(plan)
    for name in ("rustc-web", "cargo-web"):
        node = plan.graph.nodes[f"systemlib:{name}"]
        assert node.action == "apt" and "maturin" in node.attrs["why"]
        assert "Cargo.lock format version 4" in node.attrs["toolchain_why"]
        assert ("package:@project", node.id, "prerequisite") in plan.graph.edges
    assert "systemlib:rustc" not in plan.graph.nodes and "systemlib:cargo" not in plan.graph.nodes
    assert "systemlib:python3-dev" not in plan.graph.nodes  # the Python image has the headers
    meta = plan.graph.meta["rust_toolchain"]
    assert meta["builder"] == "maturin" and meta["toolchain"] == ["rustc-web", "cargo-web"] and meta["floor"] == "1.78"


def _maturin_repo(tmp_path: Path, cargo_extra: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires=["maturin>=1,<2"]\nbuild-backend="maturin"\n[project]\nname="x"\nversion="0.1"\n'
    )
    (tmp_path / "Cargo.toml").write_text(f'[package]\nname="x"\nversion="0.1.0"\n{cargo_extra}')
    return tmp_path


@pytest.mark.parametrize(
    ("cargo_extra", "toolchain", "floor", "warned"),
    [
        ('edition="2021"\n', ["rustc", "cargo"], "1.56", ""),  # both suites' plain rustc meets it
        ("", ["rustc", "cargo"], None, ""),  # no floor stated
        ('edition="2024"\n', ["rustc-web", "cargo-web"], "1.85", ""),  # bookworm's rustc is 1.63
        ('edition="2021"\nrust-version="1.90"\n', ["rustc-web", "cargo-web"], "1.90", "bookworm-security"),
        ('edition="2024"\nrust-version="1.99"\n', ["rustc-web", "cargo-web"], "1.99", "newest Rust toolchain"),
    ],
)
def test_the_python_images_rust_toolchain_follows_the_crates_floor(tmp_path, cargo_extra, toolchain, floor, warned):
    plan = _Plan(_maturin_repo(tmp_path, cargo_extra))
    extend_python_plan(plan)
    meta = plan.graph.meta["rust_toolchain"]
    assert meta["toolchain"] == toolchain and meta["floor"] == floor
    assert all(f"systemlib:{p}" in plan.graph.nodes for p in toolchain)
    assert len([n for n in plan.graph.of_type("SYSTEMLIB") if n.name in ("rustc", "rustc-web")]) == 1
    warnings = [w.message for w in plan.warnings]
    if warned:
        assert len(warnings) == 1 and warned in warnings[0] and floor in warnings[0]
    else:
        assert warnings == []


def test_plain_python_project_gets_nothing(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires=["hatchling"]\nbuild-backend="hatchling.build"\n'
    )
    (tmp_path / "Cargo.toml").write_text('[package]\nname="x"\nversion="0.1.0"\n')
    plan = _Plan(tmp_path)
    extend_python_plan(plan)
    assert not plan.graph.of_type("SYSTEMLIB")
    assert plan.warnings and "does not use it" in plan.warnings[0].message


def test_images_bootstrap_builds_an_ecosystems_standins_through_its_recipes():
    """`setupbot images bootstrap --ecosystem rust=1.85` asks the Rust ecosystem, which builds on
    the Debian stand-in; an engine without it gets a failed outcome naming the fix."""
    from argparse import Namespace

    from bot.commands.images import _ecosystem_images
    from bot.config import load_settings
    from bot.ecosystems.rust.images import image_recipes

    class NoImages:
        def image_exists(self, tag):
            return False

    class Reporter:
        def stage(self, line):
            pass

    args = Namespace(ecosystem=["rust=1.85"], force=False)
    [outcome] = _ecosystem_images(NoImages(), load_settings(None), args, Reporter())
    assert (outcome.tag, outcome.action) == ("rust:1.85-slim", "failed")
    assert "debian:trixie-slim" in outcome.detail and "images bootstrap" in outcome.detail
    recipes = {r.tag: r for r in image_recipes(("bookworm", "trixie"))}
    assert recipes["rust:1.96-slim"].variables["rustc_package"] == "rustc-web"
    assert recipes["rust:1.85-slim"].base == "debian:trixie-slim"
    from bot.errors import ConfigError

    with pytest.raises(ConfigError, match="no Rust stand-in recipe for 1.70"):
        _ecosystem_images(NoImages(), load_settings(None), Namespace(ecosystem=["rust=1.70"], force=False), Reporter())
