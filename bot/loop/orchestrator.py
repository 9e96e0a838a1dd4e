"""The setup loop: plan → build → run the target → diagnose → repair → … → clean replay.

One ``Workspace`` is an image built from the compiled Dockerfile, the sibling services the plan
and the kept repairs ask for (on a private network), and a runner container on that image with
the target already evaluated. Repairs that can be trialled inside the container (apt/pip installs,
environment, commands) run after ``snapshot()`` and are rolled back unless the error state
improved; repairs that change the image (base image, build-time environment, services) are
trialled by recompiling the graph and rebuilding. Every kept repair is applied to the DepGraph
(``apply_atom``), so the compiled Dockerfile reproduces it; the working container is never the
artifact: only a clean replay (no cache, fresh container, nothing carried over) counts.
"""

from __future__ import annotations

import configparser
import contextlib
import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot import progress
from bot.atoms import Atom
from bot.errors import Interrupted, LLMError, SetupbotError
from bot.graph.apply import REPAIR_EVIDENCE
from bot.loop.diagnose import Signature, collection_signatures, diagnose, setup_failures
from bot.loop.junit import TestResults, parse_junit
from bot.loop.repair import Candidate, knowledge_candidates, merge_candidates, rule_candidates, trial_commands
from bot.loop.trajectory import Budget, Trajectory

log = logging.getLogger(__name__)

JUNIT_PATH = "/tmp/setupbot-junit.xml"
# distributions that sdists need to build (build isolation): never pinned as part of an era set
BUILD_TOOLS = frozenset({
    "pip", "setuptools", "wheel", "packaging", "setuptools-scm", "vcs-versioning", "cython", "hatchling",
    "hatch-vcs", "hatch-fancy-pypi-readme", "flit-core", "poetry-core", "pdm-backend", "meson-python", "meson",
    "ninja", "scikit-build-core", "scikit-build", "pybind11", "cffi", "pycparser", "tomli", "trove-classifiers",
    "pathspec", "pluggy", "setuptools-rust", "maturin", "versioneer", "extension-helpers", "cmake",
})
STAGE_RANK = {"build": 0, "start": 1, "collect": 2, "test": 3, "done": 4}
# Which installed distributions provide each top-level module: top_level.txt, then the files
# their RECORD lists (run in the runner; standard library only)
PROVIDERS_SCRIPT = r"""
import json, importlib.metadata as md
out = {}
for d in md.distributions():
    name = d.metadata["Name"] or ""
    tops = {t.strip() for t in (d.read_text("top_level.txt") or "").split() if t.strip()}
    for f in d.files or []:
        head = f.parts[0] if f.parts else ""
        if not head or head in ("..", "__pycache__") or head.endswith((".dist-info", ".egg-info", ".data", ".pth")):
            continue
        if len(f.parts) > 1:
            tops.add(head)
        elif head.endswith((".py", ".so", ".pyd")):
            tops.add(head.split(".")[0])
    for t in tops:
        out.setdefault(t, []).append(name)
print(json.dumps(out))
"""
# signatures about a module that a distribution provides
PROVIDER_KINDS = frozenset({"missing_module", "import_name_error", "module_attribute", "missing_native_submodule"})
LOG_FOR_RETRIEVAL = 20_000


# --- what a target evaluation says ------------------------------------------------------------

@dataclass
class TargetOutcome:
    stage: str                                   # the stage the run got to (see STAGE_RANK)
    signatures: list[Signature] = field(default_factory=list)
    log: str = ""                                # the output that was diagnosed
    collect_exit: int | None = None
    test_exit: int | None = None
    results: TestResults = field(default_factory=TestResults)
    note: str = ""
    junit: bool = False                          # results were read from a JUnit file (counts are exact)

    @property
    def setup_failures(self) -> list[Signature]:
        return setup_failures(self.signatures)

    @property
    def collected(self) -> bool:
        return self.collect_exit == 0

    @property
    def passed(self) -> bool:
        """The target is met: tests collected and ran, and nothing left is a setup failure."""
        return self.stage == "done" and not self.setup_failures

    def idents(self) -> set[tuple[str, str]]:
        return {s.ident for s in self.setup_failures}

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "collect_exit": self.collect_exit, "test_exit": self.test_exit,
                "signatures": [s.to_json() for s in self.signatures],
                "tests": self.results.summary(), "note": self.note}


_UNITTEST_COUNT = re.compile(r"^Ran (\d+) tests? in [\d.]+s\s*$", re.M)
_UNITTEST_SKIPPED = re.compile(r"^(?:OK|FAILED) \(.*?\bskipped=(\d+)", re.M)
_PYTEST_SUMMARY = re.compile(r"^=+ (.*?\b(?:passed|failed|skipped|error|errors|deselected|no tests ran)\b.*?) in [\d.]+s", re.M)
NO_TESTS_KINDS = frozenset({"no_tests_collected", "path_not_found"})


def ran_count(outcome: TargetOutcome) -> int | None:
    """How many tests ran (skipped ones do not count), or None when the runner's output gives
    no count. JUnit first; else unittest's / Django's "Ran N tests" summary; else pytest's
    terminal summary (pytest run by tox, nox or make)."""
    if outcome.junit or outcome.results.total:
        return outcome.results.total - outcome.results.count("skipped")
    text = outcome.log or ""
    counts = _UNITTEST_COUNT.findall(text)
    if counts:
        skipped = sum(int(n) for n in _UNITTEST_SKIPPED.findall(text))
        return max(0, sum(int(n) for n in counts) - skipped)
    summaries = _PYTEST_SUMMARY.findall(text)
    if summaries:
        ran = 0
        for line in summaries:
            ran += sum(int(n) for n, what in re.findall(r"(\d+) (passed|failed|errors?|xfailed|xpassed)", line))
        return ran
    if outcome.signatures and any(s.kind == "no_tests_collected" for s in outcome.signatures):
        return 0
    return None


def finds_no_tests(outcome: TargetOutcome) -> bool:
    """The environment came up and the target command ran, but it found no test: the only setup
    failures left say so (pytest exit 5, a test path that does not exist)."""
    fails = outcome.setup_failures
    return outcome.stage in ("collect", "test") and bool(fails) and all(s.kind in NO_TESTS_KINDS for s in fails)


def changes_test_command(cand: Candidate) -> bool:
    return any(a.kind == "test_command" for a in cand.atoms)


def runs_more_tests(before: TargetOutcome, after: TargetOutcome) -> bool:
    """A new test command is kept only when it runs more tests than the old one (a runner that
    finds nothing must not replace one that at least tried)."""
    return (ran_count(after) or 0) > (ran_count(before) or 0)


def compare(before: TargetOutcome, after: TargetOutcome, target: Signature | None) -> str:
    """'improved' when the targeted signature is gone and no new setup failure that the trial
    caused appeared; 'worse' when the run got less far, fewer tests passed, or a new failure about
    the same thing appeared (a wrong distribution shadowing a module); else 'unchanged'.

    A new failure about something else (the next missing module behind the one just fixed) is
    progress: the loop keeps the frame and may abandon it later by rolling back several frames."""
    if STAGE_RANK[after.stage] < STAGE_RANK[before.stage]:
        return "worse"
    if after.results.count("passed") < before.results.count("passed"):
        return "worse"
    new = [s for s in after.setup_failures if s.ident not in before.idents()]
    # the fix itself failed to install (apt has no such package): never progress, even though
    # the build now stops before the step that showed the targeted failure
    if any(s.kind == "unknown_apt_package" for s in new):
        return "worse"
    if target is not None:
        if any(s.key and s.key == target.key and s.ident != target.ident for s in new):
            return "worse"
        if target.ident in after.idents():
            return "worse" if new else "unchanged"
        return "improved"
    # no target (an LLM action): better when the run got further or has fewer setup failures
    if STAGE_RANK[after.stage] > STAGE_RANK[before.stage] or after.passed:
        return "improved"
    if len(after.setup_failures) < len(before.setup_failures) and not new:
        return "improved"
    return "worse" if new else "unchanged"


