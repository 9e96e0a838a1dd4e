"""DepGraph -> Dockerfile through templates/Dockerfile.j2.

Actions come in the graph's topological order (prerequisites first); within that order the
instructions are grouped into layers for cache reuse: base image, environment, system packages,
dependency manifests, dependencies, source, the project with its test extras, test tools.
The same graph always gives the same bytes."""

from __future__ import annotations

import io
import json
import posixpath
import shlex
from dataclasses import dataclass, field
from typing import Any, cast

import jinja2

from bot.errors import InputError
from bot.graph.apply import REPAIR_EVIDENCE
from bot.graph.build import install_spec
from bot.graph.lock import LOCK_NODE, PLAN_SOURCE, WHEELS_STAGE, built_wheels, locked_names
from bot.graph.model import DEV_STAGE, TESTED_STAGE, WORKDIR, DepGraph, Node, dev_stage_only
from bot.graph.native_lock import excluded_by_marker, native_lock
from bot.graph.specs import constraint_specs
from bot.templating import make_environment

PIP = ["python", "-m", "pip", "install", "--no-cache-dir"]
CONSTRAINTS_FILE = "/etc/pip-constraints.txt"
LOCK_PATH = "/tmp/requirements.lock"
# the builder stage's wheels: built into WHEELS_DIR there, copied to BUILT_DIR in the final stage
WHEELS_DIR = "/wheels"
BUILT_DIR = "/tmp/wheels"
BUILT_FILE = "/tmp/built.txt"
# --use-pep517: a setup.py-only sdist is built in an isolated environment with setuptools and
# wheel, which a base image may lack (Debian's pip then fails with "invalid command
# 'bdist_wheel'": flashtext, flufl-flake8)
PIP_WHEEL = [
    "python",
    "-m",
    "pip",
    "wheel",
    "--no-cache-dir",
    "--no-deps",
    "--use-pep517",
    f"--wheel-dir={WHEELS_DIR}",
]
# from this many locked distributions on, uv installs the lock (fetching uv costs ~15 s)
UV_LOCK_MINIMUM = 20
# uv installs into the image's own Python (the official images' prefix), as uv's Docker guide
# does; --inexact keeps what earlier steps installed (repairs, tools). UV_PYTHON names that
# Python: otherwise a .python-version in the checkout (3.10 when the image is 3.11) makes uv
# fetch a managed interpreter of its own, which a build with no route to it cannot do.
UV_SYNC = [
    "env",
    "UV_PROJECT_ENVIRONMENT=/usr/local",
    "UV_PYTHON=/usr/local/bin/python",
    "uv",
    "sync",
    "--frozen",
    "--inexact",
    "--all-groups",
]


# Poetry and PDM run from a virtual environment of their own: installed into the image's Python
# their own dependencies (requests, packaging, ...) would sit in the project's environment and
# clash with the project's pins (pip check). Poetry 2 with virtualenvs.create=false installs into
# the `python` on PATH, the image's own; PDM only exports the lock for pip. The tool stays on
# PATH for the developers of the container.
def _tool_venv(tool: str) -> list[list[str]]:
    return [
        ["python", "-m", "venv", f"/opt/{tool}"],
        [f"/opt/{tool}/bin/pip", "install", "--no-cache-dir", tool],
        ["ln", "-sf", f"/opt/{tool}/bin/{tool}", f"/usr/local/bin/{tool}"],
    ]


POETRY = ["env", "POETRY_VIRTUALENVS_CREATE=false", "poetry"]
# every dependency group, the optional ones too (a [tool.poetry.group.test] with optional = true
# holds pytest itself), as uv sync's --all-groups does; the Poetry installed above is 2.x
POETRY_INSTALL = [*POETRY, "install", "--no-interaction", "--all-groups"]
# a native lock with no project to install alongside it (or pipenv, which has no project mode)
NATIVE_AFTER_SOURCE = {
    "pipenv": [[*PIP, "pipenv"], ["pipenv", "install", "--system", "--deploy", "--dev"]],
    "poetry": [*_tool_venv("poetry"), [*POETRY_INSTALL, "--no-root"]],
    "pdm": [
        *_tool_venv("pdm"),
        ["pdm", "export", "--no-hashes", "-o", "/tmp/requirements.txt"],
        [*PIP, "-r", "/tmp/requirements.txt"],
    ],
}


class DockerfileInjection(InputError):
    """A value from the repository would change the Dockerfile's instructions."""

    def __init__(self, message: str) -> None:
        super().__init__(
            f"refusing to write the Dockerfile: {message}",
            "A file name or value in the repository holds a character that cannot go into a Dockerfile.",
        )


@dataclass(frozen=True)
class DockerLine:
    text: str
    node_ids: tuple[str, ...] = ()
    comments: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "node_ids": list(self.node_ids), "comments": list(self.comments)}


@dataclass
class CompiledDockerfile:
    text: str
    lines: list[DockerLine] = field(default_factory=list)


def _env_quote(value: Any) -> str:
    s = str(value)
    if s and all(c.isalnum() or c in "._-/:+,@%" for c in s):
        return s
    return json.dumps(s)


class Glob(str):
    """An argument the shell must expand (never repository text)."""


