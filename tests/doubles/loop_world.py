"""In-memory stand-ins for the engine, the DepGraph and the experience base, implementing the
contracts in docs/architecture.md, so the loop's logic can be unit-tested without containers.

A ``World`` describes a repository's needs: each ``Need`` is satisfied by a package (pip/apt),
an environment variable or a Python version, and says what output the target shows while it is
not. The fake engine "builds" an image by reading the atoms compiled into the fake Dockerfile;
the fake session keeps installed packages as state with a real snapshot stack.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from bot.atoms import Atom
from bot.engine.results import BuildResult, ExecResult
from bot.junit import runs_pytest


@dataclass
class Need:
    satisfied_by: str  # "pip:PyJWT", "apt:libyaml-dev", "env:APP_SETTINGS", "python:3.13"
    output: str  # what the target prints while the need is unmet
    stage: str = "collect"  # build | collect | test
    shadow: dict[str, str] = field(default_factory=dict)  # "pip:jwt" -> output when that is installed instead


@dataclass
class World:
    needs: list[Need]
    tests: int = 3
    test_times_out: bool = False  # the test run (not collection) hits the command timeout
    test_killed: int | None = None  # the test run ends with this exit status (137: a SIGKILL)
    runner: tuple[int, str] | None = None  # (exit, output) of a non-pytest test command
    skipped: int = 0  # of the tests, how many pytest reports as skipped
    # (what makes them pass, how many): tests that fail on an assertion until it is installed,
    # as a test comparing a dependency's output fails on a newer release of it
    assert_fails: tuple[str, int] | None = None
    # every unmet need of a stage shows at once (pytest's collection reports each module's error),
    # not only the first
    together: bool = False
    # (what, how many): when what is built into an image with no cache (the clean replay), that
    # many more tests fail, as a set installed over a working container can differ from what a
    # clean build resolves
    clean_breaks: tuple[str, int] | None = None
    # what the drifted tests fail with (an assertion unless told: a call the release dropped)
    drift_message: str | None = None
    # the drifted tests are a lint plugin's per-file items of that name (pytest-ruff's "ruff")
    drift_item: str | None = None

    def unmet(self, state: State, stage: str) -> str | None:
        if self.together:
            shown = [n.output for n in self.needs if n.stage == stage and n.satisfied_by not in state.have]
            return "\n".join(shown) if shown else None
        for need in self.needs:
            if need.stage != stage:
                continue
            for bad, out in need.shadow.items():
                if bad in state.have and need.satisfied_by not in state.have:
                    return out
            if need.satisfied_by not in state.have:
                return need.output
        return None


@dataclass
class State:
    have: set[str] = field(default_factory=set)

    def copy(self) -> State:
        return State(set(self.have))


def atoms_to_have(atom: Atom) -> set[str]:
    a = atom.args
    match atom.kind:
        case "pip_install":
            return {f"pip:{p}" for p in a["packages"]}
        case "apt_install":
            return {f"apt:{p}" for p in a["packages"]}
        case "pip_constraint":
            return {f"pip:{c}" for c in a["constraints"]}
        case "set_env":
            return {f"env:{a['name']}"}
        case "switch_python":
            return {f"python:{a['version']}"}
        case "start_service":
            return {f"service:{a['service']}"}
        case "run":
            cmd = list(a["command"])
            if cmd[:4] == ["python", "-m", "pip", "install"]:
                return {f"pip:{p}" for p in cmd[4:] if not p.startswith("-")}
            return {"run:" + " ".join(cmd)}
    return set()


class FakeGraph:
    def __init__(self, python: str = "3.11", atoms: list[dict] | None = None, meta: dict | None = None) -> None:
        self.python = python
        self.atoms: list[dict] = list(atoms or [])
        self.meta: dict = dict(meta or {})  # e.g. {"resolution": {"pins": {...}}} as the planner writes it

    def of_type(self, kind: str) -> list:
        return []

    def apply_atom(self, atom: Atom, evidence: Any = None) -> list[str]:
        self.atoms.append(atom.to_json())
        if atom.kind == "switch_python":
            self.python = atom.args["version"]
        return [f"n{len(self.atoms)}"]

    def to_json(self) -> dict:
        return {"python": self.python, "atoms": copy.deepcopy(self.atoms), "meta": copy.deepcopy(self.meta)}

    @classmethod
    def from_json(cls, data: dict) -> FakeGraph:
        return cls(data["python"], data["atoms"], data.get("meta"))


def fake_compile(graph: FakeGraph) -> Any:
    lines = [f"FROM python:{graph.python}-slim"] + [f"# atom {json.dumps(a, sort_keys=True)}" for a in graph.atoms]
    return SimpleNamespace(text="\n".join(lines) + "\n", lines=[])


class FakePlan:
    """A view over a FakeGraph, as bot.compile.plan.Plan is over a DepGraph: what a kept repair
    put into the graph (a Python, a service, an environment variable, a test command) is what
    the plan says."""

    def __init__(self, graph: FakeGraph, env: dict | None = None, services: list | None = None) -> None:
        self.graph = graph
        self.warnings: list = []
        self._env = dict(env or {})
        self._services = list(services or [])
        self.collect_command = ["python", "-m", "pytest", "--collect-only", "-q"]
        self.test_command = ["python", "-m", "pytest"]

    def _atoms(self, kind: str) -> list[dict]:
        return [a for a in self.graph.atoms if a["kind"] == kind]

    @property
    def python(self) -> str:
        return self.graph.python

    @property
    def base_image(self) -> str:
        return f"python:{self.graph.python}-slim"

    @property
    def env(self) -> dict:
        return {**self._env, **{a["name"]: a["value"] for a in self._atoms("set_env")}}

    @property
    def services(self) -> list:
        from bot.services import specs_from_atoms

        return self._services + specs_from_atoms(Atom.from_json(a) for a in self._atoms("start_service"))

    @property
    def repaired_test_command(self) -> list[str] | None:
        found = self._atoms("test_command")
        return list(found[-1]["command"]) if found else None

    @property
    def dockerfile(self) -> Any:
        return fake_compile(self.graph)


def fake_plan_maker(
    python: str = "3.11", env: dict | None = None, services: list | None = None, pins: dict | None = None
):
    def make_plan(repo, settings, available):
        graph = FakeGraph(python, meta={"resolution": {"pins": dict(pins)}} if pins else None)
        return FakePlan(graph, env, services)

    return make_plan


def _have_from_dockerfile(text: str) -> State:
    state = State()
    m = re.match(r"FROM python:([\d.]+)-slim", text)
    if m:
        state.have.add(f"python:{m.group(1)}")
    for line in text.splitlines():
        if line.startswith("# atom "):
            state.have |= atoms_to_have(Atom.from_json(json.loads(line[len("# atom ") :])))
    return state


class FakeSession:
    def __init__(self, engine: FakeEngine, image: str, env: dict | None) -> None:
        self.engine = engine
        self.state = engine.images[image].copy()
        self.env = dict(env or {})
        self.stack: list[State] = []
        self.execs: list[list[str]] = []

    def __enter__(self) -> FakeSession:
        self.engine.sessions_open += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        self.engine.sessions_open -= 1

    @property
    def depth(self) -> int:
        return len(self.stack)

    def snapshot(self, note: str = "") -> str:
        self.stack.append(self.state.copy())
        return f"snap-{len(self.stack)}"

    def rollback(self, n: int = 1) -> None:
        assert 1 <= n <= len(self.stack), f"rollback({n}) with {len(self.stack)} frames"
        # as the engine does: frames above the n-th most recent are dropped, it stays on top
        target = self.stack[-n]
        del self.stack[len(self.stack) - n + 1 :]
        self.state = target.copy()

    def exec(self, argv, env=None, timeout=600, workdir=None, changes=True) -> ExecResult:
        argv = list(argv)
        self.execs.append(argv)
        self.engine.execs.append(argv)
        world = self.engine.world
        have = self.state.copy()
        for name in {**self.env, **(env or {})}:
            have.have.add(f"env:{name}")
        if argv[:3] == ["python", "-m", "pip"]:
            pkgs = [a for a in argv[3:] if not a.startswith("-") and a != "install"]
            if any(p in self.engine.broken_packages for p in pkgs):
                return ExecResult(argv, 1, "ERROR: No matching distribution found for " + pkgs[0], 0.1)
            self.state.have |= {f"pip:{p}" for p in pkgs}
            return ExecResult(argv, 0, "Successfully installed", 0.1)
        if argv[0] == "apt-get":
            if argv[1] == "install":
                self.state.have |= {f"apt:{p}" for p in argv[2:] if not p.startswith("-")}
            return ExecResult(argv, 0, "", 0.1)
        if argv[:2] == ["rm", "-f"] and any("junit" in a for a in argv[2:]):
            self.engine.last_junit = None
            return ExecResult(argv, 0, "", 0.01)
        if argv[0] == "cat":
            if "junit" in argv[1] and self.engine.last_junit is not None:
                return ExecResult(argv, 0, self.engine.last_junit, 0.01)
            return ExecResult(argv, 1, "No such file", 0.01)
        if "--collect-only" in argv:
            out = world.unmet(have, "collect")
            if out:
                return ExecResult(argv, 2, out, 0.2)
            return ExecResult(argv, 0, f"{world.tests} tests collected", 0.2)
        if "pytest" in " ".join(argv):
            # as pytest does: it collects first, and a collection error ends the run there
            stopped = world.unmet(have, "collect")
            if stopped:
                self.engine.last_junit = (
                    '<testsuites><testsuite name="pytest"><testcase classname="" name="tests.test_x">'
                    f'<error message="collection failure">{_xml(stopped)}</error></testcase></testsuite></testsuites>'
                )
                return ExecResult(argv, 2, stopped, 0.2)  # what its collect-only run prints
            out = world.unmet(have, "test")
            if world.test_times_out:
                self.engine.last_junit = None
                return ExecResult(
                    argv, -1, "tests/test_x.py ....." + (("\n" + out) if out else ""), float(timeout), timed_out=True
                )
            if world.test_killed is not None:
                self.engine.last_junit = None
                return ExecResult(argv, world.test_killed, "tests/test_x.py ..." + (("\n" + out) if out else ""), 0.3)
            drifted = world.assert_fails is not None and world.assert_fails[0] not in have.have
            failing = world.assert_fails[1] if drifted and world.assert_fails else 0
            if "clean-breaks" in have.have and world.clean_breaks is not None:
                failing = min(world.tests - 1, failing + world.clean_breaks[1])
            body = _xml(world.drift_message) if world.drift_message else "E   assert ..."
            assertion = world.drift_message or (
                "AssertionError: assert '&lt;b&gt;x&lt;/b&gt;' == '&lt;strong&gt;x&lt;/strong&gt;'"
            )

            def case(i: int) -> str:
                if world.drift_item and 0 < i <= failing:
                    return f'<testcase classname="pkg.mod_{i}" name="{world.drift_item}">'
                return f'<testcase classname="tests.test_x" name="test_{i}">'

            cases = "".join(
                case(i)
                + (f'<error message="setup">{_xml(out)}</error>' if out and i == 0 else "")
                + (f'<failure message="{assertion}">{body}</failure>' if 0 < i <= failing else "")
                + ('<skipped message="needs a GPU"/>' if i >= world.tests - world.skipped else "")
                + "</testcase>"
                for i in range(world.tests)
            )
            self.engine.last_junit = f'<testsuites><testsuite name="pytest">{cases}</testsuite></testsuites>'
            if not runs_pytest(argv) and "--junitxml" not in {**self.env, **(env or {})}.get("PYTEST_ADDOPTS", ""):
                self.engine.last_junit = None  # pytest inside a wrapper, and nothing asked it for a report
            if out:
                return ExecResult(argv, 1, out + "\n1 error", 0.3)
            if failing:
                return ExecResult(argv, 1, f"{failing} failed, {world.tests - failing} passed", 0.3)
            return ExecResult(argv, 0, f"{world.tests} passed", 0.3)
        if world.runner is not None and (
            argv[:2] == ["python", "runtests.py"] or argv[:3] == ["python", "-m", "unittest"]
        ):
            return ExecResult(argv, world.runner[0], world.runner[1], 0.3)
        return ExecResult(argv, 0, "", 0.05)


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


class FakeEngine:
    def __init__(self, world: World, broken_packages: set[str] | None = None) -> None:
        self.world = world
        self.run_id = "testrun"
        self.images: dict[str, State] = {}
        self.builds: list[dict] = []
        self.broken_packages = broken_packages or set()
        self.sessions_open = 0
        self.networks = 0
        self.last_junit: str | None = None
        self.execs: list[list[str]] = []  # every command of every session, in order

    def build(self, context_dir, dockerfile_text, tag, no_cache=False, log_path=None, timeout=None) -> BuildResult:
        state = _have_from_dockerfile(dockerfile_text)
        self.builds.append({"tag": tag, "no_cache": no_cache, "text": dockerfile_text})
        breaks = self.world.clean_breaks
        if no_cache and breaks is not None and breaks[0] in state.have:
            state.have.add("clean-breaks")
        out = self.world.unmet(state, "build")
        if out:
            return BuildResult(False, tag, "Step 3/5 : RUN pip install .\n" + out, 1.0)
        self.images[tag] = state
        return BuildResult(True, tag, "Successfully built", 1.0)

    def session(self, image, env=None, workdir="/workspace", network=None, name_hint="runner") -> FakeSession:
        return FakeSession(self, image, env)

    def network(self):
        import contextlib

        @contextlib.contextmanager
        def net():
            self.networks += 1
            yield "fake-net"

        return net()


class FakeRetriever:
    """Returns scripted candidates for logs matching a regex; records outcomes."""

    def __init__(self, units: list[dict]) -> None:
        self.units = units
        self.outcomes: list[tuple[str, str]] = []
        self.queries: list[str] = []

    def retrieve(self, log_text: str, context: dict | None = None) -> list[Any]:
        self.queries.append(log_text)
        out = []
        for u in self.units:
            m = re.search(u["signal"], log_text)
            if m:
                atoms = [
                    Atom.from_json(a).fill(
                        {
                            "python": (context or {}).get("python", ""),
                            **{f"match:{i}": g for i, g in enumerate(m.groups(), 1)},
                        }
                    )
                    for a in u["atoms"]
                ]
                out.append(
                    SimpleNamespace(
                        unit=SimpleNamespace(id=u["id"], advice=u.get("advice", "")),
                        score=u.get("score", 1.0),
                        atoms=atoms,
                    )
                )
        return out

    def record_outcome(self, unit_id: str, outcome: str) -> None:
        self.outcomes.append((unit_id, outcome))
