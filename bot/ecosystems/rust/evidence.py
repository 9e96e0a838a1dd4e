"""What a Rust repository says about itself, read statically (issue #18, item 1).

Every file is attacker-controlled: it is read through ``RepoFiles`` (bot.safefs: no link out of
the repository, size cap) and parsed with ``tomllib`` only; nothing here runs cargo or a build
script. Counts are capped (crates, glob matches, lock packages), a malformed manifest is a
warning and the scan goes on with the rest.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.ecosystems.rust import sysdeps
from bot.ecosystems.rust.sysdeps import COMPONENTS
from bot.evidence import services as compose_services
from bot.evidence import workflows
from bot.evidence.files import RepoFiles, line_of, load_toml
from bot.evidence.model import Evidence, ScanWarning, ServiceRequirement, Source
from bot.evidence.yamlload import load_yaml

MAX_CRATES = 500  # workspace members and path dependencies followed
MAX_LOCK_PACKAGES = 20000
MAX_CI_COMMANDS = 200
SKIP_SEGMENTS = {"target", "vendor", "node_modules", ".git"}
# The rustc that first accepts each edition (The Rust Edition Guide).
EDITION_FLOOR = {"2015": "1.0", "2018": "1.31", "2021": "1.56", "2024": "1.85"}
# The cargo that first reads each Cargo.lock format version (cargo's lockfile docs).
LOCK_FLOOR = {1: "1.0", 2: "1.41", 3: "1.53", 4: "1.78"}
_VERSION = re.compile(r"^\d+(\.\d+){0,2}$")


@dataclass
class Crate:
    folder: str  # "" for the root
    manifest: str  # repository-relative Cargo.toml
    name: str | None = None
    edition: str | None = None
    rust_version: str | None = None
    features: dict[str, list[str]] = field(default_factory=dict)
    dependencies: dict[str, str] = field(default_factory=dict)  # package name -> kind (normal|dev|build)
    build_script: str | None = None  # repository-relative build.rs when the crate has one
    lib_path: str | None = None  # explicit [lib] path
    has_bins: bool = False  # declares [[bin]] targets
    optional: dict[str, str] = field(default_factory=dict)  # optional dependency key -> package name
    declared_targets: list[str] = field(default_factory=list)  # crate-relative files of [[bin]]/[[test]]/...

    def default_enabled(self) -> set[str]:
        """Optional dependency keys that the ``default`` feature switches on (transitively);
        ``x?/feat`` (a weak feature) switches nothing on."""
        enabled: set[str] = set()
        seen: set[str] = set()
        stack = ["default"]
        while stack:
            feature = stack.pop()
            if feature in seen:
                continue
            seen.add(feature)
            for item in self.features.get(feature, []):
                if item.startswith("dep:"):
                    enabled.add(item[4:])
                elif "/" in item:
                    head = item.split("/", 1)[0]
                    if not head.endswith("?") and head in self.optional:
                        enabled.add(head)
                    if head in self.features:
                        stack.append(head)
                elif item in self.features:
                    stack.append(item)
                elif item in self.optional:
                    enabled.add(item)
        return enabled

    @property
    def virtual(self) -> bool:
        return self.name is None


@dataclass
class Toolchain:
    channel: str  # "1.75.0", "stable", "nightly-2024-01-01"
    source: Source
    components: list[str] = field(default_factory=list)


@dataclass
class SystemPackage:
    package: str
    why: str
    source: Source
    certain: bool  # named by a manifest (not only listed in Cargo.lock for some feature/target)


@dataclass
class RustEvidence:
    root: str | None = None  # "Cargo.toml" when the repository is a Rust one
    crates: list[Crate] = field(default_factory=list)
    workspace_members: list[str] = field(default_factory=list)
    lockfile: str | None = None
    lock_version: int | None = None
    lock_packages: dict[str, list[str]] = field(default_factory=dict)
    toolchain: Toolchain | None = None
    ci_commands: list[tuple[list[str], Source]] = field(default_factory=list)
    ci_toolchains: list[tuple[str, Source]] = field(default_factory=list)
    system_packages: list[SystemPackage] = field(default_factory=list)
    unknown_sys: list[tuple[str, Source]] = field(default_factory=list)
    feature_gated: list[tuple[str, Source]] = field(default_factory=list)  # optional, off by default
    cargo_config: str | None = None  # .cargo/config.toml, copied with the manifests
    vendored: bool = False  # .cargo/config replaces crates.io by a directory
    services: list[ServiceRequirement] = field(default_factory=list)
    warnings: list[ScanWarning] = field(default_factory=list)
    # toolchain components (rustfmt, clippy) a CI job installs before it runs the tests
    test_components: list[tuple[str, Source]] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.root is not None

    @property
    def uses_nextest(self) -> bool:
        return any(argv[:2] == ["cargo", "nextest"] for argv, _ in self.ci_commands)

    def msrv(self) -> tuple[str, Source] | None:
        """The highest rust-version any crate declares."""
        best: tuple[tuple[int, ...], str, Source] | None = None
        for c in self.crates:
            if c.rust_version and _VERSION.match(c.rust_version):
                key = version_key(c.rust_version)
                if best is None or key > best[0]:
                    best = (key, c.rust_version, Source(c.manifest, None, "rust-version"))
        return (best[1], best[2]) if best else None

    def editions(self) -> list[str]:
        return sorted({c.edition for c in self.crates if c.edition})

    def packages(self) -> list[str]:
        """Debian packages to install, in first-seen order, without duplicates."""
        seen: dict[str, None] = {}
        for p in self.system_packages:
            seen.setdefault(p.package, None)
        return list(seen)

    def feature_needs(self) -> dict[str, list[str]]:
        """``crate/feature`` -> Debian packages, for features that switch on a crate whose build
        needs a system library (``postgres = ["dep:pq-sys"]``, ``ssl = ["openssl-sys"]``)."""
        out: dict[str, list[str]] = {}
        for c in self.crates:
            for feature, enables in c.features.items():
                for item in enables:
                    name = item.removeprefix("dep:").split("/", 1)[0].rstrip("?")
                    need = sysdeps.SYSTEM_CRATES.get(name)
                    if need is not None:
                        key = f"{c.name or c.folder}/{feature}"
                        out.setdefault(key, [])
                        out[key] += [p for p in need.packages if p not in out[key]]
        return out

    def dependency_names(self) -> set[str]:
        names: set[str] = set()
        for c in self.crates:
            names.update(c.dependencies)
        return names


def version_key(text: str) -> tuple[int, ...]:
    parts = [int(p) for p in text.split(".") if p.isdigit()]
    return tuple((parts + [0, 0, 0])[:3])


# ---------------------------------------------------------------------- entry point
def scan_repository(repo: Path | str, output_dir: str | None = None) -> RustEvidence:
    """Read a checkout. ``RustEvidence.found`` is False when there is no Cargo.toml at the root."""
    return _scan_checkout(repo, output_dir)[0]


def files_read(repo: Path | str, output_dir: str | None = None) -> list[str]:
    """The files the scan reads (every Cargo.toml, Cargo.lock, rust-toolchain*, .cargo/config,
    workflows, compose files), repository-relative: the Rust plan's inputs."""
    return sorted(_scan_checkout(repo, output_dir)[1].files_seen)