def _shell_wrapped(argv: list[str], head: int | None = None) -> str:
    parts = [a if isinstance(a, Glob) else shlex.quote(a) for a in argv]
    if not head or len(parts) <= head + 1:
        return " ".join(parts)
    # one requirement per line after the command; an option stays with its value (-r file)
    rest: list[str] = []
    for p in parts[head:]:
        if rest and rest[-1] in ("-r", "-c", "-e"):
            rest[-1] += " " + p
        else:
            rest.append(p)
    return " ".join(parts[:head]) + "".join(f" \\\n        {p}" for p in rest)


def _environment() -> jinja2.Environment:
    return make_environment(filters={"env_quote": _env_quote, "shell_wrapped": _shell_wrapped})


def _reasons(nodes: list[Node], limit: int = 3) -> list[str]:
    """The reasons a plan wrote on the nodes themselves (why a Rust toolchain, and which one),
    once each."""
    out: list[str] = []
    for n in nodes:
        for key in ("why", "toolchain_why"):
            text = n.attrs.get(key)
            if text and text not in out:
                out.append(str(text))
    return out[:limit]


def _where(nodes: list[Node], limit: int = 3) -> list[str]:
    """Where the nodes come from: the repository's files, then what the setup loop repaired
    (the failure it saw and why the fix applies), so every line can be traced to evidence."""
    seen: list[str] = []
    repaired: list[str] = []
    for n in nodes:
        for f, line, detail in n.evidence:
            if f == REPAIR_EVIDENCE:
                text = "repair for " + " ".join(str(detail).split())
                text = text if len(text) <= 150 else text[:147] + "..."
                if text not in repaired:
                    repaired.append(text)
                continue
            if f in ("setupbot", "uv pip compile", "repair") or f.startswith("bot/"):
                continue
            item = f"{f}:{line}" if line else f
            if item not in seen:
                seen.append(item)
    out = []
    if seen:
        more = f" (+{len(seen) - limit} more)" if len(seen) > limit else ""
        out.append("from " + ", ".join(seen[:limit]) + more)
    return out + repaired[:2]


def _spec(n: Node) -> str:
    return install_spec(n.attrs.get("spec", n.name), n.attrs.get("pinned"))


def _uv_extras(graph: DepGraph) -> list[str]:
    proj = graph.nodes.get("package:@project")
    return [a for e in (proj.attrs.get("extras") or [] if proj is not None else []) for a in ("--extra", e)]


def _dist_name(n: Node) -> str:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        return canonicalize_name(Requirement(n.attrs.get("spec", n.name)).name)
    except InvalidRequirement:
        return n.name


Step = dict[str, Any]


def plan_steps(graph: DepGraph) -> list[dict[str, Any]]:
    order = graph.topological()
    by_action: dict[str, list[Node]] = {}
    dev: dict[str, list[Node]] = {}  # what only the development container uses (DEV_STAGE)
    for n in order:
        if n.action:
            (dev if dev_stage_only(n) else by_action).setdefault(n.action, []).append(n)
    built = built_wheels(graph)
    staged = [n for n in by_action.get("apt", []) if n.attrs.get("stage") == WHEELS_STAGE] if built else []
    # an environment variable for the tests alone (a repair that set it where the tests ran, or
    # the plan's Django settings for pytest) goes after the install steps: no install ran with
    # it, and a later edit to it rebuilds none of them
    late = [n for n in by_action.get("env", []) if n.attrs.get("for_tests")]
    envs = [n for n in by_action.get("env", []) if not n.attrs.get("for_tests")]
    steps: list[dict[str, Any]] = _builder_steps(graph, by_action, built, staged) if staged else []
    steps.append(_from_step(graph.runtime))
    if dev:
        steps[-1]["stage"] = TESTED_STAGE
    if envs:
        steps.append(
            {
                "op": "ENV",
                "pairs": [(n.name, n.attrs.get("value", "")) for n in envs],
                "nodes": envs,
                "comments": [n.attrs["why"] for n in envs if n.attrs.get("why")][:2] + _where(envs),
            }
        )
    steps += _constraint_steps(graph, by_action.get("constraint", []))
    steps += _system_steps({**by_action, "apt": [n for n in by_action.get("apt", []) if n not in staged]})
    steps.append({"op": "WORKDIR", "path": WORKDIR, "nodes": [], "comments": []})
    locked = locked_names(graph)
    if staged:
        steps += _built_wheel_steps(graph, built)
    steps += _lock_steps(graph, locked)
    native = native_lock(graph)
    # what the repository's own lock installs is not installed a second time
    covered = set(native.attrs.get("covers", [])) if native is not None else set()
    pips = [n for n in by_action.get("pip", []) if n.name not in locked and n.name not in covered]
    if locked:
        # the lock is the installed set the replay proved; a requirement whose marker excludes
        # the image's Python installed nothing there, and a line for it would be a no-op
        python = graph.runtime.attrs.get("version", "")
        pips = [n for n in pips if not excluded_by_marker(n.attrs.get("spec", n.name), python)]
    via = _requirement_files(graph, pips, locked)
    steps += _requirement_file_steps(pips, via)
    steps += _pip_steps([n for n in pips if n.attrs.get("via_file") not in via])
    repairs = sorted((n for n in by_action.get("repair-pip", []) if n.name not in locked), key=lambda n: n.name)
    if repairs:
        steps.append(
            {
                "op": "RUN",
                "head": len(PIP),
                "nodes": repairs,
                "commands": [[*PIP, *[_spec(n) for n in repairs]]],
                "comments": ["added by repairs"],
            }
        )
    steps += _native_before_source_steps(graph, native)
    steps.append({"op": "COPY", "src": ["."], "dest": WORKDIR, "nodes": [], "comments": ["the source"]})
    projects = by_action.get("project", [])
    steps += _native_after_source_steps(native, projects)
    steps += _member_steps(graph, projects, locked, native)
    for n in projects:
        if not n.attrs.get("member"):
            steps += _project_steps(graph, n, locked, native)
    steps += _tool_and_run_steps(by_action, locked | covered)
    if graph.runtime.attrs.get("cache_mounts"):
        for s in steps:
            _keep_downloads(s)
    if late:
        steps.append(
            {
                "op": "ENV",
                "pairs": [(n.name, n.attrs.get("value", "")) for n in late],
                "nodes": late,
                "comments": ["for the tests alone, after every install: no install step needs them"]
                + [n.attrs["why"] for n in late if n.attrs.get("why")][:2]
                + _where(late),
            }
        )
    tgt = graph.target
    steps.append(
        {
            "op": "CMD",
            "argv": list(tgt.attrs.get("command") or ["python", "-m", "pytest"]),
            "nodes": [tgt],
            "comments": ["the tests"],
        }
    )
    if dev:
        steps += _dev_steps(dev)
    return steps


