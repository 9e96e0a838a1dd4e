"""Plan a Rust repository and prove the plan on the engine: scan -> choose the image ->
graph -> Dockerfile -> build it from scratch -> run the test command in a fresh, hardened
container with no network -> per-test results, or the diagnosis of the failure.

One proof, no repairs: the engine tests use it, and ``make_plan`` is where the Rust setup loop
(``bot.ecosystems.rust.setup``, what `setupbot run` drives) starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.ecosystems.rust import images
from bot.ecosystems.rust.compile import compile_dockerfile
from bot.ecosystems.rust.diagnose import diagnose
from bot.ecosystems.rust.evidence import RustEvidence, scan_repository
from bot.ecosystems.rust.graph import TARGET, contribute
from bot.ecosystems.rust.results import parse_results
from bot.ecosystems.rust.toolchain import RustChoice, choose_toolchain
from bot.graph.model import DepGraph
from bot.junit import TestResults


@dataclass
class RustPlan:
    repo: Path
    evidence: RustEvidence
    choice: RustChoice
    graph: DepGraph
    dockerfile: str

    @property
    def test_command(self) -> list[str]:
        return list(self.graph.nodes[TARGET].attrs["command"])


@dataclass
class Proof:
    plan: RustPlan
    built: bool
    build_log: str = ""
    results: TestResults | None = None
    test_output: str = ""
    signatures: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def status(self) -> str:
        if not self.plan.choice.satisfied:
            return "unsupported_toolchain"
        if not self.built:
            return "build_failed"
        if self.results is None or not self.results.outcomes:
            return "no_tests"
        return "success" if self.results.failed == 0 else "tests_failed"


def make_plan(repo: Path | str, available: Sequence[str]) -> RustPlan:
    ev = scan_repository(repo)
    if not ev.found:
        raise ValueError(f"{repo}: no Cargo.toml at the root")
    choice = choose_toolchain(ev, available)
    graph = DepGraph()
    contribute(ev, choice, graph)
    text = compile_dockerfile(graph).text if choice.version else ""
    return RustPlan(Path(repo), ev, choice, graph, text)


def offered(engine) -> list[str]:
    return images.local_versions(engine.image_tags("rust"))


def prove(
    engine, repo: Path | str, available: Sequence[str] | None = None, *, tag: str | None = None, timeout: float = 900
) -> Proof:
    """Build the plan's Dockerfile with the repository as context and run its test command."""
    import time

    started = time.monotonic()
    plan = make_plan(repo, offered(engine) if available is None else available)
    if not plan.choice.satisfied:
        return Proof(plan, False, build_log=plan.choice.reason, seconds=time.monotonic() - started)
    tag = tag or f"setupbot/rust-proof:{engine.run_id}".lower()
    build = engine.build(Path(repo), plan.dockerfile, tag)
    if not build.ok:
        return Proof(plan, False, build.log, signatures=diagnose(build.log), seconds=time.monotonic() - started)
    # no network for the tests: every crate came in the fetch layer
    # One stream: cargo announces each test binary on stderr and the binary reports on stdout;
    # two streams interleave at random and a test would be filed under the wrong binary.
    argv = ["sh", "-c", 'exec "$@" 2>&1', "sh", *plan.test_command]
    run = engine.run_once(tag, argv, timeout=timeout, network="none")
    results = parse_results(run.output, exit_code=run.exit_code)
    results.timed_out = run.timed_out
    sigs = diagnose(run.output) if run.exit_code != 0 else []
    return Proof(plan, True, build.log, results, run.output, sigs, time.monotonic() - started)
