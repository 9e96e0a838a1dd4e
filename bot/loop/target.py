"""What a target evaluation says: the outcome of collecting and running the tests, how two
outcomes compare, and how the loop runs the target in a workspace (``TargetMixin``)."""

from __future__ import annotations

import configparser
import re
import shlex
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot import safefs
from bot.junit import JUNIT_PATH, TestResults, junit_env, parse_junit, parse_unittest, runs_pytest, verbose_argv
from bot.loop.diagnose import Signature, collection_signatures, diagnose, setup_failures
from bot.loop.repair import Candidate
from bot.loop.state import LoopBase

if TYPE_CHECKING:
    from bot.loop.workspace import Workspace

STAGE_RANK = {"build": 0, "start": 1, "collect": 2, "test": 3, "done": 4}


@dataclass
class TargetOutcome:
    stage: str  # the stage the run got to (see STAGE_RANK)
    signatures: list[Signature] = field(default_factory=list)
    log: str = ""  # the output that was diagnosed
    collect_exit: int | None = None
    test_exit: int | None = None
    results: TestResults = field(default_factory=TestResults)
    note: str = ""
    junit: bool = False  # results were read from a JUnit file (counts are exact)
    junit_xml: str | None = None  # the JUnit report itself (the verification reads it again)
    timed_out: bool = False  # the test run was cut at its timeout
    command: list[str] = field(default_factory=list)  # the test command as it ran

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
        return {
            "stage": self.stage,
            "collect_exit": self.collect_exit,
            "test_exit": self.test_exit,
            "signatures": [s.to_json() for s in self.signatures],
            "tests": outcome_counts(self),
            "note": self.note,
        }


_UNITTEST_COUNT = re.compile(r"^Ran (\d+) tests? in [\d.]+s\s*$", re.M)
# unittest's closing line: "OK (skipped=3)", "FAILED (failures=2, errors=1, skipped=3)"
_UNITTEST_CLOSING = re.compile(r"^(?:OK|FAILED) \((.*)\)\s*$", re.M)
_UNITTEST_KIND = re.compile(r"\b(expected failures|unexpected successes|failures|errors|skipped)=(\d+)")
_PYTEST_SUMMARY = re.compile(
    r"^=+ (.*?\b(?:passed|failed|skipped|error|errors|deselected|no tests ran)\b.*?) in [\d.]+s", re.M
)
_PYTEST_KIND = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)\b")
# each kind of a runner's summary as the run record files it, the way JUnit reports them: an
# expected failure is skipped, an unexpected success passed under pytest and failed under
# unittest (which says the run FAILED for it)
_UNITTEST_AS = {
    "failures": "failed",
    "errors": "error",
    "skipped": "skipped",
    "expected failures": "skipped",
    "unexpected successes": "failed",
}
_PYTEST_AS = {"xfailed": "skipped", "xpassed": "passed", "errors": "error"}
NO_TESTS_KINDS = frozenset({"no_tests_collected", "path_not_found"})


def summary_counts(text: str) -> dict[str, int] | None:
    """Tests per outcome (passed, failed, error, skipped) from the runner's own summary, for a
    run that names no test: unittest's or Django's "Ran 175 tests" and "FAILED (failures=46)"
    (a repository's runtests.py), else pytest's terminal summary (pytest run by tox, nox or
    make: "46 failed, 129 passed"). None when the output has neither."""
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    ran = [int(n) for n in _UNITTEST_COUNT.findall(text)]
    if ran:
        for line in _UNITTEST_CLOSING.findall(text):
            for kind, n in _UNITTEST_KIND.findall(line):
                counts[_UNITTEST_AS[kind]] += int(n)
        counts["passed"] = max(0, sum(ran) - counts["failed"] - counts["error"] - counts["skipped"])
        return counts
    summaries = _PYTEST_SUMMARY.findall(text)
    if not summaries:
        return None
    for line in summaries:
        for n, kind in _PYTEST_KIND.findall(line):
            counts[_PYTEST_AS.get(kind, kind)] += int(n)
    return counts