def _dev_steps(dev: dict[str, list[Node]]) -> list[Step]:
    """The development container: the tested stage with what only the editor uses on top. The
    loop builds, tests and replays the tested stage (``without_dev_stage``); this one is built once,
    on the run's first image (bot.loop.devstage), so the clean replay does not install what no
    test needs."""
    return [
        {
            "op": "FROM",
            "image": TESTED_STAGE,
            "stage": DEV_STAGE,
            "nodes": [],
            "comments": [
                "the development container: the tested environment above with "
                + " and ".join(
                    [*(n.name for n in dev.get("apt", [])), *(["a non-root user"] if dev.get("user") else [])]
                )
                + ", which no test needs"
            ],
        },
        *_system_steps(dev, pinned_by="this stage's first build installed"),
    ]


# the line that starts the development stage, on top of the tested one
DEV_STAGE_FROM = f"FROM {TESTED_STAGE} AS {DEV_STAGE}"


def without_dev_stage(text: str) -> str:
    """The compiled Dockerfile up to its development stage: what the loop builds and tests.
    The whole text when there is no development stage."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.rstrip("\r\n") == DEV_STAGE_FROM:
            while i > 0 and (lines[i - 1].startswith("#") or not lines[i - 1].strip()):
                i -= 1
            return "".join(lines[:i])
    return text


def builds_same_image(a: str, b: str) -> bool:
    """Whether two compiled Dockerfiles build the same tested image: their tested stages differ
    at most in comments, CMD, and ENV after the last step that makes a layer. CMD only sets what
    a container runs when given no command, and the loop always names the test command itself;
    such an ENV only sets what the container starts with, and the loop starts its runner with
    the graph's environment. A repair that changes the test command or sets a variable for the
    tests alone leaves every layer as it was."""

    def layers(text: str) -> list[str]:
        instructions: list[str] = []
        joined = False  # the line before ended in a backslash: this one continues it
        for line in without_dev_stage(text).splitlines():
            word = line.strip()
            if not word or word.startswith("#"):
                continue
            if joined:
                instructions[-1] += "\n" + line.rstrip()
            else:
                instructions.append(line.rstrip())
            joined = word.endswith("\\")
        kept = [i for i in instructions if not i.startswith("CMD ")]
        # ENV after the last layer sets only what the container starts with, as CMD does
        while kept and kept[-1].startswith("ENV "):
            kept.pop()
        return kept

    return layers(a) == layers(b)


# Under BuildKit (the engine that proves the Dockerfile has buildx), pip's and uv's download
# caches live in cache mounts: a repair trial or an edit that rebuilds an install step fetches
# only what changed, and the cache never enters the image (as --no-cache-dir / --no-cache
# ensure without it). The classic builder cannot parse --mount: its Dockerfile has none.
DOWNLOAD_CACHES = {
    "pip": ("--no-cache-dir", "type=cache,id=pip,target=/root/.cache/pip,sharing=locked"),
    "uv": ("--no-cache", "type=cache,id=uv,target=/root/.cache/uv,sharing=locked"),
}


def _installer(argv: list[str]) -> str | None:
    """``pip`` or ``uv`` when ``argv`` (after an ``env A=B`` prefix) installs with it."""
    words = argv[1:] if argv[:1] == ["env"] else argv
    while words and "=" in words[0]:
        words = words[1:]
    if not words:
        return None
    exe = posixpath.basename(words[0])
    if exe == "uv" and words[1:2] in (["pip"], ["sync"]):
        return "uv"
    if (exe.startswith("python") and words[1:3] == ["-m", "pip"]) or exe == "pip":
        return "pip" if any(w in ("install", "wheel") for w in words[1:4]) else None
    return None


def _keep_downloads(step: Step) -> None:
    """A RUN step that installs with pip or uv keeps their downloads in a cache mount instead
    of going without a cache, and its comment says so."""
    if step["op"] != "RUN" or step.get("shell") or step.get("mounts"):
        return
    used: list[str] = []
    commands: list[list[str]] = []
    for i, argv in enumerate(step["commands"]):
        tool = _installer(argv)
        if tool is None:
            commands.append(argv)
            continue
        off, mount = DOWNLOAD_CACHES[tool]
        if off in argv:
            if i == 0 and step.get("head") is not None and argv.index(off) < step["head"]:
                step["head"] -= 1
            argv = [a for a in argv if a != off]
        if mount not in used:
            used.append(mount)
        commands.append(argv)
    if not used:
        return
    step["commands"], step["mounts"] = commands, used
    names = " and ".join(f"{t}'s" for t, (_, m) in DOWNLOAD_CACHES.items() if m in used)
    step["comments"].append(
        f"BuildKit keeps {names} downloads in a cache between builds, never in the image, so a "
        "rebuild fetches only what changed; this line needs BuildKit, Docker's default builder"
    )


def _from_step(rt: Node) -> Step:
    """The base image, pinned by digest when it came from a registry."""
    base = rt.attrs.get("base_image", "python:3.12-slim")
    if rt.attrs.get("base_digest") and "@" not in base:
        base = f"{base}@{rt.attrs['base_digest']}"  # pulled from a registry: pinned
    return {
        "op": "FROM",
        "image": base,
        "nodes": [rt],
        "comments": [f"Python {rt.attrs.get('version')}: {rt.attrs.get('reason', '')}".strip()] + _where([rt]),
    }


def _builder_steps(
    graph: DepGraph, by_action: dict[str, list[Node]], built: dict[str, Any], staged: list[Node]
) -> list[Step]:
    """A builder stage: the same base, environment and system packages with the compilers
    (``staged``), and the wheels of the locked distributions the index has only as source. With
    a hashed lock pip checks each source archive against the lock's hashes before building it."""
    names = sorted(built)
    frm = _from_step(graph.runtime)
    frm["stage"] = WHEELS_STAGE
    frm["comments"] = [
        f"builder stage: {', '.join(sorted(n.name for n in staged))} only to build wheels of "
        f"{len(names)} locked distribution(s) the index has no wheel for ({', '.join(names[:4])}"
        + (f" +{len(names) - 4} more" if len(names) > 4 else "")
        + "); the final image below installs the wheels and keeps no compiler",
        *frm["comments"],
    ]
    steps: list[Step] = [frm]
    envs = by_action.get("env", [])
    if envs:
        steps.append(
            {"op": "ENV", "pairs": [(n.name, n.attrs.get("value", "")) for n in envs], "nodes": envs, "comments": []}
        )
    steps += _system_steps({"apt": by_action.get("apt", [])})
    lock_node = graph.nodes[LOCK_NODE]
    hashed = all(built[n].get("hashes") for n in names)
    pins = [f"{n}=={built[n]['version']}" for n in names]
    if hashed:
        lines = [p + "".join(f" --hash={h}" for h in built[n]["hashes"]) for n, p in zip(names, pins, strict=True)]
        commands = [
            ["sh", "-c", 'printf "%s\\n" "$@" > ' + BUILT_FILE, "built", *lines],
            [*PIP_WHEEL, "--require-hashes", "-r", BUILT_FILE],
        ]
        head: int | None = 4
    else:
        commands = [[*PIP_WHEEL, *pins]]
        head = len(PIP_WHEEL)
    steps.append(
        {
            "op": "RUN",
            "head": head,
            "nodes": [lock_node, *staged],
            "commands": commands,
            "comments": ["wheels from the source archives" + (", checked against the lock's hashes" if hashed else "")],
        }
    )
    return steps