@dataclass
class KeptRepair:
    signature: Signature | None
    candidate: Candidate
    log_excerpt: str
    frame_depth: int | None = None      # session depth before the trial (in-container repairs)
    graph_before: Any = None            # graph JSON before the repair was applied
    alternatives: list[Candidate] = field(default_factory=list)
    before_idents: set = field(default_factory=set)

    def to_json(self) -> dict[str, Any]:
        return {"signature": self.signature.to_json() if self.signature else None,
                "repair": self.candidate.to_json()}


@dataclass
class RunRecord:
    repo: str
    run_id: str
    status: str = "running"             # success | no_tests | unresolved | over_budget | interrupted | error
    degraded: bool = False
    plan: dict[str, Any] = field(default_factory=dict)
    dockerfile: str = ""
    trajectory: Trajectory = field(default_factory=Trajectory)
    repairs: list[KeptRepair] = field(default_factory=list)
    replay: dict[str, Any] = field(default_factory=dict)
    tests: TestResults = field(default_factory=TestResults)
    timings: dict[str, float] = field(default_factory=dict)
    unresolved: list[dict[str, Any]] = field(default_factory=list)
    remaining: str = ""
    llm_usage: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    best: dict[str, Any] = field(default_factory=dict)
    members: list[dict[str, Any]] = field(default_factory=list)   # a workspace: each member's results
    strategies: list[dict[str, Any]] = field(default_factory=list)   # generic strategies tried
    lock_text: str = ""                 # the requirements lock the clean replay proved

    @property
    def succeeded(self) -> bool:
        return self.status == "success"

    def to_json(self) -> dict[str, Any]:
        return {"repo": self.repo, "run_id": self.run_id, "status": self.status,
                "degraded": self.degraded, "repairs": [r.to_json() for r in self.repairs],
                "replay": self.replay, "tests": self.tests.to_json(), "timings": self.timings,
                "unresolved": self.unresolved, "remaining": self.remaining,
                "llm_usage": self.llm_usage, "warnings": self.warnings, "best": self.best,
                "members": self.members, "strategies": self.strategies,
                "steps": len(self.trajectory)}


# --- one built image + services + runner container ----------------------------------------------

class Workspace:
    def __init__(self, tag: str, dockerfile: Any) -> None:
        self.tag = tag
        self.dockerfile = dockerfile
        self.stack = contextlib.ExitStack()
        self.session: Any = None
        self.env: dict[str, str] = {}
        self.target_env: dict[str, str] = {}
        self.forwards: list[str] = []       # LISTEN:ALIAS:PORT relayed from the runner's localhost
        self.outcome = TargetOutcome("build")

    def close(self) -> None:
        try:
            self.stack.close()
        except SetupbotError as exc:
            log.warning("cleanup: %s", exc.what)


def _default_make_plan(repo: Path, settings: Any, available_pythons: Sequence[str]) -> Any:
    from bot.graph import make_plan  # type: ignore[attr-defined]

    return make_plan(repo, settings, available_pythons=list(available_pythons))


def _default_compile(graph: Any) -> Any:
    from bot.compile import compile_dockerfile  # type: ignore[attr-defined]

    return compile_dockerfile(graph)


def _default_available_pythons(engine: Any) -> list[str]:
    try:
        from bot.engine.images import available_pythons  # type: ignore[attr-defined]

        return list(available_pythons(engine))
    except (ImportError, AttributeError):
        return ["3.11", "3.13"]


def _default_service_manager(engine: Any, network: str) -> Any:
    from bot.verify.services import ServiceManager

    return ServiceManager(engine, network)


