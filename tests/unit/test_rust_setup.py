"""The Rust setup loop with an engine double: the repair decisions (a -sys crate's Debian
package, a build tool, a newer toolchain image or a plain "none is offered"), the loop (keep what
helps, take back what does not, budgets, no test is never a success), the verdict, and the
pipeline seam that writes the three files for a Rust-led `setupbot run`."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from bot.compile.devcontainer import parse_devcontainer
from bot.config import load_settings
from bot.ecosystems.rust.diagnose import diagnose
from bot.ecosystems.rust.prove import make_plan
from bot.ecosystems.rust.repair import apply, decide
from bot.ecosystems.rust.setup import run_rust_setup
from bot.ecosystems.rust.verdict import rust_verdict
from bot.engine.results import BuildResult, ExecResult
from bot.errors import NotSupported
from bot.junit import TestResults
from bot.loop.diagnose import Signature

ROOT = Path(__file__).resolve().parents[2]
REPOS = ROOT / "tests" / "fixtures" / "repos"
LOGS = ROOT / "tests" / "fixtures" / "rust-logs"
OPENSSL_LOG = (LOGS / "openssl-sys-missing.log").read_text()
MSRV_LOG = (LOGS / "msrv-above-toolchain.log").read_text()
PASS_LOG = (LOGS / "cargo-test-pass.log").read_text()
NO_TESTS_LOG = "running 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n"


class Engine:
    """Builds succeed unless ``fails(dockerfile_text)`` returns a log; the tests print
    ``test_output``. Records every build and test run."""

    run_id = "rustunit1"

    def __init__(self, fails=lambda text: "", test_output: str = PASS_LOG, test_exit: int = 0) -> None:
        self.fails = fails
        self.test_output = test_output
        self.test_exit = test_exit
        self.builds: list[dict] = []
        self.runs: list[dict] = []
        self.cleaned: list[str | None] = []

    def image_tags(self, repository):
        return ["rust:1.85-slim", "rust:1.96-slim"]

    def build(self, context, text, tag, no_cache=False, timeout=None, **kw):
        log = self.fails(text)
        self.builds.append({"tag": tag, "text": text, "no_cache": no_cache})
        return BuildResult(not log, tag, log or "Successfully built", 2.0)

    def run_once(self, image, argv, *, timeout=300, env=None, network="none"):
        self.runs.append({"image": image, "argv": list(argv), "network": network})
        return ExecResult(list(argv), self.test_exit, self.test_output, 1.0)

    def image_size(self, tag):
        return 123_000_000

    def clean(self, run_id=None):
        self.cleaned.append(run_id)
        return {}


def _settings(repo: Path, **budgets):
    return load_settings(repo, environ={}, overrides={"budgets": budgets or {}, "images": {"source": "standins"}})


def _copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(REPOS / name, dest)
    return dest


def _graph(name: str = "rust-crate", offered=("1.85",)):
    return make_plan(REPOS / name, list(offered)).graph


# ------------------------------------------------------------------ repair decisions


def test_a_sys_crate_without_its_library_gets_the_dev_package_and_pkg_config():
    decision = decide(diagnose(OPENSSL_LOG), _graph(), ["1.85"])
    assert decision.repair is not None
    assert decision.repair.packages == ["libssl-dev", "pkg-config"]
    assert decision.repair.describe() == "apt_install libssl-dev pkg-config"
    assert "the log said" in decision.repair.why


def test_build_tools_map_to_their_debian_package_and_nothing_is_guessed():
    g = _graph()
    protoc = Signature("missing_command", "toolchain", "protobuf-compiler", "Could not find `protoc`")
    assert decide([protoc], g, ["1.85"]).repair.packages == ["protobuf-compiler"]
    clang = decide(diagnose("error: Unable to find libclang: ..."), g, ["1.85"])
    assert clang.repair.packages == ["libclang-dev"]
    header = Signature("missing_header", "toolchain", "weird/thing.h", "fatal error: weird/thing.h: No such file")
    unknown = decide([header], g, ["1.85"])
    assert unknown.repair is None and "not a Debian package the rules know" in unknown.reason
    stale = decide(diagnose("error: the lock file /w/Cargo.lock needs to be updated but --locked was passed"), g, [])
    assert stale.repair is None and "cargo update" in stale.reason


def test_an_installed_package_is_not_offered_again():
    g = _graph("rust-sys")  # the plan has libssl-dev and pkg-config already
    decision = decide(diagnose(OPENSSL_LOG), g, ["1.85"])
    assert decision.repair is None and "installed already" in decision.reason


def test_a_toolchain_floor_switches_to_a_newer_offered_image_or_says_plainly_there_is_none():
    sigs = diagnose(MSRV_LOG)
    assert [s.key for s in sigs if s.kind == "rust_floor"] == ["1.88"]
    g = _graph()
    newer = decide(sigs, g, ["1.85", "1.96"])
    assert (
        newer.repair.image == "rust:1.96-slim"
        and newer.repair.describe() == "switch the toolchain image to rust:1.96-slim"
    )
    apply(newer.repair, g, newer.signature.message)
    assert g.nodes["runtime:rust"].attrs["base_image"] == "rust:1.96-slim"
    none = decide(sigs, _graph(), ["1.85"])
    assert none.repair is None
    assert "needs rustc 1.88 or newer" in none.reason and "rust:1.88-slim or newer" in none.reason


# a code generator's build script formats its output with rustfmt, which the toolchain lacks
RUSTFMT_LOG = (
    "error: failed to run custom build command for `my-grpc v0.1.0 (/workspace/my-grpc)`\n\n"
    "Caused by:\n  process didn't exit successfully: `/workspace/target/debug/build/my-grpc-0f/build-script-build`"
    " (exit status: 1)\n  --- stderr\n"
    '  error running rustfmt: Os { code: 2, kind: NotFound, message: "No such file or directory" }\n'
)


def test_a_build_script_that_runs_rustfmt_gets_the_component_in_both_image_worlds():
    from bot.ecosystems.rust.compile import compile_dockerfile, component_script

    sigs = diagnose(RUSTFMT_LOG)
    assert [(s.kind, s.key) for s in sigs if s.kind == "missing_rust_component"] == [
        ("missing_rust_component", "rustfmt")
    ]
    # rustup's proxy on an official image says it its own way
    proxy = "error: 'cargo-fmt' is not installed for the toolchain '1.96.0-x86_64-unknown-linux-gnu'"
    assert [s.key for s in diagnose(proxy) if s.kind == "missing_rust_component"] == ["rustfmt"]
    g = _graph()
    decision = decide(sigs, g, ["1.85"])
    assert decision.repair is not None and decision.repair.describe() == "add the rustfmt component to the toolchain"
    assert decision.repair.to_json()["component"] == "rustfmt"
    apply(decision.repair, g, decision.signature.message)
    text = compile_dockerfile(g).text
    run = next(line for line in text.splitlines() if "rustup component add" in line)
    # rustup where it manages the toolchain, else the Debian package matching the installed rustc
    assert "rustup component add rustfmt" in run and 'p="rustfmt-web"' in run and 'p="rustfmt"' in run
    assert text.index("rustup component add") < text.index("cargo fetch")
    again = decide(sigs, g, ["1.85"])
    assert again.repair is None and "installed already" in again.reason
    assert "rust-web-clippy" in component_script(["clippy"])
    with pytest.raises(ValueError):
        component_script(["rustfmt; curl evil"])


def test_a_repair_tried_before_is_not_offered_again():
    from bot.ecosystems.rust.repair import repair_key

    g = _graph()
    first = decide(diagnose(OPENSSL_LOG), g, ["1.85"])
    again = decide(diagnose(OPENSSL_LOG), g, ["1.85"], {repair_key(first.repair)})
    assert again.repair is None and "did not help" in again.reason


# ------------------------------------------------------------------ the loop


def _needs_openssl(text: str) -> str:
    return "" if "libssl-dev" in text else OPENSSL_LOG


def test_a_missing_system_library_is_repaired_and_the_replay_is_clean(tmp_path):
    repo = _copy("rust-crate", tmp_path)
    engine = Engine(fails=_needs_openssl)
    out = run_rust_setup(repo, _settings(repo), engine, available=["1.85"])
    rec = out.run_record
    assert rec.status == "success", rec.remaining
    assert [r.candidate.describe() for r in rec.repairs] == ["apt_install libssl-dev pkg-config"]
    assert "openssl" in rec.repairs[0].log_excerpt.lower()
    # the working build failed, the repaired one built, then the replay: --no-cache
    assert [b["no_cache"] for b in engine.builds] == [False, False, True]
    assert all(r["network"] == "none" for r in engine.runs)
    assert engine.runs[0]["argv"][:4] == ["sh", "-c", 'exec "$@" 2>&1', "sh"]
    assert "libssl-dev" in rec.dockerfile and "pkg-config" in rec.dockerfile
    assert rec.replay["ok"] and rec.replay["tests"]["passed"] == 4 and rec.replay["tests"]["skipped"] == 1
    assert "no network" in rec.replay["detail"] and "--no-cache" in rec.replay["detail"]
    assert out.verification.verdict["tier"] == "Mostly"
    claims = [p["claim"] for p in out.verification.proven]
    assert any(c.startswith("toolchain rust:1.85-slim") for c in claims)
    assert any(c == "repair kept: apt_install libssl-dev pkg-config" for c in claims)
    assert any(c == "mutation check" for c in claims)


def test_a_repair_that_does_not_help_is_taken_back(tmp_path):
    repo = _copy("rust-crate", tmp_path)
    engine = Engine(fails=lambda text: OPENSSL_LOG)
    out = run_rust_setup(repo, _settings(repo), engine, available=["1.85"])
    rec = out.run_record
    assert rec.status == "unresolved" and not rec.repairs
    assert "libssl-dev" not in rec.dockerfile
    assert any("taken back" in w for w in rec.warnings)
    assert "did not help" in rec.remaining
    assert not rec.replay and out.verification is None


def test_a_floor_the_build_reveals_moves_to_the_newer_image(tmp_path):
    repo = _copy("rust-crate", tmp_path)
    engine = Engine(fails=lambda text: "" if "FROM rust:1.96-slim" in text else MSRV_LOG)
    out = run_rust_setup(repo, _settings(repo), engine, available=["1.85", "1.96"])
    rec = out.run_record
    # rust-crate asks for nothing newer, so the plan takes the newest offered image first
    assert rec.status == "success" and not rec.repairs
    engine = Engine(fails=lambda text: "" if "FROM rust:1.96-slim" in text else MSRV_LOG)
    pinned = _copy("rust-crate", tmp_path / "pinned")
    (pinned / "rust-toolchain.toml").write_text('[toolchain]\nchannel = "1.85.0"\n')
    out = run_rust_setup(pinned, _settings(pinned), engine, available=["1.85", "1.96"])
    rec = out.run_record
    assert rec.status == "success", rec.remaining
    assert [r.candidate.describe() for r in rec.repairs] == ["switch the toolchain image to rust:1.96-slim"]
    assert rec.dockerfile.startswith("# syntax") or "FROM rust:1.96-slim" in rec.dockerfile


def test_no_test_run_is_never_a_success(tmp_path):
    repo = _copy("rust-crate", tmp_path)
    out = run_rust_setup(repo, _settings(repo), Engine(test_output=NO_TESTS_LOG), available=["1.85"])
    assert out.run_record.status == "no_tests" and "ran no test" in out.run_record.remaining
    only_skipped = "test tests::slow ... ignored\n\ntest result: ok. 0 passed; 0 failed; 1 ignored; 0 measured\n"
    out = run_rust_setup(repo, _settings(repo), Engine(test_output=only_skipped), available=["1.85"])
    assert out.run_record.status == "no_tests"


def test_the_step_budget_ends_the_run_with_what_remains(tmp_path):
    repo = _copy("rust-crate", tmp_path)
    out = run_rust_setup(repo, _settings(repo, max_steps=1), Engine(fails=_needs_openssl), available=["1.85"])
    assert out.run_record.status == "over_budget"
    assert "step budget spent" in out.run_record.remaining and "libssl-dev" in out.run_record.remaining


def test_the_wall_clock_ends_the_run_before_a_trial_that_would_not_fit(tmp_path):
    from bot.ecosystems.rust.setup import RustSetup

    repo = _copy("rust-crate", tmp_path)
    now = [0.0]

    class SlowEngine(Engine):
        def build(self, context, text, tag, no_cache=False, timeout=None, **kw):
            now[0] += 200.0  # a 200 s build of a 300 s budget
            result = super().build(context, text, tag, no_cache, timeout)
            return BuildResult(result.ok, tag, result.log, 200.0)

    settings = _settings(repo, wall_clock=300)
    setup = RustSetup(repo, settings, SlowEngine(fails=_needs_openssl), available=["1.85"], clock=lambda: now[0])
    rec = setup.run().run_record
    assert rec.status == "over_budget" and "wall-clock budget spent" in rec.remaining
    assert "apt_install libssl-dev pkg-config" in rec.remaining and "was not tried" in rec.remaining
    assert not rec.replay and len(setup.engine.builds) == 1


def test_an_interrupted_run_keeps_its_record_and_dockerfile(tmp_path):
    from bot.errors import Interrupted

    repo = _copy("rust-crate", tmp_path)
    engine = Engine()

    def stopped(*a, **kw):
        raise Interrupted("stopped by SIGTERM")

    engine.run_once = stopped
    out = run_rust_setup(repo, _settings(repo), engine, available=["1.85"])
    assert out.run_record.status == "interrupted" and "SIGTERM" in out.run_record.remaining
    assert "FROM rust:1.85-slim" in out.run_record.dockerfile and out.verification is None


def test_a_floor_above_every_offered_image_is_said_plainly_and_nothing_is_built(tmp_path):
    repo = _copy("rust-msrv", tmp_path)
    engine = Engine()
    out = run_rust_setup(repo, _settings(repo), engine, available=["1.85"])
    assert out.run_record.status == "unresolved" and not engine.builds
    assert "rust-version = 1.88" in out.run_record.remaining and "rust:1.85-slim" in out.run_record.remaining
    nothing = run_rust_setup(repo, _settings(repo), Engine(), available=[])
    assert nothing.plan is None and "no rust:X.Y-slim image is offered" in nothing.run_record.remaining


def test_cargo_toml_only_below_the_root_is_not_supported(tmp_path):
    (tmp_path / "bindings").mkdir()
    (tmp_path / "bindings" / "Cargo.toml").write_text('[package]\nname = "b"\nversion = "0.1.0"\n')
    with pytest.raises(NotSupported) as err:
        run_rust_setup(tmp_path, _settings(tmp_path), Engine(), available=["1.85"])
    assert "no Cargo.toml at the root" in err.value.what


# ------------------------------------------------------------------ the verdict


def test_the_rust_verdict_counts_every_failure_and_stops_at_mostly():
    def results(**counts):
        out = {}
        for outcome, n in counts.items():
            out.update({f"{outcome}{i}": outcome for i in range(n)})
        return TestResults(out)

    tier = lambda r: rust_verdict(r)[0]["tier"]  # noqa: E731
    assert tier(results(passed=4, skipped=1)) == "Mostly"
    assert "Mostly is the highest verdict a Rust run gets" in rust_verdict(results(passed=1))[0]["reasons"][-1]
    assert tier(results(passed=9, failed=1)) == "Mostly"
    assert tier(results(passed=1, failed=2)) == "Partial"
    assert tier(results(failed=2)) == "Shallow"
    assert tier(results()) == "Shallow"


# ------------------------------------------------------------------ the pipeline seam and the files


def test_setupbot_run_on_a_rust_crate_writes_the_three_files(tmp_path, monkeypatch, capsys):
    import bot.pipeline
    from bot.cli import main

    repo = _copy("rust-crate", tmp_path)
    engine = Engine(fails=_needs_openssl)
    monkeypatch.setattr(bot.pipeline.Engine, "from_settings", classmethod(lambda cls, settings: engine))
    monkeypatch.setenv("SETUPBOT_IMAGES_SOURCE", "standins")
    assert main(["run", str(repo), "--json", str(tmp_path / "run.json")]) == 0
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["status"] == "success" and doc["verdict"] == "Mostly" and doc["exit_code"] == 0
    assert doc["ecosystems"] == ["rust"] and doc["replay"]["tests"]["passed"] == 4
    dockerfile = (repo / ".devcontainer" / "Dockerfile").read_text()
    assert "FROM rust:1.96-slim" in dockerfile and "libssl-dev" in dockerfile
    devcontainer = parse_devcontainer((repo / ".devcontainer" / "devcontainer.json").read_text())
    assert devcontainer["customizations"]["vscode"]["extensions"] == ["rust-lang.rust-analyzer"]
    assert "remoteUser" not in devcontainer  # the rust image has no dev user: root, as the image
    report = (repo / ".devcontainer" / "setup-report.md").read_text()
    first_screen = report[: report.index("### Requirements")]
    assert "Verdict: **Mostly**" in first_screen and "**Rust 1.96** on `rust:1.96-slim`" in first_screen
    assert "4 tests passed, 0 failed, 1 skipped" in first_screen and "no network" in first_screen
    assert "--no-cache" in first_screen
    assert "repair kept: apt_install libssl-dev pkg-config" in first_screen and "the log said" in first_screen
    assert "mutation check" in first_screen and "Python" not in first_screen
    assert "the repository's own `Cargo.lock`" in report
    assert engine.cleaned == [engine.run_id]
    run_json = json.loads((repo / ".setupbot" / "run.json").read_text())
    assert run_json["status"] == "success"
    # the recorded inputs cover the Cargo files: an unchanged checkout is not rebuilt, a changed
    # Cargo.toml is
    capsys.readouterr()
    builds = len(engine.builds)
    assert main(["run", str(repo)]) == 0
    assert "nothing rebuilt" in capsys.readouterr().out and len(engine.builds) == builds
    (repo / "Cargo.toml").write_text((repo / "Cargo.toml").read_text() + "\n[profile.dev]\nopt-level = 1\n")
    assert main(["run", str(repo)]) == 0
    assert "nothing rebuilt" not in capsys.readouterr().out and len(engine.builds) > builds


def test_the_pipeline_that_publishes_runs_the_rust_loop(tmp_path, monkeypatch):
    """`setupbot github` produces through run_pipeline: a Rust-led repository gets its own loop
    there too, and the outputs a pull request carries (no refusal, as before publishing was on)."""
    from bot.pipeline import run_pipeline

    monkeypatch.setenv("SETUPBOT_IMAGES_SOURCE", "standins")
    repo = _copy("rust-crate", tmp_path)
    engine = Engine()
    result = run_pipeline(repo, _settings(repo), engine=engine)
    assert result.ecosystems == ["rust"] and engine.builds
    assert result.generated is not None
    assert (repo / ".devcontainer" / "Dockerfile").read_text().count("FROM rust:") == 1


def test_a_failed_rust_run_exits_20_and_still_writes_its_report(tmp_path, monkeypatch):
    import bot.pipeline
    from bot.cli import main

    repo = _copy("rust-crate", tmp_path)
    engine = Engine(fails=lambda text: "error: could not compile `rust_crate` (lib) due to 1 previous error")
    monkeypatch.setattr(bot.pipeline.Engine, "from_settings", classmethod(lambda cls, settings: engine))
    monkeypatch.setenv("SETUPBOT_IMAGES_SOURCE", "standins")
    assert main(["run", str(repo)]) == 20
    report = (repo / ".devcontainer" / "setup-report.md").read_text()
    assert "Verdict: **Shallow**" in report and "could not compile 'rust_crate'" in report
    assert re.search(r"^FROM rust:1\.96-slim$", (repo / ".devcontainer" / "Dockerfile").read_text(), re.M)


class ServicesEngine(Engine):
    """The engine double with private networks; each test run records its network and env."""

    @contextlib.contextmanager
    def network(self, name_hint="net"):
        yield f"setupbot-{self.run_id}-net"

    def run_once(self, image, argv, *, timeout=300, env=None, network="none"):
        self.runs.append({"image": image, "argv": list(argv), "network": network, "env": dict(env or {})})
        return ExecResult(list(argv), self.test_exit, self.test_output, 1.0)


class Services:
    """The service manager double: every service starts healthy and is wired as the real one wires it."""

    opened: list[str] = []

    def __init__(self, engine, network):
        self.network = network

    def __enter__(self):
        Services.opened.append(self.network)
        return self

    def __exit__(self, *exc):
        return None

    def start(self, requirements, ci_env=None):
        from bot.services import ServiceOutcome, ServiceSpec, ServicesStarted, wiring_env

        specs = [ServiceSpec.from_any(r) for r in requirements]
        outcomes = [ServiceOutcome(s.name, s.kind, s.image, s.image, s.alias, True) for s in specs]
        return ServicesStarted(outcomes, wiring_env(specs, ci_env or {}))


def test_a_rust_crate_whose_compose_file_names_redis_runs_its_tests_beside_it(tmp_path, monkeypatch):
    """Services through the same catalogue as Python: the compose file's redis starts on a private
    network, the tests (and the replay) run there wired by REDIS_URL, and the outputs carry it."""
    import bot.ecosystems.rust.setup as rust_setup
    import bot.pipeline
    from bot.cli import main

    repo = _copy("rust-crate", tmp_path)
    (repo / "docker-compose.yml").write_text("services:\n  redis:\n    image: redis:7\n    ports: ['6379:6379']\n")
    engine = ServicesEngine()
    monkeypatch.setattr(bot.pipeline.Engine, "from_settings", classmethod(lambda cls, settings: engine))
    monkeypatch.setattr(rust_setup, "ServiceManager", Services)
    monkeypatch.setenv("SETUPBOT_IMAGES_SOURCE", "standins")
    Services.opened = []
    assert main(["run", str(repo), "--json", str(tmp_path / "run.json")]) == 0
    net = f"setupbot-{engine.run_id}-net"
    assert engine.runs and all(r["network"] == net for r in engine.runs), engine.runs
    assert all(r["env"]["REDIS_URL"] == "redis://redis:6379/0" for r in engine.runs)
    assert len(Services.opened) == len(engine.runs)  # each run, the replay's too, beside its services
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["status"] == "success" and not any("starts none" in w for w in doc.get("warnings", []))
    plan = json.loads((repo / ".devcontainer" / "setupbot-plan.json").read_text())
    assert [s["name"] for s in plan["plan"]["services"]] == ["redis"]
    report = (repo / ".devcontainer" / "setup-report.md").read_text()
    assert "on a private network with only redis" in report and "with no network" not in report
    devcontainer = parse_devcontainer((repo / ".devcontainer" / "devcontainer.json").read_text())
    assert devcontainer["dockerComposeFile"] == ["../docker-compose.yml", "compose.yaml"]  # extended, not copied
    compose = yaml.safe_load((repo / ".devcontainer" / "compose.yaml").read_text())
    # the rust image has no Python: no localhost relay, the tests find redis by its name
    assert compose["services"]["app"]["command"] == ["sleep", "infinity"]
    assert compose["services"]["app"]["environment"]["REDIS_URL"] == "redis://redis:6379/0"


def test_under_buildkit_the_dockerfile_keeps_crates_and_target_in_cache_mounts(tmp_path):
    """An engine that builds with BuildKit proves a Dockerfile with the cache mounts; the classic
    builder's proves one without (it cannot parse --mount)."""

    class BuildKitEngine(Engine):
        def buildkit_available(self):
            return True

    repo = _copy("rust-crate", tmp_path)
    out = run_rust_setup(repo, _settings(repo), BuildKitEngine(), available=["1.85"])
    assert out.run_record.status == "success"
    text = out.run_record.dockerfile
    assert "RUN --mount=type=cache,id=cargo-registry,target=/var/cache/cargo/registry,sharing=locked" in text
    assert "--mount=type=cache,id=cargo-target-rust-crate,target=/var/cache/cargo/target-rust-crate" in text
    assert "needs BuildKit" in text
    repo2 = _copy("rust-workspace", tmp_path)
    plain = run_rust_setup(repo2, _settings(repo2), Engine(), available=["1.85"]).run_record.dockerfile
    assert "--mount" not in plain and "RUN cargo build --tests --workspace --locked" in plain