def ran_count(outcome: TargetOutcome) -> int | None:
    """How many tests ran (skipped ones do not count), or None when the runner's output gives
    no count: the per-test results (JUnit), else the runner's summary (``summary_counts``)."""
    if outcome.junit or outcome.results.total:
        return outcome.results.total - outcome.results.count("skipped")
    counts = summary_counts(outcome.log or "")
    if counts is not None:
        return counts["passed"] + counts["failed"] + counts["error"]
    if outcome.signatures and any(s.kind == "no_tests_collected" for s in outcome.signatures):
        return 0
    return None


def passed_count(outcome: TargetOutcome) -> int:
    """How many tests passed: the per-test results (JUnit, unittest's verbose lines), else the
    runner's summary (``summary_counts``)."""
    if outcome.junit or outcome.results.total:
        return outcome.results.count("passed")
    counts = summary_counts(outcome.log or "")
    return counts["passed"] if counts is not None else 0


def outcome_counts(outcome: TargetOutcome) -> dict[str, int]:
    """Tests per outcome and the total, in the run record's form (``TestResults.counts``): the
    per-test results where there are some, else the runner's summary (``summary_counts``). A run
    with neither has no count."""
    if outcome.junit or outcome.results.total:
        return outcome.results.counts()
    counts = summary_counts(outcome.log or "") or {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    return counts | {"total": sum(counts.values())}


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


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
    if passed_count(after) < passed_count(before):
        return "worse"
    new = [s for s in after.setup_failures if s.ident not in before.idents()]
    # the fix itself failed to install (apt has no such package): never progress, even though
    # the build now stops before the step that showed the targeted failure
    if any(s.kind == "unknown_apt_package" for s in new):
        return "worse"
    if target is not None and target.kind == "assertion_drift":
        # the era set tried for failing assertions is kept only when it helps: more tests pass and
        # fewer fail, and no setup failure comes with it
        b, a = before.results, after.results
        if new:
            return "worse"
        return "improved" if a.passed > b.passed and a.failed < b.failed else "unchanged"
    if target is not None:
        if any(s.key and s.key == target.key and s.ident != target.ident for s in new):
            return "worse"
        if target.ident in after.idents():
            if new:
                return "worse"
            # it fixed another of the failures the run had (a unit retrieved for the targeted
            # failure's excerpt that installs the module missing beside it): progress all the same;
            # the trial's caller attributes the repair to the failure that went (``fixed``)
            return "improved" if before.idents() - after.idents() else "unchanged"
        return "improved"
    # no target (an LLM action): better when the run got further or has fewer setup failures
    if STAGE_RANK[after.stage] > STAGE_RANK[before.stage] or after.passed:
        return "improved"
    if len(after.setup_failures) < len(before.setup_failures) and not new:
        return "improved"
    return "worse" if new else "unchanged"


def fixed(before: TargetOutcome, after: TargetOutcome, target: Signature | None) -> Signature | None:
    """The failure a kept trial fixed: ``target`` when it went, else the first of the run's other
    setup failures that went (see ``compare``)."""
    if target is None or target.ident not in after.idents():
        return target
    gone = [s for s in before.setup_failures if s.ident not in after.idents()]
    return gone[0] if gone else target


_UNITTEST_RAN = re.compile(r"^Ran ([1-9]\d*) tests? in [\d.]+s\s*$\s*(?:^\s*$\s*)*^(?:FAILED \(|OK\b)", re.M)


def unittest_ran(output: str) -> bool:
    """unittest's (and Django's test runner's) summary: tests ran and some failed. With no JUnit
    file, exit 1 after "Ran N tests ... FAILED (...)" is the repository's own failures, not a
    setup failure (a runner that could not start prints no such summary)."""
    return bool(_UNITTEST_RAN.search(output or ""))


# pytest's last line when its collection stopped it: "!!! Interrupted: 2 errors during collection !!!"
_COLLECTION_STOPPED = re.compile(r"^!+ Interrupted: \d+ errors? during collection !+$", re.M)


def collection_stopped(exit_code: int, results: TestResults, output: str, junit_xml: str | None = None) -> bool:
    """Whether a pytest run did not get through its collection: its JUnit report holds a
    collection failure, its last line says the collection stopped it, or it ended with an exit
    code that says it ran no test (2 interrupted, 3 internal error, 4 usage error, 5 no tests)
    and no test passed, failed or was skipped. What a collect-only run would then say is in its
    output already. The words alone, anywhere in the output, are not enough: a repository that
    tests pytest plugins prints inner sessions' output."""
    if junit_xml and 'message="collection failure"' in junit_xml:
        return True
    if _COLLECTION_STOPPED.search(output):
        return True
    ran = sum(results.count(s) for s in ("passed", "failed", "skipped"))
    return exit_code in (2, 3, 4, 5) and not ran


def absent_submodules(repo: Path, output: str) -> list[tuple[str, str]]:
    """(path, url) of the git submodules in ``.gitmodules`` that are empty or missing in the
    checkout and that ``output`` mentions (``/workspace/<path>/...`` or ``<path>/...``)."""
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


class TargetMixin(LoopBase):
    """Runs the target (collection, then the tests) in a workspace."""

    def _collect_command(self) -> list[str] | None:
        if not self.settings.target.collect_only:
            return None
        repaired = self.plan.repaired_test_command
        if repaired:
            if "pytest" in " ".join(repaired):
                return [*repaired, "--collect-only", "-q"]
            return None
        cmd = self.plan.collect_command
        return list(cmd) if cmd else None

    def _test_command(self) -> list[str]:
        repaired = self.plan.repaired_test_command
        if repaired:
            cmd = repaired
        elif self.settings.target.test_command:
            cmd = list(self.settings.target.test_command)
        else:
            cmd = list(self.plan.test_command or ["python", "-m", "pytest"])
        if runs_pytest(cmd) and not any(a.startswith("--junitxml") for a in cmd):
            cmd = [*cmd, f"--junitxml={JUNIT_PATH}"]
        else:
            cmd = verbose_argv(cmd)  # unittest and Django: one line per test, read as JUnit is
        return cmd

    def evaluate(self, ws: Workspace, env: Mapping[str, str] | None = None) -> TargetOutcome:
        """Run the target in the workspace: collection first, then the tests with JUnit XML.
        Every test command tried is noted with what it found, for a report that has to say
        why no test ran."""
        t0 = self.budget.now()
        outcome = self._evaluate(ws, env)
        spent = self.budget.now() - t0
        self.budget.measured(target=spent)
        # where the run's time goes (the bench's stage table): every run of the target
        timings = self.record.timings
        timings["test_seconds"] = round(timings.get("test_seconds", 0.0) + spent, 3)
        cmd = shlex.join(a for a in self._test_command() if not a.startswith("--junitxml"))
        n = ran_count(outcome)
        if n is not None:
            found = f"{n} test(s) ran"
        elif outcome.stage == "build":
            found = "the environment did not start"
        else:
            found = f"stopped at {outcome.stage}" + (
                f" ({outcome.setup_failures[0].describe()})" if outcome.setup_failures else ""
            )
        self.tests_tried[cmd] = found
        return outcome

    def _evaluate(self, ws: Workspace, env: Mapping[str, str] | None = None) -> TargetOutcome:
        env = dict(ws.target_env if env is None else env)
        if ws.forwards:
            self._ensure_forwarding(ws)
        collect = self._collect_command()
        cmd = self._test_command()
        wrapper = junit_env(cmd, env)
        # pytest collects before it runs a test and stops at a collection error, so its own run
        # says what a collect-only run would: that run goes first only for what says less
        collect_after = bool(collect) and runs_pytest(cmd) and runs_pytest(collect or []) and not wrapper
        if collect and not collect_after:
            r = self._exec(ws, collect, "collect", env)
            if r.exit_code != 0:
                return self._collection_failed(r)
        if wrapper:
            # a wrapper that may run pytest inside: no report from an earlier run may stand in
            ws.session.exec(["rm", "-f", JUNIT_PATH], timeout=30, changes=False)
        r = self._exec(ws, cmd, "test", {**env, **wrapper})
        results = TestResults()
        junit = False
        junit_xml: str | None = None
        if runs_pytest(cmd) or wrapper:
            xml = ws.session.exec(["cat", JUNIT_PATH], timeout=60, changes=False)
            if xml.exit_code == 0:
                junit_xml = xml.output
                results = parse_junit(xml.output, tracebacks=True)
                junit = bool(xml.output.strip())
        if not junit and not runs_pytest(cmd):
            # unittest's verbose lines (and Django's -v 2): per-test results without JUnit
            from_text = parse_unittest(r.output, tracebacks=True)
            if from_text.junit_found:
                results, junit, junit_xml = from_text, True, None
        ran_tests = bool(results.total) or unittest_ran(r.output)
        if collect and collect_after:
            if collection_stopped(r.exit_code, results, r.output, junit_xml) and not r.timed_out:
                return self._collection_failed(r)
            if r.timed_out or r.exit_code > 1 or not ran_tests:
                # stopped, or nothing ran: whether the tests collect decides what that says
                c = self._exec(ws, collect, "collect", env)
                if c.exit_code != 0:
                    return self._collection_failed(c)
        sigs = diagnose(r.output + "\n" + results.failure_text())
        collect_exit = 0 if collect is not None or r.exit_code in (0, 1) else r.exit_code
        if r.exit_code == 5 and not any(s.kind == "no_tests_collected" for s in sigs):
            sigs.append(Signature("no_tests_collected", "verification", "", "pytest exit code 5"))
        stage = "done" if (r.exit_code == 0 or (r.exit_code == 1 and ran_tests)) and not r.timed_out else "test"
        note = "the test run timed out" if r.timed_out else ""
        # a long suite that timed out, or a runner killed by a signal (137: SIGKILL, as the
        # container's memory limit does), after collection proved the environment and with
        # nothing in the output so far a setup failure: no install changes that, so the run
        # counts as ran and the report says what stopped it
        if r.timed_out:
            stopped = f"timed out after {int(r.duration)} s"
        elif r.exit_code > 128:
            stopped = f"was killed by {_signal_name(r.exit_code - 128)} (exit {r.exit_code}" + (
                "; a memory limit does that)" if r.exit_code == 137 else ")"
            )
        else:
            stopped = ""
        if stopped and collect is not None and not setup_failures(sigs):
            stage = "done"
            note = (
                f"the test run {stopped}; collection passed and the output so far shows no setup failure, "
                "so the outcomes of the unfinished tests are unknown"
            )
        return TargetOutcome(
            stage,
            sigs,
            log=r.output,
            collect_exit=collect_exit,
            test_exit=r.exit_code,
            results=results,
            note=note,
            junit=junit,
            junit_xml=junit_xml,
            timed_out=bool(r.timed_out),
            command=list(cmd),
        )

    def _collection_failed(self, r: Any) -> TargetOutcome:
        """What a failed collection says; a git submodule that is not checked out is said as such
        (no package brings a missing checkout back, so no repair is tried for it)."""
        sigs = collection_signatures(r.output)
        absent = absent_submodules(self.repo, r.output)
        if absent:
            sigs = [
                Signature(
                    "missing_submodule",
                    "configuration",
                    path,
                    f"git submodule {path} ({url}) is not checked out; the tests read from it. "
                    "Check out with submodules (the reusable workflow's `submodules: recursive` input, "
                    "or `git submodule update --init --recursive`).",
                )
                for path, url in absent
            ] + [s for s in sigs if s.kind != "collection_error"]
        if r.exit_code == 5 and not any(s.kind == "no_tests_collected" for s in sigs):
            sigs.append(Signature("no_tests_collected", "verification", "", "pytest exit code 5"))
        note = "test collection timed out" if r.timed_out else ""
        return TargetOutcome("collect", sigs, log=r.output, collect_exit=r.exit_code, note=note)