class SetupLoop:
    def __init__(self, repo: Path, settings: Any, engine: Any, store: Any = None, llm: Any = None, *,
                 retriever: Any = None,
                 make_plan: Callable[..., Any] = _default_make_plan,
                 compile_dockerfile: Callable[[Any], Any] = _default_compile,
                 service_manager: Callable[[Any, str], Any] = _default_service_manager,
                 available_pythons: Sequence[str] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 trajectory_path: Path | None = None) -> None:
        self.repo = Path(repo)
        self.settings = settings
        self.engine = engine
        self.store = store
        self.llm = llm
        self.retriever = retriever
        if self.retriever is None and store is not None:
            from bot.knowledge import Retriever  # type: ignore[attr-defined]

            self.retriever = Retriever(store, settings.knowledge)
        self.make_plan = make_plan
        self.compile = compile_dockerfile
        self.service_manager = service_manager
        self.available = list(available_pythons) if available_pythons is not None else _default_available_pythons(engine)
        b = settings.budgets
        self.budget = Budget(b.max_steps, b.wall_clock, settings.engine.command_timeout, clock=clock)
        run_id = getattr(engine, "run_id", None) or uuid.uuid4().hex[:10]
        self.record = RunRecord(repo=str(self.repo), run_id=run_id, trajectory=Trajectory(trajectory_path))
        self.traj = self.record.trajectory
        self.n_builds = 0
        self.tried: dict[tuple[str, str], set] = {}
        # candidates that failed in an error state: not tried again for another of its signatures
        self.failed_in_state: dict[frozenset, set] = {}
        self.extra_services: list[Atom] = []
        self.test_override: list[str] | None = None
        self.llm_repairs: list[KeptRepair] = []
        self.tests_tried: dict[str, str] = {}    # test command -> what it found (latest)
        self.stop_reason = ""                    # set when the next trial would not fit the budget
        self._final = False                      # the clean replay is running (its own time limits)
        self._era_cache: Any = None     # bot.graph.era.Era, resolved on first use
        self.providers: dict[str, list[str]] = {}   # module -> installed distributions (runner)

    # -- plan facts -------------------------------------------------------------------------
    @property
    def python(self) -> str:
        return getattr(self, "current_python", "") or "3.11"

    def _plan_env(self) -> dict[str, str]:
        env = dict(getattr(self.plan, "env", {}) or {})
        env.update(dict(self.settings.target.env or {}))
        return env

    def _collect_command(self) -> list[str] | None:
        if not self.settings.target.collect_only:
            return None
        if self.test_override:
            if "pytest" in " ".join(self.test_override):
                return [*self.test_override, "--collect-only", "-q"]
            return None
        cmd = getattr(self.plan, "collect_command", None)
        return list(cmd) if cmd else None

    def _test_command(self) -> list[str]:
        if self.test_override:
            cmd = list(self.test_override)
        elif self.settings.target.test_command:
            cmd = list(self.settings.target.test_command)
        else:
            cmd = list(getattr(self.plan, "test_command", None) or ["python", "-m", "pytest"])
        if _is_pytest(cmd) and not any(a.startswith("--junitxml") for a in cmd):
            cmd = [*cmd, f"--junitxml={JUNIT_PATH}"]
        return cmd

    def _pin_base(self) -> None:
        """Make the base image present through the image source and record where it came from:
        a registry image's digest pins the generated FROM; a stand-in has none."""
        rt = getattr(self.graph, "runtime", None)
        resolve = getattr(self.engine, "resolve_image", None)
        image = rt.attrs.get("base_image") if rt is not None else None
        if not image or resolve is None:
            return
        if rt.attrs.get("base_resolved") == image:
            return
        resolved = resolve(image)
        rt.attrs.update(base_digest=resolved.digest, base_origin=resolved.origin, base_resolved=image)

    # -- one workspace ----------------------------------------------------------------------
    def _service_requirements(self) -> list[Any]:
        reqs = list(getattr(self.plan, "services", []) or [])
        if self.extra_services:
            from bot.verify.services import specs_from_atoms

            reqs.extend(specs_from_atoms(self.extra_services))
        return reqs

    def open_workspace(self, *, no_cache: bool = False, purpose: str = "build") -> Workspace:
        progress.current().stage(purpose)
        self.budget.spend_step()
        self._pin_base()
        dockerfile = self.compile(self.graph)
        self.n_builds += 1
        tag = f"setupbot-loop-{self.record.run_id}:{'replay' if no_cache else 'work'}-{self.n_builds}"
        ws = Workspace(tag, dockerfile)
        started = time.monotonic()
        build = self.engine.build(self.repo, dockerfile.text, tag, no_cache=no_cache,
                                  timeout=self._build_timeout())
        self.budget.measured(build=build.seconds)
        if getattr(build, "limits_note", "") and build.limits_note not in self.record.warnings:
            self.record.warnings.append(build.limits_note)
        self.record.timings["build_seconds"] = self.record.timings.get("build_seconds", 0.0) + build.seconds
        sigs = diagnose(build.log) if not build.ok else []
        self.traj.record(purpose, command=["build", tag] + (["--no-cache"] if no_cache else []),
                         exit_code=0 if build.ok else 1, output_tail=build.log[-2000:],
                         duration=time.monotonic() - started, outcome="ok" if build.ok else "failed",
                         detail={"signatures": [s.to_json() for s in sigs]})
        if not build.ok:
            ws.outcome = TargetOutcome("build", sigs, log=build.log, note="the image build failed")
            return ws
        try:
            network = None
            env = self._plan_env()
            reqs = self._service_requirements()
            if reqs:
                network = ws.stack.enter_context(self.engine.network())
                manager = ws.stack.enter_context(self.service_manager(self.engine, network))
                t0 = time.monotonic()
                started_services = manager.start(reqs, ci_env=env)
                env.update(started_services.env)
                self.traj.record("services", command=[getattr(o, "name", "?") for o in started_services.outcomes],
                                 duration=time.monotonic() - t0,
                                 outcome="ok" if started_services.all_healthy else "unhealthy",
                                 detail={"services": [o.to_json() for o in started_services.outcomes]})
                self._note_services(started_services.outcomes)
                from bot.verify.services import ServiceSpec, forward_targets

                # CI reaches services on localhost: relay 127.0.0.1/::1 to each sibling
                ws.forwards = forward_targets(started_services.outcomes, [ServiceSpec.from_any(r) for r in reqs])
            ws.env = env
            ws.session = ws.stack.enter_context(self.engine.session(tag, env=env, network=network))
        except SetupbotError as exc:
            ws.close()
            ws.outcome = TargetOutcome("build", [], log=exc.render(), note=f"the runner did not start: {exc.what}")
            self.traj.record("start", outcome="failed", output_tail=exc.render())
            return ws
        ws.outcome = self.evaluate(ws)
        return ws

    def _build_timeout(self) -> int:
        """An image build is cut where its phase's time ends (like every command)."""
        limit = int(getattr(self.settings.engine, "build_timeout", 1800) or 1800)
        return max(1, min(limit, int(self.budget.room(final=self._final))))

    def _exec(self, ws: Workspace, argv: list[str], action: str, env: Mapping[str, str] | None = None) -> Any:
        snap = str(getattr(ws.session, "depth", ""))
        t0 = self.budget.now()
        res = ws.session.exec(argv, env=dict(env or ws.target_env) or None, timeout=self.budget.timeout_for_command(final=self._final))
        if action == "trial":
            self.budget.measured(command=self.budget.now() - t0)
        self.traj.record(action, command=list(argv), exit_code=res.exit_code, output_tail=res.output[-2000:],
                         duration=res.duration, snapshot=snap,
                         outcome="timeout" if res.timed_out else ("ok" if res.exit_code == 0 else "failed"))
        return res

    def evaluate(self, ws: Workspace, env: Mapping[str, str] | None = None) -> TargetOutcome:
        """Run the target in the workspace: collection first, then the tests with JUnit XML.
        Every test command tried is noted with what it found, for a report that has to say
        why no test ran."""
        t0 = self.budget.now()
        outcome = self._evaluate(ws, env)
        self.budget.measured(target=self.budget.now() - t0)
        cmd = " ".join(a for a in self._test_command() if not a.startswith("--junitxml"))
        n = ran_count(outcome)
        if n is not None:
            found = f"{n} test(s) ran"
        elif outcome.stage == "build":
            found = "the environment did not start"
        else:
            found = f"stopped at {outcome.stage}" + (f" ({outcome.setup_failures[0].describe()})"
                                                     if outcome.setup_failures else "")
        self.tests_tried[cmd] = found
        return outcome

    def _evaluate(self, ws: Workspace, env: Mapping[str, str] | None = None) -> TargetOutcome:
        env = dict(ws.target_env if env is None else env)
        if ws.forwards:
            self._ensure_forwarding(ws)
        collect = self._collect_command()
        outcome = TargetOutcome("collect")
        if collect:
            r = self._exec(ws, collect, "collect", env)
            outcome.collect_exit = r.exit_code
            if r.exit_code != 0:
                sigs = collection_signatures(r.output)
                absent = absent_submodules(self.repo, r.output)
                if absent:
                    # no package brings a missing checkout back: say so instead of trying repairs
                    sigs = [Signature("missing_submodule", "configuration", path,
                                      f"git submodule {path} ({url}) is not checked out; the tests read from it. "
                                      "Check out with submodules (the reusable workflow's `submodules: recursive` input, "
                                      "or `git submodule update --init --recursive`).")
                            for path, url in absent] + [s for s in sigs if s.kind != "collection_error"]
                if r.exit_code == 5 and not any(s.kind == "no_tests_collected" for s in sigs):
                    sigs.append(Signature("no_tests_collected", "verification", "", "pytest exit code 5"))
                if r.timed_out:
                    outcome.note = "test collection timed out"
                return TargetOutcome("collect", sigs, log=r.output, collect_exit=r.exit_code, note=outcome.note)
        cmd = self._test_command()
        r = self._exec(ws, cmd, "test", env)
        results = TestResults()
        junit = False
        if _is_pytest(cmd):
            xml = ws.session.exec(["cat", JUNIT_PATH], timeout=60)
            if xml.exit_code == 0:
                results = parse_junit(xml.output)
                junit = bool(xml.output.strip())
        sigs = diagnose(r.output + "\n" + results.failure_text())
        if collect is None:
            outcome.collect_exit = 0 if r.exit_code in (0, 1) else r.exit_code
        else:
            outcome.collect_exit = 0
        if r.exit_code == 5 and not any(s.kind == "no_tests_collected" for s in sigs):
            sigs.append(Signature("no_tests_collected", "verification", "", "pytest exit code 5"))
        ran_tests = bool(results.total) or unittest_ran(r.output)
        stage = "done" if (r.exit_code == 0 or (r.exit_code == 1 and ran_tests)) and not r.timed_out else "test"
        note = "the test run timed out" if r.timed_out else ""
        if r.timed_out and collect is not None and not setup_failures(sigs):
            # a long suite: collection proved the environment and nothing in the output so far is
            # a setup failure; the run counts as ran (the report says the tests timed out)
            stage = "done"
            note = (f"the test run timed out after {int(r.duration)} s; collection passed and the output so far "
                    "shows no setup failure, so the outcomes of the unfinished tests are unknown")
        return TargetOutcome(stage, sigs, log=r.output, collect_exit=outcome.collect_exit,
                             test_exit=r.exit_code, results=results, note=note, junit=junit)

    def _ensure_forwarding(self, ws: Workspace) -> None:
        """The localhost relay runs in the runner (a rolled-back container has none)."""
        from bot.verify.services import start_localhost_forwarding

        if not start_localhost_forwarding(ws.session, ws.forwards):
            note = "localhost forwarding to the services did not start; tests must use the service names"
            if note not in self.record.warnings:
                self.record.warnings.append(note)

    def _note_services(self, outcomes: Sequence[Any]) -> None:
        """A service the repository declares that could not be started is said in the report."""
        for o in outcomes:
            if getattr(o, "healthy", True):
                continue
            note = f"service {getattr(o, 'name', '?')} ({getattr(o, 'requested_image', '') or getattr(o, 'kind', '')}) " \
                   f"was not started: {getattr(o, 'note', '') or 'not healthy'}"
            if note not in self.record.warnings:
                self.record.warnings.append(note)

    # -- candidates ---------------------------------------------------------------------------
    def candidates_for(self, sig: Signature, outcome: TargetOutcome) -> list[Candidate]:
        context = {"python": self.python, "os": "debian"}
        excerpt = _excerpt(outcome.log, sig)
        try:
            from_store = knowledge_candidates(self.retriever, excerpt, context, self.settings.knowledge.k)
        except SetupbotError as exc:
            self.record.warnings.append(f"experience base: {exc.what}")
            from_store = []
        rules = rule_candidates(sig, repo=self.repo, python=self.python, available_pythons=self.available,
                                repo_env=self.settings.target.env,
                                specs=self._plan_specs() if sig.kind == "missing_native_submodule" else None)
        rules = rules + self.era_candidates(sig, outcome.log)
        tried = self.tried.setdefault(sig.ident, set())
        failed_here = self.failed_in_state.get(frozenset(outcome.idents()), set())
        # units whose signal matched first, then the obvious rules, then units that are only
        # similar text (lexical/embedding neighbours): those are the weakest evidence
        exact = [c for c in from_store if c.exact]
        similar = [c for c in from_store if not c.exact]
        # a missing native submodule is precise: units about missing modules would reinstall
        # the same wheel-less build
        groups = (rules, exact, similar) if sig.kind == "missing_native_submodule" else (exact, rules, similar)
        merged = self._prefer_installed(sig, merge_candidates(*groups))
        cands = [c for c in merged if c.key() not in tried and c.key() not in failed_here]
        return cands[: max(0, self.settings.budgets.max_repairs_per_signature - len(tried))]

    def _installed_providers(self, ws: Workspace) -> dict[str, list[str]]:
        import json

        try:
            r = ws.session.exec(["python", "-c", PROVIDERS_SCRIPT], timeout=120)
            return json.loads(r.output.strip().splitlines()[-1]) if r.exit_code == 0 and r.output.strip() else {}
        except (SetupbotError, ValueError, IndexError):
            return {}

    def _plan_specs(self) -> dict[str, str]:
        from bot.graph.build import install_spec

        return {n.name: install_spec(n.attrs.get("spec", n.name), n.attrs.get("pinned") or n.attrs.get("resolved"))
                for n in self.graph.of_type("PACKAGE") if n.action == "pip"}

    def _declared_distributions(self) -> set[str]:
        """Distributions the repository itself declares (not guessed from an import)."""
        return {n.name for n in self.graph.of_type("PACKAGE")
                if n.action == "pip" and n.attrs.get("source") != "import"}

    def _prefer_installed(self, sig: Signature, cands: list[Candidate]) -> list[Candidate]:
        """When a distribution the repository declares already provides the module, never
        install another distribution for it; if another one is installed too (an import guessed
        the original of a fork), leaving that one out comes first."""
        if sig.kind not in PROVIDER_KINDS or not sig.key or not self.providers.get(sig.key):
            return cands
        from packaging.utils import canonicalize_name

        installed = {canonicalize_name(p) for p in self.providers[sig.key]}
        declared = {canonicalize_name(d) for d in self._declared_distributions()}
        own = installed & declared
        if not own:
            return cands

        def installs_other(c: Candidate) -> bool:
            for a in c.atoms:
                if a.kind == "pip_install":
                    for spec in a.args["packages"]:
                        name = canonicalize_name(re.split(r"[<>=!~\[;@ ]", spec, 1)[0])
                        if name not in own:
                            return True
            return False

        out = [c for c in cands if not installs_other(c)]
        others = sorted(installed - own)
        if others:
            out.insert(0, Candidate([Atom("drop_package", {"manager": "pip", "packages": others})], "rule",
                                    why=f"{', '.join(sorted(own))} (declared) provides {sig.key}; "
                                        f"{', '.join(others)} installs the same module over it"))
        return out

    # -- the repository's era -------------------------------------------------------------------
    ERA_KINDS = {"dependency_error", "import_name_error", "module_attribute", "missing_module",
                 "wheel_build_failed", "collection_error"}
    # a native build that fails for want of a library: a release from the repository's era may
    # build against the libraries this Debian has (pygobject 3.48 needs girepository-1.0, 3.52
    # girepository-2.0)
    ERA_BUILD_KINDS = {"missing_pkg_config_module", "missing_header", "missing_shared_lib"}

    def _era(self) -> Any:
        """The era resolution of the graph's requirements (once per Python), or None when the
        run has no reference date."""
        from bot.graph.era import reference_date, resolve_era

        cache = self._era_cache
        if cache is not None and cache.python == self.python:
            return cache
        date, source = reference_date(self.repo, self.settings)
        if not date:
            return None
        from bot.graph.plan import install_specs as _install_specs

        t0 = time.monotonic()
        era = resolve_era(_install_specs(self.graph), self.python, date, source)
        res = era.resolution
        self.traj.record("era", command=["uv", "pip", "compile", "--exclude-newer", date],
                         duration=time.monotonic() - t0,
                         outcome="ok" if era.pins else "failed",
                         output_tail=(res.error if res is not None else "")[-2000:],
                         detail={"date": date, "source": source, "pins": len(era.pins)})
        self._era_cache = era
        return era

    def _current_pins(self) -> dict[str, str]:
        pins = dict((self.graph.meta.get("resolution") or {}).get("pins") or {})
        for n in self.graph.of_type("PACKAGE"):
            if n.attrs.get("resolved"):
                pins.setdefault(n.name, n.attrs["resolved"])
        return pins

    def era_candidates(self, sig: Signature, log_text: str = "") -> list[Candidate]:
        """Pins to the releases current at the repository's reference date: first the one
        distribution the signature names (when its era release differs from what is installed),
        then every distribution whose era release differs."""
        building: list[str] = []
        if sig.kind in self.ERA_BUILD_KINDS:
            building = failed_builds(log_text)
            if not building:
                return []
        elif sig.kind not in self.ERA_KINDS:
            return []
        if sig.kind == "missing_module" and "." not in sig.message.split("No module named", 1)[-1].strip(" '\""):
            return []   # a plain missing module is an install, not a newer release
        era = self._era()
        if era is None or not era.pins:
            return []
        from packaging.utils import canonicalize_name

        from bot.loop.repair import distribution_for

        current = self._current_pins()
        drifted = era.drifted(current)
        out: list[Candidate] = []
        names = [canonicalize_name(b) for b in building] if building else \
            [canonicalize_name(sig.key if sig.kind == "wheel_build_failed" else distribution_for(sig.key))] if sig.key else []
        for dist in names:
            if dist in drifted:
                was = current.get(dist)
                out.append(Candidate([Atom("pip_constraint", {"constraints": [f"{dist}=={drifted[dist]}"]})], "rule",
                                     why=f"{dist} {drifted[dist]} was current on {era.date[:10]} ({era.source})"
                                         + (f"; {was} is newer than the repository" if was else "")))
        # PIP_CONSTRAINT reaches the isolated build environments too: pinning the packaging
        # tools there breaks sdists whose build needs a newer one (python-pkcs11's
        # setuptools-scm wants packaging>=26.2), so the whole-era set leaves them alone
        drifted_all = {n: v for n, v in drifted.items() if n not in BUILD_TOOLS}
        if drifted_all:
            specs = [f"{n}=={v}" for n, v in sorted(drifted_all.items())]
            out.append(Candidate([Atom("pip_constraint", {"constraints": specs})], "rule",
                                 why=f"the releases current on {era.date[:10]} ({era.source}) for "
                                     f"{len(specs)} distribution(s) newer than the repository"))
        return out

    def _record_outcome(self, cand: Candidate, outcome: str) -> None:
        if cand.unit_id and self.retriever is not None:
            try:
                self.retriever.record_outcome(cand.unit_id, outcome)
            except SetupbotError as exc:
                self.record.warnings.append(f"telemetry for {cand.unit_id}: {exc.what}")

    def _apply_to_graph(self, cand: Candidate, sig: Signature | None) -> None:
        # one evidence item (a list of one tuple: apply_atom iterates over items)
        evidence = [(REPAIR_EVIDENCE, None, (sig.describe() + ": " if sig else "") + (cand.why or cand.describe()))]
        for atom in cand.atoms:
            self.graph.apply_atom(atom, evidence)
            if atom.kind == "start_service":
                self.extra_services.append(atom)
            if atom.kind == "test_command":
                self.test_override = list(atom.args["command"])
            if atom.kind == "switch_python":
                self.current_python = str(atom.args["version"])

    # -- trials -------------------------------------------------------------------------------
    def trial_in_container(self, ws: Workspace, cand: Candidate, sig: Signature | None) -> tuple[str, TargetOutcome]:
        before = ws.outcome
        depth = getattr(ws.session, "depth", 0)
        snap = ws.session.snapshot(note=cand.describe()[:200])
        self.traj.record("snapshot", snapshot=str(snap), outcome="ok", detail={"depth": depth + 1})
        trial_env = dict(ws.target_env)
        saved_override = self.test_override
        failed = ""
        for atom in cand.atoms:
            if atom.kind == "set_env":
                trial_env[atom.args["name"]] = atom.args["value"]
            elif atom.kind == "test_command":
                self.test_override = list(atom.args["command"])
            for argv in trial_commands(atom):
                self.budget.spend_step()
                r = self._exec(ws, argv, "trial", {**ws.env, **trial_env})
                if r.exit_code != 0:
                    failed = f"{' '.join(argv)} exited {r.exit_code}"
                    break
            if failed:
                break
        after = TargetOutcome(before.stage, before.signatures, log=before.log, note=failed) if failed \
            else self.evaluate(ws, trial_env)
        verdict = "failed" if failed else compare(before, after, sig)
        if not failed and changes_test_command(cand) and not runs_more_tests(before, after):
            verdict = "no-more-tests"
        if verdict == "improved" or (verdict == "unchanged" and sig is None and not failed and after.passed):
            ws.target_env = trial_env
            ws.outcome = after
            self.traj.record("keep", command=[cand.describe()], snapshot=str(snap), outcome="kept",
                             detail={"candidate": cand.to_json(), "after": after.to_json()})
            return "kept", after
        ws.session.rollback(1)
        self.test_override = saved_override
        self.traj.record("rollback", command=[cand.describe()], snapshot=str(snap), outcome=verdict,
                         detail={"candidate": cand.to_json(), "after": after.to_json(), "frames": 1})
        return verdict, after

    def trial_by_rebuild(self, ws: Workspace, cand: Candidate, sig: Signature | None) -> tuple[str, Workspace]:
        graph_before = self.graph.to_json()
        saved = (list(self.extra_services), self.test_override, self.current_python)
        self._apply_to_graph(cand, sig)
        new_ws = self.open_workspace(purpose="trial-build")
        verdict = compare(ws.outcome, new_ws.outcome, sig)
        if changes_test_command(cand) and not runs_more_tests(ws.outcome, new_ws.outcome):
            verdict = "no-more-tests"
        if verdict == "improved":
            self.traj.record("keep", command=[cand.describe()], outcome="kept",
                             detail={"candidate": cand.to_json(), "after": new_ws.outcome.to_json()})
            return "kept", new_ws
        new_ws.close()
        self.graph = type(self.graph).from_json(graph_before)
        self.extra_services, self.test_override, self.current_python = saved
        self.traj.record("rollback", command=[cand.describe()], outcome=verdict,
                         detail={"candidate": cand.to_json(), "after": new_ws.outcome.to_json(), "rebuild": True})
        return verdict, ws

    def try_candidate(self, ws: Workspace, cand: Candidate, sig: Signature | None,
                      alternatives: list[Candidate]) -> tuple[bool, Workspace]:
        """Trial one candidate; on success record the kept repair and return the live workspace."""
        progress.current().trial(cand.describe())
        if sig is not None:
            self.tried.setdefault(sig.ident, set()).add(cand.key())
        graph_before = self.graph.to_json()
        before_idents = ws.outcome.idents()
        excerpt = _excerpt(ws.outcome.log, sig)
        if cand.in_container and ws.session is not None:
            depth = getattr(ws.session, "depth", None)
            verdict, _ = self.trial_in_container(ws, cand, sig)
            if verdict == "kept":
                self._apply_to_graph(cand, sig)
                self._keep(KeptRepair(sig, cand, excerpt, frame_depth=depth, graph_before=graph_before,
                                      alternatives=alternatives, before_idents=before_idents))
                return True, ws
        else:
            verdict, new_ws = self.trial_by_rebuild(ws, cand, sig)
            if verdict == "kept":
                ws.close()
                self._keep(KeptRepair(sig, cand, excerpt, frame_depth=None, graph_before=graph_before,
                                      alternatives=alternatives, before_idents=before_idents))
                return True, new_ws
        self.failed_in_state.setdefault(frozenset(before_idents), set()).add(cand.key())
        self._record_outcome(cand, "failure")
        return False, ws

    def _keep(self, kept: KeptRepair) -> None:
        self.record.repairs.append(kept)
        self._record_outcome(kept.candidate, "success")
        if kept.candidate.source in ("llm", "human"):
            self.llm_repairs.append(kept)

    def backtrack(self, ws: Workspace, stuck: Signature) -> tuple[bool, Workspace]:
        """Abandon a sub-path: roll back to before the latest kept in-container repair that came
        before ``stuck`` appeared and still has an untried alternative, then try that one."""
        for idx in range(len(self.record.repairs) - 1, -1, -1):
            kept = self.record.repairs[idx]
            if kept.frame_depth is None or stuck.ident in kept.before_idents:
                continue
            alternatives = [c for c in kept.alternatives if kept.signature is None
                            or c.key() not in self.tried.get(kept.signature.ident, set())]
            if not alternatives:
                continue
            frames = ws.session.depth - kept.frame_depth
            if frames <= 0:
                continue
            ws.session.rollback(frames)
            undone = self.record.repairs[idx:]
            del self.record.repairs[idx:]
            for k in undone:
                self._record_outcome(k.candidate, "failure")
            self.graph = type(self.graph).from_json(kept.graph_before)
            self.traj.record("rollback", command=[k.candidate.describe() for k in undone], outcome="abandoned",
                             detail={"frames": frames, "stuck_on": stuck.to_json()})
            # the target state before that repair: re-evaluate on the restored container
            ws.outcome = self.evaluate(ws)
            for cand in alternatives:
                ok, ws = self.try_candidate(ws, cand, kept.signature, alternatives[1:])
                if ok:
                    return True, ws
            return False, ws
        return False, ws

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> RunRecord:
        t_start = time.monotonic()
        rec = self.record
        progress.current().stage("plan")
        ws: Workspace | None = None
        try:
            self.plan = self.make_plan(self.repo, self.settings, self.available)
            self.graph = self.plan.graph
            self.current_python = str(getattr(self.plan, "python", "") or "3.11")
            rec.warnings.extend(str(w) for w in getattr(self.plan, "warnings", []) or [])
            rec.timings["plan_seconds"] = round(time.monotonic() - t_start, 3)
            self.traj.record("plan", outcome="ok", duration=rec.timings["plan_seconds"],
                             detail={"python": self.current_python, "base_image": getattr(self.plan, "base_image", "")})
            ws = self.open_workspace()
            while True:
                over = self.budget.exhausted() or self.stop_reason
                # a state that passes goes to its replay: that is what the reserve is for
                if over and not (ws.outcome.passed and self.budget.can_replay()):
                    # the budget for trials is spent: replay and keep the best state found so far
                    # (the graph holds only repairs that improved things), say what was left undone
                    undone = self._what_remains(ws.outcome)
                    ws.close()
                    ws = None
                    self._finish(over_budget=f"{over}; left undone: {undone}")
                    break
                self._note_best(ws.outcome)
                # the LLM gets the setup failures that no unit or rule can repair
                llm_can_try = bool(ws.outcome.setup_failures) and self._llm_available()
                ready = ws.outcome.passed or (self._ran(ws.outcome) and not self._repairable(ws.outcome)
                                              and not llm_can_try)
                if not ready:
                    progressed, ws = self.repair_step(ws)
                    if progressed:
                        continue
                    if not self._ran(ws.outcome) and not finds_no_tests(ws.outcome):
                        rec.status = "unresolved"
                        break
                    # the tests collected and ran; what is left cannot be repaired here: replay
                    # this state, and the record says what remains
                ws.close()
                ws = None
                replay_ws = self._finish()
                if replay_ws is None:
                    break
                # a replay failure is new evidence: keep working in the replayed container
                ws = replay_ws
        except LLMError as exc:
            rec.status = "unresolved"
            rec.remaining = exc.what
        except Interrupted as exc:
            # SIGTERM/SIGINT: stop here; the caller writes the outputs of the state reached so far
            rec.status = "interrupted"
            left = self._what_remains(ws.outcome) if ws is not None else "the run had not evaluated the target yet"
            rec.remaining = f"{exc.what} after {time.monotonic() - t_start:.0f}s; left undone: {left}"
            self.traj.record("interrupted", outcome="stopped", detail={"remaining": rec.remaining})
        finally:
            if ws is not None:
                ws.close()
            if getattr(self, "graph", None) is not None:
                graph = self.graph
                if rec.status != "success":
                    # an LLM repair no clean replay proved never reaches the published Dockerfile
                    first = next((k for k in rec.repairs if k in self.llm_repairs and k.graph_before), None)
                    if first is not None:
                        graph = type(self.graph).from_json(first.graph_before)
                        rec.warnings.append("the LLM's repairs are left out of the Dockerfile: no clean replay proved them")
                rec.dockerfile = self.compile(graph).text
                # protections that do not hold here (open egress, unbounded BuildKit builds)
                notes = getattr(self.engine, "sandbox_notes", None)
                rec.warnings.extend(n for n in (notes() if callable(notes) else []) if n not in rec.warnings)
                rec.plan = _plan_json(self.plan, self.graph)
            rec.timings["total_seconds"] = round(time.monotonic() - t_start, 3)
            if self.llm is not None:
                rec.llm_usage = self.llm.usage()
                rec.degraded = rec.degraded or bool(getattr(self.llm, "degraded", False))
        if rec.status == "success":
            self._learn()
        return rec

    def _finish(self, over_budget: str = "") -> Workspace | None:
        """Clean replay of the current state and the run's status from it. Returns the replay's
        workspace when the loop should keep working in it (a replay failure with budget left),
        else None (the run is over)."""
        rec = self.record
        if over_budget and not self.budget.can_replay():
            rec.status = "over_budget"
            rec.remaining = f"{over_budget}; no time left for the clean replay ({self.budget.left:.0f}s left)"
            return None
        replay_ws = self.replay()
        outcome = replay_ws.outcome
        rec.members = member_results(self.graph, outcome.results)
        if self._ran(outcome) or finds_no_tests(outcome):
            if finds_no_tests(outcome) or ran_count(outcome) == 0:
                # a replay that ran no test (or only skipped ones) proves no environment
                rec.status = "no_tests"
                rec.tests = outcome.results
                rec.remaining = self._no_tests_reason(outcome)
                rec.unresolved = [{"kind": "no_tests", "category": "verification", "key": "",
                                   "message": rec.remaining}]
            else:
                rec.status = "success"
                rec.tests = outcome.results
                if outcome.setup_failures:
                    rec.unresolved = [s.to_json() for s in outcome.setup_failures]
                    rec.remaining = self._what_remains(outcome)
            if over_budget:
                rec.remaining = over_budget + (f"; {rec.remaining}" if rec.remaining else "")
            replay_ws.close()
            if rec.status == "success":
                if self.budget.can_replay():
                    self.lock_replay()
                else:   # locking is one more build: it never takes the run past its budget
                    rec.warnings.append("environment not locked: too little of the budget left for the "
                                        "build that proves the lock")
            return None
        if over_budget or self.budget.exhausted():
            replay_ws.close()
            rec.status = "over_budget"
            rec.remaining = (over_budget or self.budget.exhausted()) + \
                f"; the clean replay failed: {self._what_remains(outcome)}"
            return None
        return replay_ws

    def _llm_available(self) -> bool:
        llm = self.llm
        return llm is not None and not getattr(llm, "degraded", False) and \
            (not hasattr(llm, "budget_left") or llm.budget_left())

    @staticmethod
    def _ran(outcome: TargetOutcome) -> bool:
        """Collection succeeded and the test run completed (whatever the tests' own verdicts)."""
        return outcome.collected and outcome.stage == "done"

    def _repairable(self, outcome: TargetOutcome) -> bool:
        return any(self.candidates_for(s, outcome) for s in outcome.setup_failures)

    def repair_step(self, ws: Workspace) -> tuple[bool, Workspace]:
        """One repair: the first setup failure with a candidate that improves things."""
        outcome = ws.outcome
        sigs = outcome.setup_failures
        self.providers = {}
        if ws.session is not None and any(s.kind in PROVIDER_KINDS for s in sigs):
            self.providers = self._installed_providers(ws)
        for sig in sigs:
            cands = self.candidates_for(sig, outcome)
            for i, cand in enumerate(cands):
                if self.budget.exhausted():
                    return True, ws  # the loop head reports the budget
                need = self._trial_estimate(cand)
                if not self.budget.can_start(need):
                    self.stop_reason = (f"the next trial ({cand.describe()}, about {need:.0f}s) would not finish "
                                        f"before the {self.budget.reserve:.0f}s kept for the clean replay "
                                        f"({self.budget.work_left():.0f}s of trial time left)")
                    return True, ws
                ok, ws = self.try_candidate(ws, cand, sig, cands[i + 1:])
                if ok:
                    return True, ws
        if sigs and ws.session is not None:
            ok, ws = self.backtrack(ws, sigs[0])
            if ok:
                return True, ws
        ok, ws = self.generic_step(ws)
        if ok:
            return True, ws
        if self._llm_available():
            ok, ws = self.llm_step(ws)
            if ok:
                return True, ws
        self.record.unresolved = [{**s.to_json(), "message": s.message + self._no_python_note(s)} for s in sigs] or [{
            "kind": "unclassified", "category": "unknown", "key": "",
            "message": _last_lines(outcome.log, 12)}]
        self.record.remaining = self._what_remains(outcome)
        return False, ws

    def _trial_estimate(self, cand: Candidate) -> float:
        """Seconds a trial is expected to take, from what was measured: a target run, plus an
        image build when the repair changes the image."""
        target = self.budget.target_seconds or 0.0
        if cand.in_container:
            return target + (self.budget.command_seconds or 0.0) * max(1, sum(len(trial_commands(a)) for a in cand.atoms))
        return (self.budget.build_seconds or 0.0) + target

    def generic_step(self, ws: Workspace) -> tuple[bool, Workspace]:
        """No rule or unit repairs what is left: the generic strategies, each once per run."""
        from bot.loop.repair import generic_candidates

        tried = self.tried.setdefault(("generic", ""), set())
        for strategy, cand in generic_candidates(self.repo, self.graph):
            if cand.key() in tried or self.budget.exhausted():
                continue
            tried.add(cand.key())
            ok, ws = self.try_candidate(ws, cand, None, [])
            self.record.strategies.append({"strategy": strategy, "repair": cand.describe(), "kept": ok})
            # the report says which generic strategies were tried
            self.record.warnings.append(f"no classified repair; generic strategy \"{strategy}\" "
                                        f"({cand.describe()}): {'kept' if ok else 'did not help'}")
            if ok:
                return True, ws
        return False, ws

    def llm_step(self, ws: Workspace) -> tuple[bool, Workspace]:
        from bot.loop.llm import run_planner_turns

        return run_planner_turns(self, ws)

    def replay(self) -> Workspace:
        """Build the compiled Dockerfile with no cache, fresh container, run the target."""
        t0 = time.monotonic()
        self._final = True
        try:
            ws = self.open_workspace(no_cache=True, purpose="replay")
        finally:
            self._final = False
        o = ws.outcome
        self.record.replay = {"ok": self._ran(o) or finds_no_tests(o), "tests_ran": ran_count(o),
                              "collect_exit": o.collect_exit,
                              "test_exit": o.test_exit, "tests": o.results.summary(), "note": o.note,
                              "signatures": [s.to_json() for s in o.signatures],
                              "seconds": round(time.monotonic() - t0, 3), "tag": ws.tag}
        self.traj.record("replay-result", outcome="ok" if self.record.replay["ok"] else "failed",
                         duration=time.monotonic() - t0, detail=self.record.replay)
        return ws

    def lock_replay(self) -> None:
        """Lock what the clean replay proved (bot.verify.lock, issue 16): the graph then compiles
        to a Dockerfile that installs the lock, and the replay tag becomes the locked image's,
        which the verification runs on. A lock that does not reproduce the set is not kept."""
        from bot.graph.model import DepGraph

        if not isinstance(self.graph, DepGraph) or not hasattr(self.engine, "run_once"):
            return  # stand-in collaborators (tests) have no image to freeze
        from bot.loop.lock import lock_environment

        t0 = time.monotonic()
        try:
            out = lock_environment(self.engine, self.repo, self.graph, replay_tag=self.record.replay["tag"],
                                   output_dir=self.settings.output.dir)
        except SetupbotError as exc:
            self.record.warnings.append(f"environment not locked: {exc.what}")
            return
        self.record.replay["lock"] = out.to_json()
        self.record.timings["lock_seconds"] = round(time.monotonic() - t0, 3)
        self.traj.record("lock", outcome="ok" if out.ok else out.status, duration=time.monotonic() - t0,
                         detail=out.to_json())
        for note in out.notes:
            self.record.warnings.append(f"lock: {note}")
        if out.status == "native":
            return
        if not out.ok:
            self.record.warnings.append(f"environment not locked: {out.reason}")
            return
        if out.status == "locked":
            self.graph = out.graph
        self.record.lock_text = out.text
        self.record.replay["tag"] = out.tag

    def _note_best(self, outcome: TargetOutcome) -> None:
        best = self.record.best
        rank = (STAGE_RANK[outcome.stage], outcome.results.count("passed"))
        if not best or tuple(best["rank"]) < rank:
            self.record.best = {"rank": list(rank), "outcome": outcome.to_json(),
                                "dockerfile": self.compile(self.graph).text}

    def _no_tests_reason(self, outcome: TargetOutcome) -> str:
        """What was tried to find tests, for a run whose clean replay ran none."""
        skipped = outcome.results.count("skipped")
        head = (f"the clean replay ran no test ({skipped} skipped)" if skipped
                else "the clean replay ran no test")
        tried = "; ".join(f"`{cmd}`: {found}" for cmd, found in self.tests_tried.items())
        target = getattr(self.graph, "target", None)
        sources = [f"{e[0]}" + (f":{e[1]}" if e[1] else "") + f" ({e[2]})"
                   for e in (getattr(target, "evidence", None) or [])][:3]
        from bot.loop.repair import find_test_dirs as _test_dirs

        dirs = _test_dirs(self.repo)
        where = (f"test folders present: {', '.join(d + '/' for d in dirs)}" if dirs
                 else "no tests/, test/, src/tests/ or testing/ folder")
        text = f"{head}. Test commands tried: {tried or 'none'}. {where}"
        if sources:
            text += f"; the test command came from {', '.join(sources)}"
        return text + (". Name the test command in .github/setupbot.yml (target.test_command) "
                       "if the tests are elsewhere.")

    def _what_remains(self, outcome: TargetOutcome) -> str:
        text = self._remains(outcome)
        if self.record.strategies:
            text += " (generic strategies tried: " + "; ".join(
                f"{t['strategy']}: {'kept' if t['kept'] else 'no help'}" for t in self.record.strategies) + ")"
        return text

    def _remains(self, outcome: TargetOutcome) -> str:
        # collection_error only stands for "failed, unclassified" so that era pins can be tried
        sigs = [s for s in outcome.setup_failures if s.kind != "collection_error"]
        if sigs:
            return "unresolved: " + "; ".join(f"{s.describe()}: {s.message}{self._no_python_note(s)}" for s in sigs[:5])
        if outcome.stage != "done":
            tried = " (pinning the releases of the repository's era did not help)" \
                if any(s.kind == "collection_error" and self.tried.get(s.ident) for s in outcome.setup_failures) else ""
            return f"the target stopped at {outcome.stage} with no classified cause{tried}: " + _last_lines(outcome.log, 5)
        return "nothing"

    def _no_python_note(self, sig: Signature) -> str:
        """Pins that need a Python none of the offered images has: say so plainly."""
        from bot.loop.repair import next_python as choose_python

        offered = ", ".join(sorted(self.available, key=lambda v: tuple(int(x) for x in v.split(".")))) or "none"
        if sig.kind == "python_pin" and choose_python(sig.key, self.available, "") is None:
            return f"; none of the offered Pythons ({offered}) satisfies {sig.key}: an image with such a Python is needed"
        if sig.kind == "no_matching_distribution" and "==" in sig.key:
            return f"; no offered Python ({offered}) installs this pin"
        return ""

    def _learn(self) -> None:
        """Repairs the LLM or a person supplied that survived the clean replay become units."""
        if self.store is None:
            return
        for kept in self.llm_repairs:
            if kept not in self.record.repairs:
                continue
            try:
                from bot.knowledge import learn_unit  # type: ignore[attr-defined]

                # a shared store holds what the LLM taught in quarantine until a person approves
                # it (`setupbot knowledge approve ID`): other repositories never run it unseen
                quarantine = kept.candidate.source == "llm" and bool(getattr(self.store, "shared", False))
                uid = learn_unit(self.store, kept.log_excerpt, kept.candidate.atoms,
                                 {"source": kept.candidate.source, "repo": self.repo.name,
                                  "run_id": self.record.run_id}, quarantine=quarantine)
                self.traj.record("learn", outcome="ok", detail={"unit": uid})
            except (SetupbotError, ImportError) as exc:
                self.record.warnings.append(f"learning: {exc}")