def _scan_checkout(repo: Path | str, output_dir: str | None) -> tuple[RustEvidence, Evidence]:
    ev = Evidence(repo=Path(repo).resolve())
    files = RepoFiles(Path(repo), ev, output_dir)
    if files.exists("Cargo.toml"):
        # services through the same catalogue as Python: CI `services:` blocks and compose files
        workflows.scan(files, ev)
        compose_services.scan_compose(files, ev)
    rust = scan(files, ev)
    rust.warnings = list(ev.warnings)
    return rust, ev


def scan(files: RepoFiles, ev: Evidence) -> RustEvidence:
    rust = RustEvidence()
    if not files.exists("Cargo.toml"):
        return rust
    rust.root = "Cargo.toml"
    _scan_crates(files, ev, rust)
    _scan_lock(files, ev, rust)
    _scan_toolchain(files, ev, rust)
    _scan_cargo_config(files, ev, rust)
    _scan_workflows(files, ev, rust)
    _system_needs(rust)
    rust.services = list(ev.services)
    return rust


# ---------------------------------------------------------------------- manifests
def _scan_crates(files: RepoFiles, ev: Evidence, rust: RustEvidence) -> None:
    loaded = load_toml(files, "Cargo.toml", ev, "Cargo.toml")
    if loaded is None:
        return
    _text, data = loaded
    workspace = _table(data.get("workspace"))
    inherited = _table(workspace.get("package"))
    ws_deps = _table(workspace.get("dependencies"))
    queue: list[str] = [""]
    if workspace:
        excluded = {_norm(e) for e in _strings(workspace.get("exclude"))}
        for pattern in _strings(workspace.get("members")):
            for folder in _glob_crate_dirs(files, pattern):
                if folder not in excluded and folder not in rust.workspace_members:
                    rust.workspace_members.append(folder)
        queue += rust.workspace_members
    for spec in ws_deps.values():
        path = _string(spec.get("path")) if isinstance(spec, dict) else None
        target = _join("", path) if path else None
        if target is not None:
            queue.append(target)
    seen: set[str] = set()
    while queue and len(rust.crates) < MAX_CRATES:
        folder = queue.pop(0)
        if folder in seen:
            continue
        seen.add(folder)
        crate = _read_crate(files, ev, folder, inherited, ws_deps, queue, data if folder == "" else None)
        if crate is not None:
            rust.crates.append(crate)
    if queue:
        ev.warn("Cargo.toml", None, f"more than {MAX_CRATES} crates; the rest were not read")