def _built_wheel_steps(graph: DepGraph, built: dict[str, Any]) -> list[Step]:
    """The builder stage's wheels, installed before the lock (which then finds them in place)."""
    lock_node = graph.nodes[LOCK_NODE]
    return [
        {
            "op": "COPY",
            "from_stage": WHEELS_STAGE,
            "src": [WHEELS_DIR],
            "dest": BUILT_DIR,
            "nodes": [lock_node],
            "comments": [f"the wheels the builder stage built ({', '.join(sorted(built)[:4])})"],
        },
        {
            "op": "RUN",
            "head": None,
            "nodes": [lock_node],
            # by name from the folder, not by file path: an install from a path is recorded as
            # a direct reference (direct_url.json), which is not the index install the replay had
            "commands": [
                [*PIP, "--no-deps", "--no-index", "--find-links", BUILT_DIR]
                + [f"{n}=={built[n]['version']}" for n in sorted(built)],
                ["rm", "-rf", BUILT_DIR],
            ],
            "comments": [],
        },
    ]


def _constraint_steps(graph: DepGraph, cons: list[Node]) -> list[Step]:
    """The constraints file every pip install honours, unless a proven lock already pins everything."""
    specs = constraint_specs(graph)
    # a lock already satisfies every constraint it was frozen under (and pip's hash-checking
    # mode and a constraints file do not mix)
    if not (cons and specs and not locked_names(graph)):
        return []
    lock = graph.nodes.get("config:lock")
    why = f"pins from {lock.name}" if lock is not None and lock.action == "constraint" else "pins"
    reasons = sorted(
        {e[2] for n in cons if n.attrs.get("kind") != "lock" for e in n.evidence if e[0] == "uv pip compile"}
    )
    return [
        {
            "op": "RUN",
            "head": 4,
            "nodes": cons,
            "comments": [why + ", applied to every pip install"] + reasons[:2] + _where(cons),
            "commands": [["sh", "-c", 'printf "%s\\n" "$@" > ' + CONSTRAINTS_FILE, "constraints", *specs]],
        },
        {"op": "ENV", "pairs": [("PIP_CONSTRAINT", CONSTRAINTS_FILE)], "nodes": cons, "comments": []},
    ]