_BUILDING = re.compile(r"(?:Failed building wheel for|Failed to build|Building wheel for|"
                       r"Preparing metadata \(pyproject\.toml\)[^\n]*?for|Collecting) ([A-Za-z0-9][\w.\-]*)")


def member_results(graph: Any, results: TestResults) -> list[dict[str, Any]]:
    """A workspace's members, each with the results of its own tests (JUnit class names start
    with the member's folder, dotted: packages/core-lib -> packages.core-lib.)."""
    nodes = getattr(graph, "nodes", None)
    if not isinstance(nodes, dict):
        return []
    members = sorted((n for n in nodes.values() if n.attrs.get("member")), key=lambda n: n.attrs.get("order", 0))
    out = []
    for n in members:
        prefix = n.attrs["path"].replace("/", ".") + "."
        own = TestResults({t: o for t, o in results.outcomes.items() if t.startswith(prefix)})
        out.append({"name": n.name, "path": n.attrs["path"], "tested_by_ci": bool(n.attrs.get("ci")),
                    "tests": own.summary()})
    return out


def failed_builds(log_text: str) -> list[str]:
    """The distributions pip was building when a native build failed, last first (the one that
    failed is the last one pip started)."""
    matches = list(_BUILDING.finditer(log_text or ""))
    names = []
    for i, m in enumerate(matches):
        # the output between this distribution's line and the next one is its own
        end = matches[i + 1].start() if i + 1 < len(matches) else len(log_text)
        if re.search(r"error", log_text[m.end(): end], re.I):
            names.append(m.group(1))
    return list(dict.fromkeys(reversed(names)))[:3]


