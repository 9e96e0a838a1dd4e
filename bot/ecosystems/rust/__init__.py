"""Rust crates and workspaces behind the ecosystem seam (issue #18; the contract is
``bot.ecosystems.base.Ecosystem``).

The modules, stage by stage: ``evidence`` (Cargo manifests, lock, toolchain, -sys crates, CI),
``toolchain`` (the rust:<ver>-slim choice), ``graph`` (DepGraph nodes), ``compile`` (Dockerfile
steps through the one template), ``results`` (libtest / nextest output), ``diagnose`` (the Rust
failure classes), ``images`` (the image family and the Debian stand-ins), ``prove`` (plan, build
and test on the engine), ``repair`` (the repairs the diagnosis names), ``setup`` (the setup loop
`setupbot run` drives: build, test, repair, clean replay), ``verdict`` (the verdict and the
report's proof of a Rust run), ``pyrust`` (Python packages that build Rust).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot.ecosystems.base import CompileSnippet, Detection, ImageFamily, TestRunner, basename, depth, list_files
from bot.ecosystems.rust import images
from bot.ecosystems.rust.compile import compile_snippets
from bot.ecosystems.rust.diagnose import diagnose
from bot.ecosystems.rust.evidence import files_read, scan_repository
from bot.ecosystems.rust.graph import contribute, test_command
from bot.ecosystems.rust.images import OFFICIAL_RUST
from bot.ecosystems.rust.prove import make_plan
from bot.ecosystems.rust.pyrust import extend_python_plan
from bot.ecosystems.rust.results import parse_results
from bot.ecosystems.rust.setup import offered_versions, run_rust_setup
from bot.ecosystems.rust.toolchain import choose_toolchain
from bot.engine import Engine
from bot.errors import NotSupported, SetupbotError


class RustEcosystem:
    """Rust: cargo fetch --locked into an official ``rust:X.Y-slim`` image, ``cargo build
    --tests``, tests run by ``cargo test`` (or nextest) with libtest's text output parsed."""

    name = "rust"
    title = "Rust"
    markers: tuple[str, ...] = ("Cargo.toml", "Cargo.lock", "rust-toolchain.toml", "rust-toolchain")
    image_family = ImageFamily(
        "rust",
        "rust:{version}-slim",
        OFFICIAL_RUST,
        "rust-version (MSRV), the newest edition and the Cargo.lock format must hold; then a numbered "
        "rust-toolchain channel; then the newest version offered",
    )
    test_runner = TestRunner(("cargo", "test", "--no-fail-fast"), ("cargo", "test", "--", "--list"), "libtest")
    devcontainer_extensions: tuple[str, ...] = ("rust-lang.rust-analyzer",)

    # -- detection ------------------------------------------------------------------------------
    def detect(self, repo: Path) -> Detection | None:
        return self.detect_files(list_files(repo))

    def detect_files(self, files: Sequence[str]) -> Detection | None:
        manifests = [f for f in files if basename(f) == "Cargo.toml"]
        root = [f for f in manifests if depth(f) == 0]
        if root:
            extra = [f for f in files if depth(f) == 0 and basename(f) in self.markers and f != "Cargo.toml"]
            return Detection(self.name, tuple(sorted(root + extra)), 1.0, "Cargo.toml at the root")
        if manifests:
            found = sorted(manifests)
            return Detection(self.name, tuple(found[:20]), 0.6, f"{found[0]} (no Cargo.toml at the root)")
        return None

    # -- evidence and graph --------------------------------------------------------------------
    def scan(self, repo: Path, output_dir: str | None = None) -> Any:
        return scan_repository(repo, output_dir)

    def input_files(self, repo: Path) -> list[str]:
        """What the Rust scan reads (``bot.ecosystems.base.NamesInputs``): every Cargo.toml,
        Cargo.lock, rust-toolchain(.toml), .cargo/config(.toml), the workflows; a change to any
        of them is a change to the environment's inputs."""
        return files_read(repo)

    def contribute(self, evidence: Any, graph: Any, warnings: list[Any]) -> None:
        choice = choose_toolchain(evidence, self.image_family.versions)
        contribute(evidence, choice, graph)
        warnings.extend(evidence.warnings)

    def available_versions(self, settings: Any) -> list[str]:
        """The rust:X.Y-slim images on this engine, and the official tags when a registry answers;
        the official list when no engine answers."""
        try:
            return offered_versions(Engine.from_settings(settings), settings)
        except (SetupbotError, OSError):
            return list(OFFICIAL_RUST)

    def bootstrap_images(
        self,
        engine: Any,
        settings: Any,
        versions: Sequence[str] | None = None,
        *,
        force: bool = False,
        log_line: Any = None,
    ) -> list[Any]:
        """Build the rust:X.Y-slim stand-ins from Debian's toolchains (``setupbot images
        bootstrap --ecosystem rust``); the Debian stand-ins must be there first."""
        kwargs = {"log_line": log_line} if log_line else {}
        return images.bootstrap(engine, settings, versions, force=force, **kwargs)

    def choose_version(self, evidence: Any, available: Sequence[str]) -> Any:
        return choose_toolchain(evidence, available)

    def make_plan(self, repo: Path, settings: Any = None, **options: Any) -> Any:
        """The Rust plan (``bot.ecosystems.rust.prove.RustPlan``). Callers that expect a Python
        plan (the shared setup loop, `setupbot verify`'s prosecutor) are refused with
        NotSupported unless they pass ``for_setup_loop=False``: a Rust-led `setupbot run` goes
        through ``setup`` instead."""
        available = (
            options.get("available_rust")
            or options.get("available_versions")
            or (self.available_versions(settings) if settings else OFFICIAL_RUST)
        )
        plan = make_plan(repo, list(available))
        if options.get("for_setup_loop", True):
            raise NotSupported(
                f"{Path(repo).name}: a Rust repository (Cargo.toml at the root); the Python setup loop and "
                "its prosecutor and judge do not take Rust plans",
                "`setupbot run` sets Rust repositories up through their own loop (bot.ecosystems.rust.setup).",
                markers=["Cargo.toml"],
            )
        return plan

    def setup(self, repo: Path, settings: Any, engine: Any, *, verify: bool = True) -> Any:
        """The Rust setup loop (``bot.ecosystems.base.DrivesOwnSetup``): plan, build, run the
        tests with no network, repair what the diagnosis names, replay from scratch; the
        verdict from the replay's results (``bot.ecosystems.rust.verdict``)."""
        return run_rust_setup(repo, settings, engine, verify=verify)

    def extend_plan(self, plan: Any, settings: Any = None) -> None:
        extend_python_plan(plan)

    # -- compile, target, results, diagnosis ------------------------------------------------------
    def compile_snippets(self, graph: Any) -> list[CompileSnippet]:
        return compile_snippets(graph)

    def test_command(self, evidence: Any, graph: Any) -> tuple[list[str], list[tuple[str, int | None, str]]]:
        return test_command(evidence)

    def parse_results(self, text: str) -> Any:
        return parse_results(text)

    def diagnose(self, output: str) -> list[Any]:
        return diagnose(output)

    def devcontainer(self, config: dict[str, Any], plan: Any) -> dict[str, Any]:
        """rust-analyzer, for a Rust-led plan and for a Python plan that builds Rust alike. A
        Rust-led plan also loses what the shared builder assumes of Python: the Python extension
        and interpreter path, and the ``dev`` user that only the Python Dockerfile creates (the
        rust image's toolchain and CARGO_HOME belong to root, so the editor attaches as root)."""
        out = dict(config)
        custom = dict(out.get("customizations") or {})
        vscode = dict(custom.get("vscode") or {})
        extensions = [*vscode.get("extensions", []), *self.devcontainer_extensions]
        if _rust_led(plan):
            extensions = [e for e in extensions if e != "ms-python.python"]
            settings = {k: v for k, v in dict(vscode.get("settings") or {}).items() if not k.startswith("python.")}
            vscode["settings"] = settings
            out.pop("remoteUser", None)
            out.pop("updateRemoteUserUID", None)
        vscode["extensions"] = list(dict.fromkeys(extensions))
        custom["vscode"] = vscode
        out["customizations"] = custom
        return out


def _rust_led(plan_json: Any) -> bool:
    """Whether the plan (its JSON) was made by the Rust setup loop: Rust leads it."""
    return isinstance(plan_json, dict) and plan_json.get("ecosystem") == "rust"