def _system_steps(by_action: dict[str, list[Node]], pinned_by: str = "the clean replay had") -> list[Step]:
    """The Debian packages (at the versions ``pinned_by`` says, when known) and the user."""
    steps: list[Step] = []
    apts = sorted(by_action.get("apt", []), key=lambda n: n.name)
    if apts:
        pinned_apt = any(n.attrs.get("version") for n in apts)
        steps.append(
            {
                "op": "RUN",
                "head": 4,
                "nodes": apts,
                "comments": ["system packages" + (f", at the versions {pinned_by}" if pinned_apt else "")]
                + _reasons(apts)
                + _where(apts),
                "commands": [
                    ["apt-get", "update"],
                    [
                        "apt-get",
                        "install",
                        "-y",
                        "--no-install-recommends",
                        *[f"{n.name}={n.attrs['version']}" if n.attrs.get("version") else n.name for n in apts],
                    ],
                    ["rm", "-rf", Glob("/var/lib/apt/lists/*")],
                ],
            }
        )
    users = by_action.get("user", [])
    if users:
        # created, not switched to: setupbot's runner and the tests keep running as root, the
        # editor attaches as this user (devcontainer.json remoteUser, updateRemoteUserUID)
        steps.append(
            {
                "op": "RUN",
                "head": None,
                "nodes": users,
                "comments": ["the development container's user"],
                "commands": [["useradd", "--create-home", n.name] for n in users],
            }
        )
    return steps


def _lock_steps(graph: DepGraph, locked: set[str]) -> list[Step]:
    """The clean replay's proven lock, installed without resolution (uv for a large set)."""
    lock_node = graph.nodes.get(LOCK_NODE)
    if not (locked and lock_node is not None):
        return []
    # the exact set the clean replay proved (issue 16): no resolution at build time, so a new
    # upstream release cannot change the image; what the lock covers is not installed again
    lock_file = lock_node.attrs["file"]
    flags = ["--require-hashes"] if lock_node.attrs.get("hashed") else []
    count = int(lock_node.attrs.get("count") or len(locked))
    if count >= UV_LOCK_MINIMUM:
        # uv installs a large set much faster than pip (45 distributions: 121 s against
        # 191 s, fetching uv included); it runs from a throwaway folder, so it is not part of
        # the image or its package set
        commands = [
            [*PIP, "--target", "/tmp/uv", "uv"],
            ["/tmp/uv/bin/uv", "pip", "install", "--system", "--no-cache", *flags, "--no-deps", "-r", LOCK_PATH],
            ["rm", "-rf", "/tmp/uv"],
        ]
    else:
        commands = [[*PIP, *flags, "--no-deps", "-r", LOCK_PATH]]
    return [
        {"op": "COPY", "src": [lock_file], "dest": LOCK_PATH, "nodes": [lock_node], "comments": []},
        {
            "op": "RUN",
            "head": None,
            "nodes": [lock_node],
            "commands": commands,
            "comments": [
                f"{lock_node.attrs.get('count', len(locked))} distributions locked from "
                + (
                    "the plan's resolution, which the clean replay installed"
                    if str(lock_node.attrs.get("source", "")).startswith(PLAN_SOURCE)
                    else "the clean replay"
                )
                + f" (inputs sha256:{lock_node.attrs.get('inputs_hash', '')}); "
                "refresh with: setupbot run --refresh-lock"
            ],
        },
    ]


def _requirement_files(graph: DepGraph, pips: list[Node], locked: set[str]) -> list[str]:
    """The repository's requirement files that can be installed as written."""
    # a file that names a dependency the plan left out (not on the index, does not build) cannot
    # be installed as written: its remaining requirements are installed one by one instead
    spoiled = {n.attrs.get("via_file") for n in graph.nodes.values() if n.attrs.get("dropped")}
    # so is a file whose name holds a control character (it could not be written into COPY); with
    # a proven lock every dependency comes from the lock instead
    if locked:
        return []
    return sorted(
        {
            n.attrs["via_file"]
            for n in pips
            if n.attrs.get("via_file") and n.attrs["via_file"] not in spoiled and not _has_control(n.attrs["via_file"])
        }
    )