def _read_crate(
    files: RepoFiles,
    ev: Evidence,
    folder: str,
    inherited: dict,
    ws_deps: dict,
    queue: list[str],
    preloaded: dict | None,
) -> Crate | None:
    manifest = f"{folder}/Cargo.toml" if folder else "Cargo.toml"
    if preloaded is not None:
        data = preloaded
    else:
        loaded = load_toml(files, manifest, ev, "Cargo.toml")
        if loaded is None:
            if not files.exists(manifest):
                ev.warn(manifest, None, "workspace member without a Cargo.toml; skipped")
            return None
        data = loaded[1]
    crate = Crate(folder, manifest)
    package = _table(data.get("package"))
    if package:
        crate.name = _string(package.get("name"))
        crate.edition = _inherit(package.get("edition"), inherited.get("edition"))
        crate.rust_version = _inherit(package.get("rust-version"), inherited.get("rust-version"))
        crate.build_script = _build_script(files, folder, package.get("build"))
    crate.features = {str(k): _strings(v) for k, v in _table(data.get("features")).items()}
    lib = _table(data.get("lib"))
    crate.lib_path = _string(lib.get("path"))
    crate.has_bins = bool(data.get("bin"))
    crate.declared_targets = _declared_targets(data)
    for kind, deps in _dependency_tables(data):
        for key, spec in deps.items():
            spec = _resolve_workspace_dep(spec, ws_deps.get(key))
            name = (_string(spec.get("package")) if isinstance(spec, dict) else None) or str(key)
            crate.dependencies.setdefault(name, kind)
            if isinstance(spec, dict) and spec.get("optional") is True:
                crate.optional[str(key)] = name
            path = _string(spec.get("path")) if isinstance(spec, dict) else None
            if path:
                target = _join(folder, path)
                if target is not None:
                    queue.append(target)
    return crate


