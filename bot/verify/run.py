"""One verification of a built image: the tests without and with the sibling services and
repositories, the prosecutor and the judge in fresh containers of their own, the optional
mutation check, the verdict, and the record.

It takes the built image, what the plan says (services, CI env, test command) and the
repository; it shares nothing with the loop that built the image."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.junit import JUNIT_PATH, TestResults, junit_env, parse_junit, parse_unittest, runs_pytest, verbose_argv
from bot.services import (
    ServiceManager,
    ServiceSpec,
    ServicesStarted,
    forward_targets,
    start_localhost_forwarding,
)
from bot.verify.facts import RepoFacts
from bot.verify.judge import Ruling, judge
from bot.verify.mutation import mutation_check
from bot.verify.prosecutor import Executor, Prosecution, prosecute, run, tail
from bot.verify.record import VerificationRecord
from bot.verify.results import attribute
from bot.verify.siblings import SiblingManager, SiblingSpec
from bot.verify.verdict import decide

log = logging.getLogger(__name__)


def run_tests(
    executor: Executor, command: Sequence[str], timeout: int = 1200, env: Mapping[str, str] | None = None
) -> TestResults:
    """Run the tests with a JUnit report and read it back; a unittest run is made verbose and
    its per-test lines are read instead (as is any runner's that prints them, Django's
    ``-v 2``). ``env``: the container's variables, which a wrapper's PYTEST_ADDOPTS extends."""
    run(executor, ["rm", "-f", JUNIT_PATH], timeout=30)
    argv = verification_argv(command)
    res = executor.exec(argv, env=junit_env(argv, env or {}) or None, timeout=timeout)
    report = run(executor, ["cat", JUNIT_PATH], timeout=60)
    return read_results(
        str(getattr(res, "output", "")),
        report.output if report.exit_code == 0 else None,
        getattr(res, "exit_code", None),
        bool(getattr(res, "timed_out", False)),
    )


def read_results(output: str, junit_xml: str | None, exit_code: int | None, timed_out: bool) -> TestResults:
    """One test run's results: its JUnit report when it wrote one, else the per-test lines of
    its output (unittest, Django's ``-v 2``)."""
    results = parse_junit(junit_xml) if junit_xml is not None else TestResults(junit_found=False)
    if not results.junit_found:
        from_text = parse_unittest(output)
        results = from_text if from_text.junit_found else results
    results.exit_code = exit_code
    results.timed_out = timed_out
    results.output_tail = tail(output, 60, 6000)
    return results


def same_test_run(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether two test commands run the same tests: equal but for where the JUnit report goes
    and pytest's cache plugin (``-p no:cacheprovider``), which change no outcome."""

    def bare(argv: Sequence[str]) -> list[str]:
        out: list[str] = []
        skip = False
        for i, arg in enumerate(argv):
            if skip:
                skip = False
                continue
            if arg.startswith("--junitxml"):
                skip = arg == "--junitxml"
                continue
            if arg == "-p" and i + 1 < len(argv) and argv[i + 1] == "no:cacheprovider":
                skip = True
                continue
            out.append(arg)
        return out

    return bare(a) == bare(b)


def verification_argv(command: Sequence[str]) -> list[str]:
    """The command a verification's test run executes for ``command``."""
    argv = list(command)
    if runs_pytest(argv):
        return argv + [f"--junitxml={JUNIT_PATH}", "-p", "no:cacheprovider"]
    return verbose_argv(argv)


class _Session:
    """A fresh container of the image for one role (tests, prosecutor, judge, mutation)."""

    def __init__(
        self,
        engine: Any,
        image: str,
        env: Mapping[str, str],
        network: str | None,
        role: str,
        repo: Path | None,
        workdir: str,
        forwards: Sequence[str] = (),
        python: str = "python",
    ) -> None:
        self._cm = engine.session(image, env=dict(env), workdir=workdir, network=network, name_hint=role)
        self.repo, self.workdir, self.forwards, self.python = repo, workdir, list(forwards), python

    def __enter__(self) -> Any:
        session = self._cm.__enter__()
        if self.repo is not None:
            session.copy_in(self.repo, self.workdir)
        if self.forwards and not start_localhost_forwarding(session, self.forwards, self.python):
            log.warning("localhost forwarding did not start in %s", getattr(session, "name", "the runner"))
        return session

    def __exit__(self, *exc: Any) -> Any:
        return self._cm.__exit__(*exc)


@dataclass
class _Runner:
    """Opens the fresh role containers of one verification on its network and runs the tests
    in them; ``forwards`` fills in once the services are up."""

    engine: Any
    image: str
    net: Any
    command: list[str]
    timeout: int
    copy: Path | None
    workdir: str
    python: str
    forwards: list[str] = field(default_factory=list)

    def session(self, env: Mapping[str, str], role: str) -> _Session:
        forwards = self.forwards if role != "verify-without" else ()
        return _Session(self.engine, self.image, env, self.net, role, self.copy, self.workdir, forwards, self.python)

    def tests(self, env: Mapping[str, str], role: str) -> TestResults:
        with self.session(env, role) as s:
            return run_tests(s, self.command, self.timeout, env)


def verify_environment(
    engine: Any,
    repo: Path,
    image: str,
    *,
    services: Iterable[Any] = (),
    ci_env: Mapping[str, str] | None = None,
    siblings: Iterable[SiblingSpec] = (),
    test_command: Sequence[str] | None = None,
    python: str = "python",
    mutation: bool = False,
    attribute_each: bool = True,
    test_timeout: int = 1200,
    copy_repo: bool = False,
    workdir: str = "/workspace",
    checks: Iterable[str] = ("imports", "entry_points", "pip", "tests"),
    forward_localhost: bool = True,
    warnings: Iterable[str] = (),
    replayed: TestResults | None = None,
    replayed_from: str = "",
) -> VerificationRecord:
    """``replayed``: the results of a run of the same test command with the same variables in a
    fresh container of ``image`` (the loop's clean replay, ``replayed_from`` says so). With no
    service and no sibling to start, that run is the one the prosecutor and the judge examine,
    and the suite does not run a second time."""
    started = time.monotonic()
    repo = Path(repo)
    record, facts = _begin_record(image, repo, warnings)
    specs = [ServiceSpec.from_any(s) for s in services]
    sibling_specs = list(siblings)
    command = list(test_command or [python, "-m", "pytest"])
    base_env = dict(ci_env or {})
    copy = repo if copy_repo else None

    with engine.network() as net:
        runner = _Runner(engine, image, net, command, test_timeout, copy, workdir, python)
        without: TestResults | None = None
        if specs or sibling_specs:
            without = runner.tests(base_env, "verify-without")
            record.tests_without_siblings = without.to_json()

        with ServiceManager(engine, net) as service_manager, SiblingManager(engine, net, repo) as sibling_manager:
            started_services = service_manager.start(specs, ci_env=base_env)
            sibling_outcomes, sibling_env = sibling_manager.start(sibling_specs)
            env = _wire(
                record, runner, started_services, sibling_outcomes, sibling_env, specs, base_env, forward_localhost
            )

            if replayed is not None and not specs and not sibling_specs:
                with_ = replayed
                record.tests_from = replayed_from
            else:
                with_ = runner.tests(env, "verify-with")
            record.tests_with_siblings = with_.to_json()
            prosecution, rulings, mutation_result = _examine(
                runner, env, record, facts, with_, repo=repo, checks=checks, mutation=mutation
            )

            # Which tests needed which sibling: take them away one at a time (a test that needs
            # several is counted for the first one removed).
            healthy = started_services.healthy_names + [o.name for o in sibling_outcomes if o.healthy]
            if without is not None and healthy:
                removal_runs: dict[str, TestResults] = {}
                if attribute_each and len(healthy) > 1:
                    removal_runs = _removal_runs(runner, env, with_, healthy, service_manager, sibling_manager)
                record.attribution = attribute(without, with_, removal_runs, healthy).to_json()

    record.verdict = decide(prosecution.charges, rulings, with_, mutation_result).to_json()
    record.seconds = round(time.monotonic() - started, 2)
    return record


def _begin_record(image: str, repo: Path, warnings: Iterable[str]) -> tuple[VerificationRecord, RepoFacts]:
    """A new record holding the repository's facts (and their warnings after the given ones)."""
    record = VerificationRecord(image=image, repo=str(repo), warnings=list(warnings))
    facts = RepoFacts.from_repo(repo)
    record.facts = facts.to_json()
    record.warnings += facts.warnings
    return record, facts


def _wire(
    record: VerificationRecord,
    runner: _Runner,
    started_services: ServicesStarted,
    sibling_outcomes: Sequence[Any],
    sibling_env: Mapping[str, str],
    specs: Sequence[ServiceSpec],
    base_env: Mapping[str, str],
    forward_localhost: bool,
) -> dict[str, str]:
    """The environment the tests get with the services and siblings up. Records the started
    services and siblings (with their notes as warnings), the localhost ports the later test
    containers forward to them when asked, and which variables the wiring set or changed."""
    service_outcomes = started_services.outcomes
    record.services = [o.to_json() for o in service_outcomes]
    record.siblings = [o.to_json() for o in sibling_outcomes]
    for o in service_outcomes:
        if o.note:
            record.warnings.append(f"service {o.name}: {o.note}")
    for so in sibling_outcomes:
        if so.note:
            record.warnings.append(f"sibling {so.name}: {so.note}")
    env = {**base_env, **started_services.env, **sibling_env}
    if forward_localhost:
        # tests that hard-code localhost:5432 reach the sibling too (CI maps the ports)
        runner.forwards[:] = forward_targets(service_outcomes, specs)
        record.checks["localhost_forwards"] = list(runner.forwards)
    record.wired_env = sorted(set(env) - set(base_env) | {k for k in base_env if env[k] != base_env[k]})
    return env


def _examine(
    runner: _Runner,
    env: Mapping[str, str],
    record: VerificationRecord,
    facts: RepoFacts,
    with_: TestResults,
    *,
    repo: Path,
    checks: Iterable[str],
    mutation: bool,
) -> tuple[Prosecution, list[Ruling], dict[str, Any] | None]:
    """The prosecutor, the judge and (when asked) the mutation check, each in a fresh container;
    returns (prosecution, rulings, mutation result) and records them."""
    python = runner.python
    with runner.session(env, "prosecutor") as s:
        prosecution = prosecute(s, facts, with_, python=python, checks=checks)
    record.checks.update(prosecution.checks)
    record.charges = [c.to_json() for c in prosecution.charges]

    with runner.session(env, "judge") as s:
        rulings = judge(s, facts, prosecution.charges, python=python, repo=repo, test_command=runner.command)
    record.rulings = [r.to_json() for r in rulings]

    mutation_result: dict[str, Any] | None = None
    if mutation:
        if facts.own_modules:
            with runner.session(env, "mutation") as s:
                mutation_result = mutation_check(
                    s,
                    facts.own_modules[0],
                    with_,
                    lambda ex: run_tests(ex, runner.command, runner.timeout, env),
                    python,
                )
        else:
            mutation_result = {"ran": False, "note": "no own top-level module found"}
        record.mutation = mutation_result
    return prosecution, rulings, mutation_result


def _removal_runs(
    runner: _Runner,
    env: Mapping[str, str],
    with_: TestResults,
    healthy: Sequence[str],
    service_manager: ServiceManager,
    sibling_manager: SiblingManager,
) -> dict[str, TestResults]:
    """Remove the healthy services and siblings one at a time, running the tests after each
    removal; for each name, which tests it took down."""
    removal_runs: dict[str, TestResults] = {}
    previous = with_
    for name in healthy:
        if name in service_manager.handles_by_name:
            service_manager.remove(name)
        else:
            sibling_manager.remove(name)
        current = runner.tests(env, f"verify-minus-{name}")
        # a test counts for ``name`` if it passed before this removal only
        removal_runs[name] = TestResults(
            outcomes={
                t: ("failed" if previous.outcomes.get(t) == "passed" and o != "passed" else "passed")
                for t, o in current.outcomes.items()
            }
        )
        previous = current
    return removal_runs