_UNITTEST_RAN = re.compile(r"^Ran ([1-9]\d*) tests? in [\d.]+s\s*$\s*(?:^\s*$\s*)*^(?:FAILED \(|OK\b)", re.M)


def unittest_ran(output: str) -> bool:
    """unittest's (and Django's test runner's) summary: tests ran and some failed. With no JUnit
    file, exit 1 after "Ran N tests ... FAILED (...)" is the repository's own failures, not a
    setup failure (a runner that could not start prints no such summary)."""
    return bool(_UNITTEST_RAN.search(output or ""))


def absent_submodules(repo: Path, output: str) -> list[tuple[str, str]]:
    """(path, url) of the git submodules in ``.gitmodules`` that are empty or missing in the
    checkout and that ``output`` mentions (``/workspace/<path>/...`` or ``<path>/...``)."""
    from bot import safefs

    text = safefs.try_read_text(repo, ".gitmodules", max_bytes=256 * 1024)
    if text is None:
        return []
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    out = []
    for section in parser.sections():
        path = parser.get(section, "path", fallback="").strip().strip("/")
        url = parser.get(section, "url", fallback="").strip()
        if not path or ".." in Path(path).parts:
            continue
        where = Path(repo) / path
        if not safefs.inside(repo, where):
            continue
        try:
            empty = not where.is_dir() or not any(where.iterdir())
        except OSError:
            continue
        if empty and re.search(rf"(?:^|[\s/'\"]){re.escape(path)}/", output, re.M):
            out.append((path, url))
    return out