# Where cargo looks for a declared target without a path (the Cargo book, "Target auto-discovery").
_TARGET_DIRS = {"bin": "src/bin", "test": "tests", "bench": "benches", "example": "examples"}


def _declared_targets(data: dict) -> list[str]:
    """The files of the ``[[bin]]``, ``[[test]]``, ``[[bench]]`` and ``[[example]]`` targets a
    manifest declares: cargo refuses to load a manifest whose declared target has no file, so
    the fetch layer stubs them like the library."""
    out: list[str] = []
    for kind, folder in _TARGET_DIRS.items():
        entries = data.get(kind)
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict):
                continue
            path = _string(entry.get("path"))
            name = _string(entry.get("name"))
            rel = path or (f"{folder}/{name}.rs" if name and re.fullmatch(r"[\w.-]{1,64}", name) else None)
            if rel and _join("", rel) is not None and len(out) < 64:
                out.append(_join("", rel) or rel)
    return out


# What cfg() sees on the images' target, x86_64-unknown-linux-gnu (the Rust reference, "Conditional
# compilation"); a name not here (a feature, a custom cfg) is unknown.
_CFG_TARGET = {
    "target_family": "unix",
    "target_os": "linux",
    "target_arch": "x86_64",
    "target_env": "gnu",
    "target_vendor": "unknown",
    "target_pointer_width": "64",
    "target_endian": "little",
}
_CFG_NAMES = {"unix": True, "windows": False, "debug_assertions": True, "test": True}
_CFG_TOKEN = re.compile(r'\s*(?:(?P<word>[A-Za-z_][\w]*)|"(?P<str>[^"]*)"|(?P<op>[(),=]))')


def cfg_applies(key: str) -> bool | None:
    """Whether a ``[target.<key>]`` table applies on x86_64-unknown-linux-gnu: a target triple,
    or a ``cfg(...)`` expression over the facts above. None: it cannot tell (a feature or a
    custom cfg decides), and such a table counts."""
    key = key.strip()
    if not key.startswith("cfg("):
        return "linux" in key if re.fullmatch(r"[\w.-]+", key) else None
    tokens: list[str] = []
    pos = 0
    while pos < len(key) and len(tokens) < 500:
        m = _CFG_TOKEN.match(key, pos)
        if not m or m.end() == pos:
            return None
        pos = m.end()
        tokens.append(m.group("word") or (f'"{m.group("str")}"' if m.group("str") is not None else m.group("op")))
    try:
        value, rest = _cfg_expr(tokens[2:-1], 0)  # inside cfg( ... )
    except (IndexError, ValueError):
        return None
    return value if not rest and tokens[:2] == ["cfg", "("] and tokens[-1] == ")" else None


def _cfg_expr(tokens: list[str], depth: int) -> tuple[bool | None, list[str]]:
    if depth > 32:
        raise ValueError("nested too deep")
    head, rest = tokens[0], tokens[1:]
    if head in ("all", "any", "not") and rest[:1] == ["("]:
        rest = rest[1:]
        values: list[bool | None] = []
        while rest[0] != ")":
            v, rest = _cfg_expr(rest, depth + 1)
            values.append(v)
            if rest[0] == ",":
                rest = rest[1:]
        rest = rest[1:]
        if head == "not":
            return (None if values[0] is None else not values[0]) if len(values) == 1 else None, rest
        if head == "all":
            return (False if False in values else None if None in values else True), rest
        return (True if True in values else None if None in values else False), rest
    if rest[:1] == ["="]:
        want = rest[1].strip('"')
        have = _CFG_TARGET.get(head)
        return (None if have is None else have == want), rest[2:]
    return _CFG_NAMES.get(head), rest