def _requirement_file_steps(pips: list[Node], via: list[str]) -> list[Step]:
    """COPY each requirement file, then install them with -r (hash-pinned files alone)."""
    steps: list[Step] = []
    if not via:
        return steps
    via_nodes = [n for n in pips if n.attrs.get("via_file") in via]
    for f in via:
        steps.append(
            {
                "op": "COPY",
                "src": [f],
                "dest": f if "/" in f else "./",
                "nodes": [n for n in via_nodes if n.attrs["via_file"] == f],
                "comments": [],
            }
        )
    # a file that pins with --hash is installed as it is, alone: pip checks the hashes of
    # everything in one invocation once any requirement has one
    hashed = [f for f in via if any(n.attrs.get("via_hashed") for n in via_nodes if n.attrs["via_file"] == f)]
    plain = [f for f in via if f not in hashed]
    for group_files, comment in (
        (plain, "dependencies from the repository's requirement files"),
        *[([f], f"dependencies pinned with hashes by {f}, as they are") for f in hashed],
    ):
        if not group_files:
            continue
        cmd = list(PIP)
        for f in group_files:
            cmd += ["-r", f]
        steps.append(
            {
                "op": "RUN",
                "head": len(PIP),
                "nodes": [n for n in via_nodes if n.attrs["via_file"] in group_files],
                "commands": [cmd],
                "comments": [comment],
            }
        )
    return steps


def _pip_steps(rest: list[Node]) -> list[Step]:
    """The remaining packages by name: the main dependencies, then the test dependencies."""
    steps: list[Step] = []
    for group, label in (("main", "dependencies"), ("test", "test dependencies")):
        nodes = sorted([n for n in rest if (n.attrs.get("group") == "main") == (group == "main")], key=lambda n: n.name)
        if nodes:
            steps.append(
                {
                    "op": "RUN",
                    "head": len(PIP),
                    "nodes": nodes,
                    "commands": [[*PIP, *sorted({_spec(n) for n in nodes})]],
                    "comments": [
                        label
                        + "".join(sorted({f" (pinned by {n.attrs['lock']})" for n in nodes if n.attrs.get("lock")}))
                    ]
                    + _where(nodes),
                }
            )
    return steps


def _native_before_source_steps(graph: DepGraph, native: Node | None) -> list[Step]:
    """A uv lock's dependencies before the source, so the layer survives source edits."""
    if native is None or native.attrs.get("tool") != "uv":
        return []
    return [
        {"op": "COPY", "src": ["pyproject.toml", native.name], "dest": "./", "nodes": [native], "comments": []},
        {
            "op": "RUN",
            "head": None,
            "nodes": [native],
            "commands": [[*PIP, "uv"], [*UV_SYNC, *_uv_deps_only(graph), *_uv_extras(graph)]],
            "comments": [f"dependencies from {native.name}, as locked"] + _where([native]),
        },
    ]


def _has_members(graph: DepGraph) -> bool:
    return any(n.attrs.get("member") for n in graph.nodes.values() if n.action == "project")


def _uv_deps_only(graph: DepGraph) -> list[str]:
    """Before the source: every locked dependency and no project. In a workspace that is every
    member's dependencies and no member (``--no-install-project`` skips only the root, and a
    member the root needs would be built from a folder not copied yet)."""
    return ["--all-packages", "--no-install-workspace"] if _has_members(graph) else ["--no-install-project"]


def _uv_all_packages(graph: DepGraph) -> list[str]:
    """After the source: the workspace members too, editable, from the lock."""
    return ["--all-packages"] if _has_members(graph) else []


def _native_after_source_steps(native: Node | None, projects: list[Node]) -> list[Step]:
    """A native lock that installs from the checkout (pipenv, or no project to install it with)."""
    if native is None or not (native.attrs.get("tool") == "pipenv" or not projects):
        return []
    cmds = NATIVE_AFTER_SOURCE.get(cast(str, native.attrs.get("tool")), [])
    if not cmds:
        return []
    return [
        {
            "op": "RUN",
            "head": None,
            "nodes": [native],
            "commands": [list(c) for c in cmds],
            "comments": [f"dependencies from {native.name}, as locked"] + _where([native]),
        }
    ]


def _member_steps(graph: DepGraph, projects: list[Node], locked: set[str], native: Node | None) -> list[Step]:
    """The workspace members, editable, in one pip call in dependency order; with a uv lock, uv
    installs them from it (pip would resolve their dependencies anew, past the lock)."""
    members = sorted((n for n in projects if n.attrs.get("member")), key=lambda n: n.attrs.get("order", 0))
    if not members:
        return []
    if native is not None and native.attrs.get("tool") == "uv":
        if any(not n.attrs.get("member") for n in projects):
            return []  # the root project's `uv sync --all-packages` installs them with it
        return [
            {
                "op": "RUN",
                "head": None,
                "nodes": members,
                "commands": [[*UV_SYNC, "--all-packages", *_uv_extras(graph)]],
                "comments": [f"the workspace members, editable, from {native.name}"] + _where(members),
            }
        ]
    # one pip call for every member: a member's dependency on another is met by the other's
    # folder in the same call, never looked up on an index (with a lock, nothing else is)
    cmd = [*PIP, "--no-deps"] if locked else list(PIP)
    for n in members:
        extras = n.attrs.get("extras") or []
        cmd += ["-e", n.attrs["path"] + (f"[{','.join(extras)}]" if extras else "")]
    return [
        {
            "op": "RUN",
            "head": None,
            "nodes": members,
            "commands": [cmd],
            "comments": ["the workspace members, editable, in dependency order"] + _where(members),
        }
    ]


