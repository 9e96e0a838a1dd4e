"""Diagnose rules of the Rust failure classes (issue #18, "Diagnose and repair").

Each rule turns a line of cargo / rustc / build-script output into a ``Signature`` of the shared
shape (bot.loop.diagnose), so the repair knowledge keys on the same kinds across ecosystems:
``missing_pkg_config_module`` / ``missing_header`` / ``missing_command`` mean what they mean for a
Python wheel build, with the Debian package to install in ``key`` where the log names it.
Rust-only kinds: ``rust_floor`` (a toolchain older than the MSRV or the edition; key: the
version needed), ``stale_lock`` (Cargo.lock out of date with --locked), ``sys_build_failed``
(a -sys crate's build script failed; key: the crate), ``nightly_feature``, ``missing_submodule`` (a build
script's vendored source is a git submodule the checkout lacks; key: its path), ``missing_rust_component``
(a build script runs rustfmt or clippy, which the toolchain lacks; key: the component).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from bot.debian import HEADER_PACKAGES
from bot.debian import PKG_CONFIG_PACKAGES as PC_PACKAGES
from bot.ecosystems.rust.sysdeps import SYSTEM_CRATES
from bot.logtext import strip_ansi
from bot.loop.diagnose import SERVICE_PORTS, Signature

COMMAND_PACKAGES = {
    "protoc": "protobuf-compiler",
    "cmake": "cmake",
    "clang": "clang",
    "make": "make",
    "pkg-config": "pkg-config",
    "pkgconf": "pkg-config",
    "perl": "perl",
    "nasm": "nasm",
    "capnp": "capnproto",
    "g++": "g++",
    "c++": "g++",
    "python3": "python3",
    "git": "git",
    "flatc": "flatbuffers-compiler",
    "autoreconf": "autoconf",
    "libtoolize": "libtool",
}

# a binary a build script runs -> the toolchain component that ships it
RUST_COMPONENTS = {"rustfmt": "rustfmt", "cargo-fmt": "rustfmt", "clippy": "clippy", "cargo-clippy": "clippy"}

Rule = tuple[str, str, "re.Pattern[str]", Callable[["re.Match[str]"], str]]


def _rule(kind: str, category: str, pattern: str, key: Callable[[re.Match[str]], str]) -> Rule:
    return (kind, category, re.compile(pattern, re.MULTILINE), key)


def _pc(m: re.Match[str]) -> str:
    module = m.group(1).strip("`'\"")
    return PC_PACKAGES.get(module, module)


def _command(m: re.Match[str]) -> str:
    name = next(g for g in m.groups() if g)
    return COMMAND_PACKAGES.get(name, name)


def _floor(m: re.Match[str]) -> str:
    parts = next(g for g in m.groups() if g).split(".")
    return ".".join(parts[:2])


RULES: list[Rule] = [
    # --- system libraries a -sys build script looks for ------------------------------------------
    _rule(
        "missing_pkg_config_module",
        "toolchain",
        r"(?:The system library `([\w.+\-]+)` required by crate `[\w\-]+` was not found"
        r"|Package ([\w.+\-]+) was not found in the pkg-config search path)",
        lambda m: _pc_any(m),
    ),
    _rule(
        "missing_pkg_config_module",
        "toolchain",
        r"Could not find (openssl) via pkg-config|Could not find directory of (openssl) installation",
        lambda m: "libssl-dev",
    ),
    _rule(
        "missing_pkg_config",
        "toolchain",
        r"(?:Could not run `\"?pkg-config\"?|pkg-config has not been configured|"
        r"`\"pkg-config\"[^`]*` did not exit successfully.*?No such file or directory|"
        r"Failed to run `\"pkg-config\"|pkg-config command could not be found)",
        lambda m: "pkg-config",
    ),
    _rule(
        "missing_header",
        "toolchain",
        r"fatal error: ([\w./+\-]+\.h(?:pp)?): No such file or directory",
        lambda m: HEADER_PACKAGES.get(m.group(1), m.group(1)),
    ),
    _rule(
        "missing_header",
        "toolchain",
        r"Unable to find libclang|couldn't find any valid shared libraries matching: \['libclang\.so'",
        lambda m: "libclang-dev",
    ),
    _rule(
        "missing_shared_lib",
        "toolchain",
        r"(?:rust-lld|ld(?:\.bfd|\.gold)?): (?:error: )?(?:cannot find|unable to find library) -l([\w.+\-]+)",
        lambda m: f"lib{m.group(1)}",
    ),
    _rule(
        "missing_pq",
        "toolchain",
        r"(?:cannot find -lpq|pg_config: not found|Could not find pg_config)",
        lambda m: "libpq-dev",
    ),
    # --- tools build scripts run -----------------------------------------------------------------
    _rule(
        "missing_command",
        "toolchain",
        r"(?:Could not find `(protoc)`|(protoc) failed: No such file|failed to invoke (protoc)"
        r"|is `(cmake)` not installed\?|failed to execute command: No such file or directory \(os error 2\)\n"
        r".*?is `(cmake)` not installed"
        r"|failed to find tool \"(c\+\+|g\+\+|clang|cc)\"|error occurred: Failed to find tool\. Is `(g\+\+|c\+\+|clang)` installed"
        r"|Failed to find (nasm)|(make): not found|(perl): not found|(git): not found"
        r"|could not execute process `(cmake|make|protoc|perl|clang)[^`]*` \(never executed\))",
        _command,
    ),
    # a build script (tonic-build, prost-build) formats generated code with rustfmt: the official
    # images install the minimal rustup profile and the Debian stand-ins no rustfmt package
    _rule(
        "missing_rust_component",
        "toolchain",
        r"(?:error running (rustfmt): Os \{ code: 2, kind: NotFound"
        r"|'(rustfmt|clippy|cargo-fmt|cargo-clippy)' is not installed for the toolchain"
        r"|\b(rustfmt): (?:command )?not found)",
        lambda m: RUST_COMPONENTS[next(g for g in m.groups() if g)],
    ),
    _rule(
        "missing_compiler",
        "toolchain",
        r"(?:error: linker `(cc|gcc|clang)` not found|error occurred: Failed to find tool\. Is `(gcc|cc)` installed)",
        _command,
    ),
    # --- a -sys build script failed; which crate (the library comes from a rule above) ----------
    _rule(
        "sys_build_failed",
        "installation",
        r"failed to run custom build command for `([\w\-]+) v[\w.+\-]+`",
        lambda m: m.group(1),
    ),
    # --- toolchain older than the MSRV or the edition --------------------------------------------
    _rule(
        "rust_floor",
        "version",
        r"(?:requires rustc (\d+\.\d+(?:\.\d+)?) or newer"
        r"|package `[^`]+` cannot be built because it requires rustc (\d+\.\d+(?:\.\d+)?) or newer"
        r"|rustc (\d+\.\d+(?:\.\d+)?) or newer is required"
        r"|^\s*\S+@\S+ requires rustc (\d+\.\d+(?:\.\d+)?)\s*$)",
        _floor,
    ),
    _rule(
        "rust_floor",
        "version",
        r"feature `edition(2024)` is required|this version of Cargo is older than the `(2024)` edition",
        lambda m: "1.85",
    ),
    _rule(
        "rust_floor",
        "version",
        r"feature `edition(2021)` is required|this version of Cargo is older than the `(2021)` edition",
        lambda m: "1.56",
    ),
    _rule(
        "rust_floor",
        "version",
        r"lock file version `?(4)`? was found, but this version of Cargo does not understand this lock file",
        lambda m: "1.78",
    ),
    _rule(
        "nightly_feature",
        "version",
        r"`#!\[feature\]` may not be used on the stable release channel|"
        r"the option `Z` is only accepted on the nightly compiler",
        lambda m: "nightly",
    ),
    # --- a build script's vendored C source is a git submodule that was not checked out ----------
    _rule(
        "missing_submodule",
        "installation",
        r'source directory "/workspace/([^"\n]+)" does not appear to contain CMakeLists\.txt',
        lambda m: m.group(1),
    ),
    # --- lock file out of date with --locked -----------------------------------------------------
    _rule(
        "stale_lock",
        "installation",
        r"(?:the lock file [^\n]* needs to be updated but --locked was passed"
        r"|cannot update the lock file [^\n]* because --locked was passed)",
        lambda m: "Cargo.lock",
    ),
    _rule(
        "missing_lock",
        "installation",
        r"the lock file [^\n]* needs to be created but --locked was passed|"
        r"lock file [^\n]*Cargo\.lock[^\n]* does not exist",
        lambda m: "Cargo.lock",
    ),
    # --- tests that need a service -----------------------------------------------------------------
    _rule(
        "connection_refused",
        "service",
        r"(?:127\.0\.0\.1|localhost|\[::1\]):(\d{2,5})[^\n]{0,80}?(?:Connection refused|ConnectionRefused)",
        lambda m: SERVICE_PORTS.get(m.group(1), m.group(1)),
    ),
    _rule("connection_refused", "service", r"Connection refused|ConnectionRefused", lambda m: ""),
    _rule(
        "missing_env",
        "configuration",
        r"environment variable `?([A-Z][A-Z0-9_]{2,})`? (?:not (?:found|defined|present|set)|must be set)"
        r"|([A-Z][A-Z0-9_]{2,}) must be set",
        lambda m: next(g for g in m.groups() if g),
    ),
    # --- a test that failed on its own terms ------------------------------------------------------
    _rule("test_failed", "test", r"^test (.+?) \.\.\. FAILED$", lambda m: m.group(1)),
]


def _pc_any(m: re.Match[str]) -> str:
    module = next(g for g in m.groups() if g)
    return PC_PACKAGES.get(module, module)


def _iter(output: str) -> Iterator[tuple[int, Signature]]:
    for kind, category, pattern, key_fn in RULES:
        for m in pattern.finditer(output):
            key = key_fn(m)
            start = output.rfind("\n", 0, m.start()) + 1
            end = output.find("\n", m.end())
            line = output[start : end if end != -1 else len(output)].strip()
            yield m.start(), Signature(kind, category, key, line[:300])


def diagnose(output: str) -> list[Signature]:
    """Every Rust signature in ``output``, earliest first, one per (kind, key)."""
    if not output:
        return []
    output = strip_ansi(output)
    if len(output) > 2_000_000:
        output = output[:1_000_000] + "\n" + output[-1_000_000:]
    found: dict[tuple[str, str], tuple[int, Signature]] = {}
    for pos, sig in _iter(output):
        if sig.ident not in found or pos < found[sig.ident][0]:
            found[sig.ident] = (pos, sig)
    if any(k == "connection_refused" and key for k, key in found):
        found.pop(("connection_refused", ""), None)  # the port-bearing line names the service
    if any(k == "missing_submodule" for k, _ in found):
        # the build script failed for want of its vendored source, not of a system package
        found = {ident: v for ident, v in found.items() if ident[0] != "sys_build_failed"}
    return [s for _, s in sorted(found.values(), key=lambda t: t[0])]


# a linker's -l<name> -> the Debian package with lib<name>.so, where the name is not a
# pkg-config module's (those are looked up in PC_PACKAGES, as <name> and lib<name>)
LINK_PACKAGES = {
    "ssl": "libssl-dev",
    "crypto": "libssl-dev",
    "z": "zlib1g-dev",
    "zstd": "libzstd-dev",
    "pq": "libpq-dev",
    "curl": "libcurl4-openssl-dev",
    "ssh2": "libssh2-1-dev",
    "bz2": "libbz2-dev",
    "pcre2-8": "libpcre2-dev",
    "xml2": "libxml2-dev",
    "ffi": "libffi-dev",
    "gmp": "libgmp-dev",
    "onig": "libonig-dev",
    "mysqlclient": "default-libmysqlclient-dev",
    "asound": "libasound2-dev",
    "X11": "libx11-dev",
    "usb-1.0": "libusb-1.0-0-dev",
    "hdf5": "libhdf5-dev",
    "freetype": "libfreetype-dev",
    "clang": "libclang-dev",
}


def link_package(name: str) -> str | None:
    """The Debian -dev package for a linker's ``-l<name>``; None when the name is not known."""
    return LINK_PACKAGES.get(name) or PC_PACKAGES.get(name) or PC_PACKAGES.get(f"lib{name}")


def packages_for(sig: Signature) -> list[str]:
    """The Debian packages that answer a signature (for the apt_install repair)."""
    if sig.kind in ("missing_pkg_config_module", "missing_header", "missing_command", "missing_compiler", "missing_pq"):
        return [sig.key] + (["pkg-config"] if sig.kind == "missing_pkg_config_module" else [])
    if sig.kind == "missing_shared_lib":
        package = link_package(sig.key.removeprefix("lib"))
        return [package] if package else []
    if sig.kind == "missing_pkg_config":
        return ["pkg-config"]
    if sig.kind == "sys_build_failed" and sig.key in SYSTEM_CRATES:
        return list(SYSTEM_CRATES[sig.key].packages)
    return []