def _dependency_tables(data: dict) -> list[tuple[str, dict]]:
    """(kind, table) for [dependencies], [dev-dependencies], [build-dependencies] and their
    [target.<triple or cfg(...)>.*] forms, but for a target that is not the images' (a Windows,
    macOS or wasm table: its -sys crates are not built here)."""
    out: list[tuple[str, dict]] = []
    scopes = [data] + [
        t for k, t in _table(data.get("target")).items() if isinstance(t, dict) and cfg_applies(str(k)) is not False
    ]
    for scope in scopes:
        for key, kind in (
            ("dependencies", "normal"),
            ("dev-dependencies", "dev"),
            ("dev_dependencies", "dev"),
            ("build-dependencies", "build"),
            ("build_dependencies", "build"),
        ):
            table = scope.get(key)
            if isinstance(table, dict):
                out.append((kind, table))
    return out


def _resolve_workspace_dep(spec: Any, ws_spec: Any) -> Any:
    """``foo = { workspace = true, features = [...] }`` takes package/path from the workspace."""
    if isinstance(spec, dict) and spec.get("workspace") is True and ws_spec is not None:
        base = dict(ws_spec) if isinstance(ws_spec, dict) else {"version": ws_spec}
        base.pop("path", None)  # relative to the root; the root's scan follows it
        return {**base, **{k: v for k, v in spec.items() if k != "workspace"}}
    return spec


def _build_script(files: RepoFiles, folder: str, declared: Any) -> str | None:
    if declared is False:
        return None
    rel = _string(declared) if isinstance(declared, str) else "build.rs"
    path = _join(folder, rel or "build.rs")
    return path if path is not None and files.exists(path) else None


def _glob_crate_dirs(files: RepoFiles, pattern: str) -> list[str]:
    """Folders matching a workspace member pattern (``crates/*``) that hold a Cargo.toml."""
    pattern = _norm(pattern)
    if not pattern or pattern.startswith(".."):
        return []
    if not any(ch in pattern for ch in "*?["):
        return [pattern]
    depth = pattern.count("/")
    found = []
    for rel in files.all_files():
        if rel.endswith("/Cargo.toml"):
            folder = rel[: -len("/Cargo.toml")]
            if folder.count("/") == depth and fnmatch.fnmatchcase(folder, pattern) and not _skipped(folder):
                found.append(folder)
                if len(found) >= MAX_CRATES:
                    break
    return sorted(found)


# ---------------------------------------------------------------------- Cargo.lock
def _scan_lock(files: RepoFiles, ev: Evidence, rust: RustEvidence) -> None:
    if not files.exists("Cargo.lock"):
        return
    loaded = load_toml(files, "Cargo.lock", ev, "Cargo.lock")
    if loaded is None:
        return
    rust.lockfile = "Cargo.lock"
    data = loaded[1]
    version = data.get("version")
    rust.lock_version = (
        version
        if isinstance(version, int) and not isinstance(version, bool)
        else (1 if "metadata" in data else 2 if data.get("package") else None)
    )
    packages = data.get("package")
    for entry in (packages if isinstance(packages, list) else [])[:MAX_LOCK_PACKAGES]:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            rust.lock_packages.setdefault(entry["name"], []).append(str(entry.get("version", "")))


# ---------------------------------------------------------------------- toolchain
def _scan_toolchain(files: RepoFiles, ev: Evidence, rust: RustEvidence) -> None:
    for rel in ("rust-toolchain.toml", "rust-toolchain"):
        text = files.read_text(rel)
        if text is None:
            continue
        stripped = text.strip()
        if rel == "rust-toolchain" and stripped and "\n" not in stripped and "[" not in stripped:
            channel = stripped  # the legacy one-line form
            components: list[str] = []
        else:
            loaded = load_toml(files, rel, ev, rel)
            if loaded is None:
                return
            table = _table(loaded[1].get("toolchain"))
            channel = _string(table.get("channel")) or ""
            components = _strings(table.get("components"))
            if not channel:
                if table.get("path"):
                    ev.warn(rel, None, "a toolchain by path cannot be reproduced in an image; ignored")
                continue
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", channel):
            ev.warn(rel, None, f"toolchain channel {channel[:40]!r} is not a channel name; ignored")
            continue
        rust.toolchain = Toolchain(channel, Source(rel, line_of(text, channel), "toolchain channel"), components)
        return