def _project_steps(graph: DepGraph, n: Node, locked: set[str], native: Node | None) -> list[Step]:
    """The project itself: run from the checkout when it is no package, else installed editable."""
    extras = n.attrs.get("extras") or []
    target = "." + (f"[{','.join(extras)}]" if extras else "")
    tool = n.attrs.get("install_with", "pip")
    if n.attrs.get("deps_only"):
        path = graph.nodes.get("config:env:PYTHONPATH")
        return _deps_only_steps(n, tool, locked, str(path.attrs.get("value", "")) if path and path.action else "")
    return [
        {
            "op": "RUN",
            "head": None,
            "nodes": [n],
            "commands": _own_import_commands(
                _project_commands(graph, tool, target, extras, locked, native),
                locked,
                bool(n.attrs.get("self_import")),
                bool(n.attrs.get("build_imports")),
            ),
            "comments": ["the project with its test extras" if extras else "the project"]
            + (
                ["without build isolation and with the checkout on PYTHONPATH: setup.py imports from it"]
                if n.attrs.get("self_import")
                else [
                    "without build isolation: setup.py imports "
                    + ", ".join(n.attrs["build_imports"])
                    + ", installed above, which an isolated build would not have"
                ]
                if n.attrs.get("build_imports")
                else []
            )
            + _where([n]),
        }
    ]


def _deps_only_steps(n: Node, tool: str, locked: set[str], path: str = "") -> list[Step]:
    """An application, not an installable package: it runs from the checkout (and from the
    folders already on PYTHONPATH, which this ENV would otherwise replace)."""
    # its dependencies are installed above (Poetry's --no-root, uv's --no-install-project)
    steps: list[Step] = [
        {
            "op": "ENV",
            "pairs": [("PYTHONPATH", ":".join([WORKDIR, *[p for p in path.split(":") if p and p != WORKDIR]]))],
            "nodes": [n],
            "comments": ["the project is not an installable package: run from the checkout"] + _where([n]),
        }
    ]
    if tool == "poetry" and not locked:
        steps.append(
            {
                "op": "RUN",
                "head": None,
                "nodes": [n],
                "comments": [],
                "commands": [*_tool_venv("poetry"), [*POETRY_INSTALL, "--no-root"]],
            }
        )
    return steps


def _own_import_commands(
    cmds: list[list[str]], locked: set[str], self_import: bool, build_imports: bool = False
) -> list[list[str]]:
    """setup.py imports a module of the checkout under a backend that leaves the checkout off
    sys.path: pip's editable install runs without build isolation (which would replace
    PYTHONPATH) and with the checkout on PYTHONPATH. setup.py imports an installed distribution
    that [build-system] does not require: without build isolation. The build tools come first
    unless the lock has them."""
    if not (self_import or build_imports) or not any(c[: len(PIP)] == PIP and "-e" in c for c in cmds):
        return cmds
    out: list[list[str]] = []
    for c in cmds:
        if c[: len(PIP)] == PIP and "-e" in c:
            if not locked:
                out.append([*PIP, "setuptools", "wheel"])
            path = ["env", f"PYTHONPATH={WORKDIR}"] if self_import else []
            out.append([*path, *PIP, "--no-build-isolation", *c[len(PIP) :]])
        else:
            out.append(c)
    return out


def _project_commands(
    graph: DepGraph, tool: str, target: str, extras: list[str], locked: set[str], native: Node | None
) -> list[list[str]]:
    """How the project installs: with its own tool, or only itself when a lock holds the rest."""
    if locked:
        # every dependency is in the lock: only the project itself is left to install
        cmds = {
            "poetry": [[*POETRY, "install", "--no-interaction", "--only-root"]],
            "uv": [["uv", "pip", "install", "--system", "--no-deps", "-e", target]],
        }.get(tool, [[*PIP, "--no-deps", "-e", target]])
        if tool in ("poetry", "uv") and tool not in locked:
            cmds = [[*PIP, "--no-deps", "-e", target]]
        return cmds
    if native is not None and tool == "uv":
        return [[*UV_SYNC, *_uv_all_packages(graph), *_uv_extras(graph)]]
    if tool == "poetry":
        return [
            *_tool_venv("poetry"),
            [*POETRY_INSTALL, *(["--extras", " ".join(extras)] if extras else [])],
        ]
    if tool == "pdm":
        return [
            *_tool_venv("pdm"),
            ["pdm", "export", "--no-hashes", "-o", "/tmp/requirements.txt"],
            [*PIP, "-r", "/tmp/requirements.txt"],
            [*PIP, "-e", target],
        ]
    if tool == "uv":
        return [[*PIP, "uv"], ["uv", "pip", "install", "--system", "-e", target]]
    return [[*PIP, "-e", target]]