def _is_pytest(cmd: Sequence[str]) -> bool:
    return any(part == "pytest" or part.endswith("/pytest") or part == "py.test" for part in cmd)


def _excerpt(log_text: str, sig: Signature | None) -> str:
    """The part of the log a retriever should see: around the signature's line, and the tail."""
    if not log_text:
        return ""
    if sig is not None and sig.message and sig.message in log_text:
        i = log_text.index(sig.message)
        around = log_text[max(0, i - 4000): i + 4000]
        return around[-LOG_FOR_RETRIEVAL:]
    return log_text[-LOG_FOR_RETRIEVAL:]


def _last_lines(text: str, n: int) -> str:
    return "\n".join((text or "").strip().splitlines()[-n:])


def _plan_json(plan: Any, graph: Any) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for attr in ("python", "base_image", "collect_command", "test_command", "env"):
        value = getattr(plan, attr, None)
        if value is not None:
            data[attr] = list(value) if isinstance(value, tuple) else value
    data["services"] = [getattr(s, "name", str(s)) for s in getattr(plan, "services", []) or []]
    try:
        data["graph"] = graph.to_json()
    except (AttributeError, TypeError):
        pass
    return data


def run_setup(repo: Path, settings: Any, engine: Any, store: Any = None, llm: Any = None, **kw: Any) -> RunRecord:
    """Plan, build, repair and replay until the target passes in a clean replay or a budget ends.
    See the module docstring. Keyword arguments are SetupLoop's collaborators (for tests)."""
    return SetupLoop(Path(repo), settings, engine, store, llm, **kw).run()
