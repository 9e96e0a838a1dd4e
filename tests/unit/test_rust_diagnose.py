"""Rust failure classes -> signatures (issue #18). The first three logs are real engine builds
of the fixtures (tests/fixtures/rust-logs, captured from docker builds on rust:1.85-slim)."""

from __future__ import annotations

from pathlib import Path

from bot.ecosystems.rust.diagnose import diagnose, packages_for

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "rust-logs"


def kinds(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for s in diagnose(text):
        out.setdefault(s.kind, []).append(s.key)
    return out


def test_sys_crate_without_its_dev_package():
    found = kinds((LOGS / "openssl-sys-missing.log").read_text())
    assert found["sys_build_failed"] == ["openssl-sys"]
    assert found["missing_pkg_config_module"] == ["libssl-dev"]
    assert found["missing_pkg_config"] == ["pkg-config"]
    wanted = {p for s in diagnose((LOGS / "openssl-sys-missing.log").read_text()) for p in packages_for(s)}
    assert {"libssl-dev", "pkg-config"} <= wanted


def test_toolchain_older_than_msrv():
    sigs = diagnose((LOGS / "msrv-above-toolchain.log").read_text())
    floor = [s for s in sigs if s.kind == "rust_floor"]
    assert [(s.key, s.category) for s in floor] == [("1.88", "version")]
    assert "requires rustc 1.88" in floor[0].message


def test_stale_lock_with_locked():
    found = kinds((LOGS / "stale-lock.log").read_text())
    assert found["stale_lock"] == ["Cargo.lock"]


def test_older_cargo_messages_for_msrv_edition_and_lock_format():
    assert kinds(
        "error: package `clap v4.5.0` cannot be built because it requires rustc 1.74 or newer, "
        "while the currently active rustc version is 1.63.0"
    )["rust_floor"] == ["1.74"]
    assert kinds(
        "error: failed to parse manifest at `/w/Cargo.toml`\n\nCaused by:\n  feature `edition2024` is required"
    )["rust_floor"] == ["1.85"]
    assert kinds(
        "error: failed to parse lock file at: /w/Cargo.lock\n\nCaused by:\n  lock file version 4 was found, "
        "but this version of Cargo does not understand this lock file, perhaps Cargo needs to be updated?"
    )["rust_floor"] == ["1.78"]


def test_missing_protoc_cmake_clang_and_compiler():
    protoc = (
        "error: failed to run custom build command for `my-proto v0.1.0`\n"
        '  Error: Custom { kind: NotFound, error: "Could not find `protoc`. If `protoc` is installed, try setting '
        'the `PROTOC` environment variable" }'
    )
    assert kinds(protoc)["missing_command"] == ["protobuf-compiler"]
    cmake = (
        '  running: "cmake" "/root/.cargo/registry/src/libz-ng-sys-1.1.15/src/zlib-ng"\n'
        "  --- stderr\n  thread 'main' panicked at cmake-0.1.50/src/lib.rs:1098:5:\n\n"
        "  failed to execute command: No such file or directory (os error 2)\n  is `cmake` not installed?"
    )
    assert kinds(cmake)["missing_command"] == ["cmake"]
    clang = (
        "  thread 'main' panicked at bindgen-0.69.4/lib.rs:622:31:\n  Unable to find libclang: \"couldn't find any "
        "valid shared libraries matching: ['libclang.so', 'libclang-*.so']\""
    )
    assert kinds(clang)["missing_header"] == ["libclang-dev"]
    assert kinds("error: linker `cc` not found\n  |\n  = note: No such file or directory (os error 2)")[
        "missing_compiler"
    ] == ["cc"]


def test_feature_needing_a_system_library_through_pkg_config():
    text = (
        "  The system library `libpq` required by crate `pq-sys` was not found.\n"
        "  The file `libpq.pc` needs to be installed and the PKG_CONFIG_PATH environment variable must contain its parent directory."
    )
    assert kinds(text)["missing_pkg_config_module"] == ["libpq-dev"]


def test_tests_that_need_a_service():
    sigs = diagnose(
        "test db::it_connects ... FAILED\n---- db::it_connects stdout ----\n"
        "thread 'db::it_connects' panicked at tests/db.rs:9:10:\n"
        "error connecting to server: Connection refused (os error 111) at 127.0.0.1:5432 "
        "ConnectionRefused\n"
    )
    found = {s.kind: s for s in sigs}
    assert found["test_failed"].key == "db::it_connects"
    refused = [s for s in sigs if s.kind == "connection_refused"]
    assert [s.key for s in refused] == ["postgres"]
    assert refused[0].category == "service"
    assert kinds("thread 'x' panicked: DATABASE_URL must be set")["missing_env"] == ["DATABASE_URL"]


def test_clean_output_has_no_signature():
    assert diagnose((LOGS / "cargo-test-pass.log").read_text()) == []
    assert diagnose("") == []


def test_vendored_source_in_a_submodule_the_checkout_lacks_is_reported_not_repaired():
    """libgit2-sys and the like compile C from a git submodule; a checkout without it fails in
    CMake. That is no package to install: the loop says to check out the submodules."""
    from bot.ecosystems.rust.graph import RUNTIME
    from bot.ecosystems.rust.repair import decide
    from bot.graph.model import DepGraph, Node

    log = (
        '  CMake Error: The source directory "/workspace/libgit2-sys/libgit2" does not appear to contain '
        "CMakeLists.txt.\n  Specify --help for usage, or press the help button on the CMake GUI.\n"
        "  build script failed, must exit now\n"
        "error: failed to run custom build command for `libgit2-sys v0.6.11 (/workspace/libgit2-sys)`\n"
    )
    assert kinds(log) == {"missing_submodule": ["libgit2-sys/libgit2"]}  # not the -sys build's packages
    g = DepGraph()
    g.add(Node(RUNTIME, "RUNTIME", "rust", "SATISFIED", attrs={"version": "1.96"}))
    decision = decide(diagnose(log), g, ["1.96"])
    assert decision.repair is None and "--recurse-submodules" in decision.reason


def test_a_library_the_linker_cannot_find_is_its_dev_package():
    """A -sys crate that links without pkg-config (a bare `cargo:rustc-link-lib`) fails only when
    the test binaries link; the linker's -l<name> names the Debian package."""
    text = (
        '  = note: "cc" "-m64" "-o" "/workspace/target/debug/deps/config-0da69ed5f4a5f653"\n'
        "  = note: /usr/bin/ld: cannot find -lsqlite3: No such file or directory\n"
        "          collect2: error: ld returned 1 exit status\n"
        'error: could not compile `app` (test "config") due to 1 previous error\n'
    )
    sigs = [s for s in diagnose(text) if s.kind == "missing_shared_lib"]
    assert [packages_for(s) for s in sigs] == [["libsqlite3-dev"]]
    assert [packages_for(s) for s in diagnose("/usr/bin/ld: cannot find -lz: No such file")] == [["zlib1g-dev"]]
    assert [packages_for(s) for s in diagnose("/usr/bin/ld: cannot find -lnosuchlib: No such file")] == [[]]


def test_an_unknown_link_library_gets_no_guess():
    from bot.ecosystems.rust.prove import make_plan
    from bot.ecosystems.rust.repair import apt_repair

    graph = make_plan(Path(__file__).resolve().parents[1] / "fixtures" / "repos" / "rust-crate", ["1.85"]).graph
    (sig,) = [
        s for s in diagnose("/usr/bin/ld: cannot find -lnosuchlib: No such file") if s.kind == "missing_shared_lib"
    ]
    decision = apt_repair(sig, graph)
    assert decision is not None and decision.repair is None and "no rule maps libnosuchlib" in decision.reason
    (sig,) = [s for s in diagnose("/usr/bin/ld: cannot find -lsqlite3: No such file") if s.kind == "missing_shared_lib"]
    decision = apt_repair(sig, graph)
    assert decision is not None and decision.repair is not None
    assert decision.repair.atoms[0].args["packages"] == ["libsqlite3-dev"]