def _tool_and_run_steps(by_action: dict[str, list[Node]], installed: set[str]) -> list[Step]:
    """The test tools nothing above installs, then the commands repairs added."""
    steps: list[Step] = []
    tools = sorted((n for n in by_action.get("tool", []) if _dist_name(n) not in installed), key=lambda n: n.name)
    if tools:
        steps.append(
            {
                "op": "RUN",
                "head": len(PIP),
                "nodes": tools,
                "commands": [[*PIP, *[_spec(n) for n in tools]]],
                "comments": ["test tools (the project's own pins above take precedence)"] + _where(tools),
            }
        )
    for n in by_action.get("run", []):
        steps.append(
            {
                "op": "RUN",
                "head": None,
                "nodes": [n],
                "commands": [list(n.attrs["command"])],
                # built into the checkout, which the devcontainer mounts over: it builds there again
                "comments": (
                    ["built in place (the devcontainer builds it again)"] if n.attrs.get("in_checkout") else []
                )
                + _where([n]),
            }
        )
    return steps


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def _check_value(value: Any, where: str) -> None:
    """Values that become part of an instruction: a control character (a newline above all)
    would end the instruction and start one the repository chose (SECURITY.md S14)."""
    if isinstance(value, str):
        if _has_control(value):
            raise DockerfileInjection(f"{where}: {value!r} holds a control character")
    elif isinstance(value, (list, tuple)):
        for v in value:
            _check_value(v, where)


def _validate_steps(steps: list[dict[str, Any]]) -> None:
    for s in steps:
        for key in (
            "image",
            "stage",
            "from_stage",
            "pairs",
            "path",
            "src",
            "dest",
            "mounts",
            "shell",
            "commands",
            "argv",
        ):
            if key in s:
                _check_value(s[key], f"{s['op']} {key}")
        # comments are text from the repository's files: flatten, never reject
        s["comments"] = [
            " ".join("".join(c if not _has_control(c) else " " for c in str(t)).split()) for t in s["comments"]
        ]


def _expected(step: dict[str, Any]) -> tuple[str, Any]:
    """What the parsed-back instruction must hold, from the step the graph gave."""
    op = step["op"]
    if op == "FROM":
        return op, step["image"] + (f" AS {step['stage']}" if step.get("stage") else "")
    if op == "WORKDIR":
        return op, step["path"]
    if op == "COPY":
        return op, [*([f"--from={step['from_stage']}"] if step.get("from_stage") else []), *step["src"], step["dest"]]
    if op == "CMD":
        return op, list(step["argv"])
    if op == "ENV":
        return op, [str(k) for k, _ in step["pairs"]]
    tokens: list[str] = [f"--mount={m}" for m in step.get("mounts", ())]
    if step.get("shell"):
        # shell lines (quoted by whoever made them) stand for the commands: what they parse into
        return op, tokens + shlex.split(" ".join(step["shell"]))
    for i, argv in enumerate(step["commands"]):
        tokens += (["&&"] if i else []) + [str(a) for a in argv]
    return op, tokens


def _parsed(instruction: dict[str, Any]) -> tuple[str, Any]:
    op, value = instruction["instruction"], instruction["value"]
    if op == "COPY" and value.startswith("--from="):
        flag, _, rest = value.partition(" ")
        return op, [flag, *json.loads(rest)]
    if op in ("COPY", "CMD"):
        return op, json.loads(value)
    if op == "ENV":
        return op, [w.split("=", 1)[0] for w in shlex.split(value)]
    if op == "RUN":
        return op, shlex.split(value)
    return op, value


def verify_dockerfile(text: str, steps: list[dict[str, Any]]) -> None:
    """Parse the rendered Dockerfile back (dockerfile-parse) and check it holds exactly the
    instructions of ``steps``, in order, with the values the graph gave: nothing added, nothing
    split, nothing merged."""
    from dockerfile_parse import DockerfileParser

    parser = DockerfileParser(fileobj=io.BytesIO(text.encode()))
    got = [i for i in parser.structure if i["instruction"] != "COMMENT"]
    if len(got) != len(steps):
        raise DockerfileInjection(f"the Dockerfile parses into {len(got)} instructions, the graph gives {len(steps)}")
    for instruction, step in zip(got, steps, strict=False):
        try:
            parsed = _parsed(instruction)
        except ValueError as exc:
            raise DockerfileInjection(f"line {instruction['startline'] + 1}: {exc}") from exc
        if parsed != _expected(step):
            raise DockerfileInjection(
                f"line {instruction['startline'] + 1}: {instruction['content'].strip()[:200]!r} "
                f"is not the {step['op']} the graph gives"
            )


def compile_dockerfile(graph: DepGraph) -> CompiledDockerfile:
    env = _environment()
    template = env.get_template("Dockerfile.j2")
    steps = plan_steps(graph)
    _validate_steps(steps)
    text = template.render(steps=steps)
    verify_dockerfile(text, steps)
    module = template.make_module({"steps": steps})
    lines = [
        DockerLine(
            str(cast(Any, module).instruction(s)), tuple(sorted({n.id for n in s["nodes"]})), tuple(s["comments"])
        )
        for s in steps
    ]
    return CompiledDockerfile(text, lines)
