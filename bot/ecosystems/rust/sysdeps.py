"""What a crate's build needs from the system, as data: ``*-sys`` crates and build helpers mapped
to Debian packages (the names are the same on the official ``rust:*-slim`` images, which are
Debian, and on the stand-ins).

A crate that is not in ``SYSTEM_CRATES`` needs nothing from apt (pure Rust, or bundles its C
source and needs only the C compiler every rust image has). ``FOREIGN_SYS`` lists ``-sys`` crates
that bind another platform's system (Windows, macOS, wasm) or a kernel interface with no
library: Cargo.lock lists them for every target, and they are not a missing mapping.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SystemNeed:
    packages: tuple[str, ...]  # Debian packages to apt-get install
    why: str  # what the build script looks for, for the report
    bundled: bool = False  # builds its own copy by default; the package is a fallback


def _need(*packages: str, why: str, bundled: bool = False) -> SystemNeed:
    return SystemNeed(tuple(packages), why, bundled)


# crate name -> what its build script needs. Sources: each crate's build.rs (pkg-config probe
# names) and the Debian package that ships the .pc file.
SYSTEM_CRATES: dict[str, SystemNeed] = {
    "openssl-sys": _need("libssl-dev", "pkg-config", why="OpenSSL headers and openssl.pc"),
    "libsqlite3-sys": _need("libsqlite3-dev", "pkg-config", why="sqlite3.pc (unless the `bundled` feature)"),
    "zstd-sys": _need("libzstd-dev", "pkg-config", why="libzstd (bundled by default)", bundled=True),
    "libz-sys": _need("zlib1g-dev", "pkg-config", why="zlib.pc"),
    "libz-ng-sys": _need("cmake", why="builds zlib-ng with cmake", bundled=True),
    "curl-sys": _need("libcurl4-openssl-dev", "pkg-config", why="libcurl.pc"),
    "libgit2-sys": _need(
        "libgit2-dev", "pkg-config", why="libgit2.pc (vendored when the system one does not match)", bundled=True
    ),
    "libssh2-sys": _need("libssh2-1-dev", "pkg-config", why="libssh2.pc", bundled=True),
    "pq-sys": _need("libpq-dev", why="libpq (pg_config)"),
    "mysqlclient-sys": _need("default-libmysqlclient-dev", "pkg-config", why="mysqlclient.pc"),
    "rdkafka-sys": _need("librdkafka-dev", "cmake", "pkg-config", why="builds librdkafka (cmake feature) or links it"),
    "alsa-sys": _need("libasound2-dev", "pkg-config", why="alsa.pc"),
    "libudev-sys": _need("libudev-dev", "pkg-config", why="libudev.pc"),
    "libdbus-sys": _need("libdbus-1-dev", "pkg-config", why="dbus-1.pc"),
    "libsystemd-sys": _need("libsystemd-dev", "pkg-config", why="libsystemd.pc"),
    "x11": _need("libx11-dev", "pkg-config", why="x11.pc"),
    "xcb": _need("libxcb1-dev", "pkg-config", why="xcb.pc"),
    "freetype-sys": _need("libfreetype-dev", "pkg-config", why="freetype2.pc"),
    "servo-fontconfig-sys": _need("libfontconfig-dev", "pkg-config", why="fontconfig.pc"),
    "yeslogic-fontconfig-sys": _need("libfontconfig-dev", "pkg-config", why="fontconfig.pc"),
    "expat-sys": _need("libexpat1-dev", "pkg-config", why="expat.pc"),
    "glib-sys": _need("libglib2.0-dev", "pkg-config", why="glib-2.0.pc"),
    "gobject-sys": _need("libglib2.0-dev", "pkg-config", why="gobject-2.0.pc"),
    "gio-sys": _need("libglib2.0-dev", "pkg-config", why="gio-2.0.pc"),
    "cairo-sys-rs": _need("libcairo2-dev", "pkg-config", why="cairo.pc"),
    "pango-sys": _need("libpango1.0-dev", "pkg-config", why="pango.pc"),
    "gdk-pixbuf-sys": _need("libgdk-pixbuf-2.0-dev", "pkg-config", why="gdk-pixbuf-2.0.pc"),
    "gdk-sys": _need("libgtk-3-dev", "pkg-config", why="gdk-3.0.pc"),
    "gtk-sys": _need("libgtk-3-dev", "pkg-config", why="gtk+-3.0.pc"),
    "gtk4-sys": _need("libgtk-4-dev", "pkg-config", why="gtk4.pc"),
    "webkit2gtk-sys": _need("libwebkit2gtk-4.1-dev", "pkg-config", why="webkit2gtk-4.1.pc"),
    "wayland-sys": _need("libwayland-dev", "pkg-config", why="wayland-client.pc"),
    "xkbcommon-sys": _need("libxkbcommon-dev", "pkg-config", why="xkbcommon.pc"),
    "libusb1-sys": _need("libusb-1.0-0-dev", "pkg-config", why="libusb-1.0.pc", bundled=True),
    "pcap-sys": _need("libpcap-dev", why="libpcap"),
    "pcap": _need("libpcap-dev", why="libpcap"),
    "libseccomp-sys": _need("libseccomp-dev", why="libseccomp"),
    "libpulse-sys": _need("libpulse-dev", "pkg-config", why="libpulse.pc"),
    "lzma-sys": _need("liblzma-dev", "pkg-config", why="liblzma.pc (static build by default)", bundled=True),
    "bzip2-sys": _need("libbz2-dev", why="libbz2 (bundled by default)", bundled=True),
    "libsodium-sys": _need("libsodium-dev", "pkg-config", why="libsodium.pc"),
    "libsodium-sys-stable": _need("libsodium-dev", "pkg-config", why="libsodium.pc", bundled=True),
    "onig_sys": _need("libonig-dev", "pkg-config", why="oniguruma.pc", bundled=True),
    "zmq-sys": _need("libzmq3-dev", "pkg-config", why="libzmq.pc"),
    "pcre2-sys": _need("libpcre2-dev", "pkg-config", why="libpcre2-8.pc", bundled=True),
    "hdf5-sys": _need("libhdf5-dev", "pkg-config", why="hdf5"),
    "libffi-sys": _need("libffi-dev", "pkg-config", why="libffi.pc"),
    "magic-sys": _need("libmagic-dev", why="libmagic"),
    "gpgme-sys": _need("libgpgme-dev", why="gpgme-config"),
    "nettle-sys": _need("nettle-dev", "libclang-dev", "clang", "pkg-config", why="nettle.pc and bindgen"),
    "leptonica-sys": _need("libleptonica-dev", "libclang-dev", "pkg-config", why="lept.pc and bindgen"),
    "tesseract-sys": _need("libtesseract-dev", "libclang-dev", "pkg-config", why="tesseract.pc and bindgen"),
    "sdl2-sys": _need("libsdl2-dev", why="sdl2-config"),
    "llvm-sys": _need("llvm-dev", "libclang-dev", why="llvm-config"),
    "clang-sys": _need("libclang-dev", why="libclang.so"),
    "librocksdb-sys": _need("libclang-dev", "clang", why="bindgen over the bundled RocksDB", bundled=True),
    "libbpf-sys": _need("libelf-dev", "zlib1g-dev", "pkg-config", why="libelf and zlib", bundled=True),
    "tikv-jemalloc-sys": _need("make", why="builds jemalloc with make", bundled=True),
    "jemalloc-sys": _need("make", why="builds jemalloc with make", bundled=True),
    "aws-lc-sys": _need("cmake", "clang", why="builds AWS-LC (cmake on older releases)", bundled=True),
    "pyo3-build-config": _need("python3-dev", why="a Python interpreter and its headers"),
    "python3-sys": _need("python3-dev", why="a Python interpreter and its headers"),
    "gettext-sys": _need("gettext", why="gettext", bundled=True),
    "libxml": _need("libxml2-dev", "libclang-dev", "pkg-config", why="libxml-2.0.pc and bindgen"),
    "tss-esapi-sys": _need("libtss2-dev", "pkg-config", why="tss2-esys.pc"),
    "libpq-sys": _need("libpq-dev", why="libpq"),
    "openblas-src": _need("libopenblas-dev", why="OpenBLAS (system feature)"),
    "netcdf-sys": _need("libnetcdf-dev", why="netcdf"),
    "proj-sys": _need("libproj-dev", "pkg-config", "libclang-dev", why="proj.pc and bindgen"),
    "gdal-sys": _need("libgdal-dev", "pkg-config", "libclang-dev", why="gdal.pc and bindgen"),
    "geos-sys": _need("libgeos-dev", why="geos-config"),
    "ffmpeg-sys-next": _need(
        "libavcodec-dev",
        "libavformat-dev",
        "libavutil-dev",
        "libswscale-dev",
        "libavfilter-dev",
        "libavdevice-dev",
        "libclang-dev",
        "pkg-config",
        why="the FFmpeg .pc files and bindgen",
    ),
    "libgpiod-sys": _need("libgpiod-dev", why="libgpiod"),
    "libmount-sys": _need("libmount-dev", "pkg-config", why="mount.pc"),
    "libarchive3-sys": _need("libarchive-dev", "pkg-config", why="libarchive.pc"),
    "krb5-sys": _need("libkrb5-dev", why="krb5-config"),
    "lua-src": _need("make", why="builds Lua", bundled=True),
}

# Build helpers met as (build-)dependencies: what their presence says the build script runs.
BUILD_TOOLS: dict[str, SystemNeed] = {
    "pkg-config": _need("pkg-config", why="the build script probes libraries with pkg-config"),
    "system-deps": _need("pkg-config", why="the build script probes libraries with pkg-config"),
    "bindgen": _need("libclang-dev", "clang", why="bindgen parses C headers with libclang"),
    "cmake": _need("cmake", why="the build script runs cmake"),
    "autotools": _need("autoconf", "automake", "libtool", "make", why="the build script runs ./configure"),
    "prost-build": _need("protobuf-compiler", why="prost-build runs protoc"),
    "tonic-build": _need("protobuf-compiler", why="tonic-build runs protoc"),
    "tonic-prost-build": _need("protobuf-compiler", why="tonic-build runs protoc"),
    "protoc-rust": _need("protobuf-compiler", why="protoc-rust runs protoc"),
    "protobuf-codegen-pure": _need(why="pure Rust protobuf codegen"),
    "capnpc": _need("capnproto", why="capnpc runs the capnp compiler"),
    "cxx-build": _need("g++", why="cxx-build compiles C++"),
    "cc": _need(why="a C compiler (gcc is in every rust image)"),
    "nasm-rs": _need("nasm", why="the build script assembles with nasm"),
    "flatc-rust": _need("flatbuffers-compiler", why="the build script runs flatc"),
}

# Crates that bundle protoc make protobuf-compiler unnecessary.
PROTOC_BUNDLED = frozenset({"protobuf-src", "protoc-bin-vendored"})

FOREIGN_SYS = frozenset(
    {
        "windows-sys",
        "winapi",
        "core-foundation-sys",
        "security-framework-sys",
        "io-kit-sys",
        "objc-sys",
        "objc2-encode",
        "js-sys",
        "web-sys",
        "fsevent-sys",
        "mach-sys",
        "mach2",
        "linux-raw-sys",
        "inotify-sys",
        "errno-dragonfly",
        "hermit-abi",
        "redox_syscall",
        "android_system_properties",
        "kqueue-sys",
        "coreaudio-sys",
        "cocoa",
        "coreservices-sys",
        "system-configuration-sys",
        "ndk-sys",
        "oboe-sys",
        "wasi",
        "winreg",
        "windows-targets",
        "libc",
        "rustix",
        "nix",
        "widestring",
    }
)


# toolchain components a build script may run (a repair adds them, or the plan when the CI job
# that runs the tests installs them; only these names, never other repository text):
# component -> its Debian packages beside rustc, and beside rustc-web (the stand-ins' two toolchains)
COMPONENTS: dict[str, tuple[str, str]] = {
    "rustfmt": ("rustfmt", "rustfmt-web"),
    "clippy": ("rust-clippy", "rust-web-clippy"),
}


def is_sys_name(name: str) -> bool:
    return name.endswith("-sys") or name.endswith("_sys") or name.endswith("-sys-rs")


def known(name: str) -> SystemNeed | None:
    return SYSTEM_CRATES.get(name) or BUILD_TOOLS.get(name)