def _scan_cargo_config(files: RepoFiles, ev: Evidence, rust: RustEvidence) -> None:
    for rel in (".cargo/config.toml", ".cargo/config"):
        if not files.exists(rel):
            continue
        rust.cargo_config = rel
        loaded = load_toml(files, rel, ev, "cargo configuration")
        if loaded is None:
            return
        for name, source in _table(loaded[1].get("source")).items():
            if isinstance(source, dict) and (source.get("directory") or source.get("local-registry")):
                rust.vendored = True
                ev.warn(
                    rel,
                    line_of(loaded[0], str(name)),
                    "crates come from a vendored directory; `cargo fetch` needs it and runs after the source is copied",
                )
        return


# ---------------------------------------------------------------------- CI workflows
_TOOLCHAIN_ACTION = re.compile(
    r"^(?:dtolnay/rust-toolchain|actions-rs/toolchain|actions-rust-lang/setup-rust-toolchain)"
    r"(?:@(?P<ref>[\w.\-]+))?$"
)


def _scan_workflows(files: RepoFiles, ev: Evidence, rust: RustEvidence) -> None:
    for rel in files.all_files():
        if not (rel.startswith(".github/workflows/") and rel.endswith((".yml", ".yaml")) and rel.count("/") == 2):
            continue
        text = files.read_text(rel)
        data = load_yaml(ev, rel, text) if text is not None else None
        jobs = data.get("jobs") if isinstance(data, dict) else None
        if not isinstance(jobs, dict):
            continue
        for job_name, job in jobs.items():
            steps = job.get("steps") if isinstance(job, dict) else None
            before = len(rust.ci_commands)
            components: list[tuple[str, Source]] = []
            # the job's own lines: the same step text often repeats in another job
            start = line_of(text or "", f"{job_name}:") or 1
            for step in steps if isinstance(steps, list) else []:
                if isinstance(step, dict):
                    _scan_step(rust, rel, text or "", step)
                    components += _step_components(rel, text or "", step, start)
            tests = any(argv[1:2] in (["test"], ["nextest"]) for argv, _ in rust.ci_commands[before:])
            if tests:
                known = {name for name, _ in rust.test_components}
                for name, src in components:
                    if name not in known:
                        rust.test_components.append((name, src))
                        known.add(name)


def _step_components(rel: str, text: str, step: dict, start: int = 1) -> list[tuple[str, Source]]:
    """The toolchain components a step installs: ``rustup component add X`` in a run step, or
    a toolchain action's ``components:`` input. Only names in ``COMPONENTS``, the ones a plan can
    add: others are repository text and go nowhere."""
    found: list[tuple[str, Source]] = []
    with_: Any = step.get("with") if isinstance(step.get("with"), dict) else {}
    if _TOOLCHAIN_ACTION.match(str(step.get("uses") or "")):
        for name in re.split(r"[\s,]+", str(with_.get("components") or "")):
            if name in COMPONENTS:
                found.append((name, Source(rel, line_of(text, "components", start), "CI toolchain components")))
    run = step.get("run")
    if isinstance(run, str):
        for m in re.finditer(r"rustup\s+component\s+add\s+([^\n;&|]+)", run):
            for name in m.group(1).split():
                if name in COMPONENTS:
                    found.append((name, Source(rel, line_of(text, m.group(0).strip()[:60], start), "CI run step")))
    return found


def _scan_step(rust: RustEvidence, rel: str, text: str, step: dict) -> None:
    uses = str(step.get("uses") or "")
    m = _TOOLCHAIN_ACTION.match(uses)
    if m:
        with_: Any = step.get("with") if isinstance(step.get("with"), dict) else {}
        channel = str(with_.get("toolchain") or (m.group("ref") or ""))
        if re.fullmatch(r"(?:stable|beta|nightly[\w.\-]*|1\.\d+(?:\.\d+)?)", channel):
            rust.ci_toolchains.append((channel, Source(rel, line_of(text, uses), "CI toolchain")))
    tool = str((step.get("with") or {}).get("tool") or "") if isinstance(step.get("with"), dict) else ""
    if "nextest" in tool or "nextest" in uses:
        rust.ci_commands.append((["cargo", "nextest", "(installed)"], Source(rel, line_of(text, "nextest"), uses)))
    run = step.get("run")
    if not isinstance(run, str):
        return
    for line in run.replace("\\\n", " ").splitlines():
        for part in re.split(r"&&|\|\||;", line):
            argv = part.split()
            while argv and "=" in argv[0] and not argv[0].startswith("-"):
                argv = argv[1:]  # FOO=bar cargo test
            if argv[:1] == ["cross"]:
                argv = ["cargo", *argv[1:]]
            if argv[:1] == ["cargo"] and len(argv) > 1 and len(rust.ci_commands) < MAX_CI_COMMANDS:
                argv = [a for a in argv if not a.startswith("+")] if len(argv) > 1 else argv
                rust.ci_commands.append((argv[:24], Source(rel, line_of(text, part.strip()[:60]), "CI run step")))


# ---------------------------------------------------------------------- system needs
def _system_needs(rust: RustEvidence) -> None:
    """Packages for the -sys crates and build helpers the build will meet. An optional
    dependency counts when the default features switch it on, or when CI tests with
    ``--all-features``; otherwise it is listed in ``feature_gated`` and not installed."""
    all_features = any("--all-features" in argv for argv, _ in rust.ci_commands)
    direct: dict[str, Source] = {}
    gated: dict[str, Source] = {}
    for c in rust.crates:
        on = c.default_enabled()
        off = {pkg for key, pkg in c.optional.items() if key not in on}
        for name in c.dependencies:
            source = Source(c.manifest, None, f"dependency of {c.name or c.folder or 'the workspace'}")
            if name in off and not all_features:
                gated.setdefault(name, source)
            else:
                direct.setdefault(name, source)
    for name, source in gated.items():
        if name not in direct and sysdeps.known(name) is not None:
            rust.feature_gated.append((name, source))
    locked = {n: Source(rust.lockfile or "Cargo.lock", None, "Cargo.lock") for n in rust.lock_packages}
    bundled_protoc = any(n in sysdeps.PROTOC_BUNDLED for n in [*direct, *locked])
    for name, source in [*direct.items(), *((n, s) for n, s in locked.items() if n not in direct)]:
        need = sysdeps.known(name)
        if need is None:
            if sysdeps.is_sys_name(name) and name not in sysdeps.FOREIGN_SYS:
                rust.unknown_sys.append((name, source))
            continue
        if bundled_protoc and "protobuf-compiler" in need.packages:
            continue
        for package in need.packages:
            rust.system_packages.append(SystemPackage(package, f"{name}: {need.why}", source, name in direct))


# ---------------------------------------------------------------------- small helpers
def _table(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _inherit(value: Any, workspace_value: Any) -> str | None:
    if isinstance(value, dict) and value.get("workspace") is True:
        value = workspace_value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    return value if isinstance(value, str) and len(value) <= 32 else None


def _norm(path: str) -> str:
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    return "/".join(parts)


def _join(folder: str, rel: str) -> str | None:
    """``folder/rel`` normalised, or None when it leaves the repository or is absolute."""
    if rel.startswith("/"):
        return None
    parts: list[str] = [p for p in folder.split("/") if p]
    for p in rel.replace("\\", "/").split("/"):
        if p in ("", "."):
            continue
        if p == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(p)
    return "/".join(parts)


def _skipped(folder: str) -> bool:
    return any(seg in SKIP_SEGMENTS for seg in folder.split("/"))
