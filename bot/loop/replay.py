"""The end of a run: the clean replay, the lock, the run's status, and what the record says
remains."""

from __future__ import annotations

import logging
import time
from typing import Any

from packaging.version import Version

from bot import progress, safefs
from bot.compile.dockerfile import builds_same_image
from bot.engine.recipes import SUITE_PYTHON
from bot.errors import EngineError, SetupbotError
from bot.graph.model import DepGraph
from bot.graph.resolve import wheel_less
from bot.graph.specs import constraint_specs, install_specs
from bot.indexes import host_index_config
from bot.knowledge import learn_unit
from bot.logtext import strip_ansi
from bot.loop.devstage import build_dev_stage, dev_packages, dev_part, has_dev_stage, on_image
from bot.loop.diagnose import Signature
from bot.loop.inimage import cache_key, load_cached, resolve_in_image, store
from bot.loop.lock import (
    WHEEL_LESS_REFUSAL,
    ContainerReader,
    LockFile,
    LockOutcome,
    PendingLock,
    complete_resolution,
    draft_before_replay,
    draft_from_plan,
    failed_in_lock_install,
    lock_environment,
    plan_lock_refusal,
    proven_by_build,
    proven_by_replay,
    proven_plan_lock,
)
from bot.loop.records import KeptRepair, ReplayRun, member_results
from bot.loop.repair import find_test_dirs, next_python
from bot.loop.state import LoopBase
from bot.loop.target import STAGE_RANK, TargetOutcome, finds_no_tests, outcome_counts, passed_count, ran_count
from bot.loop.workspace import Workspace


def _last_lines(text: str, n: int) -> str:
    """The last ``n`` non-blank lines, without terminal colour codes."""
    return "\n".join([ln for ln in strip_ansi(text or "").splitlines() if ln.strip()][-n:])


log = logging.getLogger(__name__)

# repair atoms that change only what pip installs, the test command or the variables: a
# container with these alone has the image's system libraries (``_python_only_in_container``)
PYTHON_ONLY_ATOMS = frozenset({"pip_install", "pip_constraint", "set_env", "test_command"})
# a locked replay at most this many tests (or 2 %) short of the working image runs its tests once
# more before the lock is withdrawn (``_passes_on_rerun``)
RERUN_SHORTFALL = 2


class ReplayMixin(LoopBase):
    """Clean replay and the run's status."""

    def _finish(self, over_budget: str = "", working: Workspace | None = None) -> Workspace | None:
        """Clean replay of the current state and the run's status from it. Returns the replay's
        workspace when the loop should keep working in it (a replay failure with budget left),
        else None (the run is over). ``working`` is the loop's workspace that reached this
        state: its image may be frozen into a lock that the replay builds (``_lock_first``)."""
        rec = self.record
        if over_budget and not self.budget.can_replay():
            rec.status = "over_budget"
            rec.remaining = f"{over_budget}; no time left for the clean replay ({self.budget.left:.0f}s left)"
            return None
        # what an earlier replay found of its lock does not speak for this one
        self._prelock, self._prelocked, self._prelock_refused = None, None, ""
        first = working is not None and not over_budget and self._was_clean_replay(working)
        # or the repairs since changed no layer: a fresh container on that image is the replay
        same = working is not None and not over_budget and not first and self._same_first_image(working)
        try:
            pending = self._lock_first(working) if working is not None and not over_budget else None
        finally:
            if working is not None:
                working.close()  # the lock is drafted: its runner and services make way for the replay
        try:
            if first and working is not None and self._planlock is not None:
                # the first image installed the lock resolved from the plan and passed: it was the
                # clean replay, and the lock holds when the image installed exactly its set
                proof = "the run's first image, built with no step from the cache,"
                if self._prove_plan_lock(working.tag, proof):
                    replay_ws = self._first_build_replay(working)
                else:
                    replay_ws = self.replay()
            elif (first or same) and working is not None and (pending is None or self._needs_no_test(pending)):
                # the first image was the clean replay; a lock drafted from it changes pins alone,
                # and a build that installs the same set proves it (bot.loop.lock.proven_by_build).
                # With no lock drafted (the repository's own lock, the plan's lock, which the fresh
                # container's image installed) the lock is proven after this replay as after any.
                replay_ws = self._first_image_replay(working, first)
                if pending is not None and (first or self._ran(replay_ws.outcome)):
                    self._prove_lock_by_build(pending, working)
                elif pending is not None:
                    self._withdraw_prelock()  # the fresh container did not pass: no lock from it
            else:
                replay_ws = self.replay()
                if pending is not None and working is not None:
                    replay_ws = self._hold_locked_replay(pending, replay_ws, working)
        except BaseException:
            # an engine failure or an interruption: a lock not proven goes back, file and graph
            self._withdraw_prelock()
            raise
        outcome = replay_ws.outcome
        disproved = self._disproved_by_counts(outcome)
        if disproved is not None and disproved.checkpoint is not None and self.budget.can_replay():
            self._withdraw_prelock()
            # the clean build does not reproduce what the working container showed: without
            # the repair, the state before it is what the repository had, so replay that
            self._drop_disproved(replay_ws, disproved)
            replay_ws.close()
            return self._finish(over_budget)
        rec.members = member_results(self.graph, outcome.results)
        if self._ran(outcome) or finds_no_tests(outcome):
            if finds_no_tests(outcome) or ran_count(outcome) == 0:
                # a replay that ran no test (or only skipped ones) proves no environment
                rec.status = "no_tests"
                rec.tests = outcome.results
                rec.remaining = self._no_tests_reason(outcome)
                rec.unresolved = [{"kind": "no_tests", "category": "verification", "key": "", "message": rec.remaining}]
            else:
                rec.status = "success"
                rec.tests = outcome.results
                rec.replay_run = ReplayRun(
                    replay_ws.tag,
                    outcome.command,
                    {**replay_ws.env, **replay_ws.target_env},
                    outcome.log,
                    outcome.junit_xml,
                    outcome.test_exit,
                    outcome.timed_out,
                )
                if outcome.setup_failures:
                    rec.unresolved = [s.to_json() for s in outcome.setup_failures]
                    rec.remaining = self._what_remains(outcome)
            if over_budget:
                rec.remaining = over_budget + (f"; {rec.remaining}" if rec.remaining else "")
            replay_ws.close()
            if rec.status != "success":
                self._withdraw_prelock()
            elif self._prelocked is not None:
                self._record_lock(self._prelocked)
            elif self._prelock_refused:
                rec.replay["lock"] = {"status": "failed", "reason": self._prelock_refused}
                rec.warnings.append(f"environment not locked: {self._prelock_refused}")
            elif self._planlock is not None and self._prove_plan_lock(rec.replay["tag"], "the clean replay"):
                assert self._prelocked is not None
                self._record_lock(self._prelocked)
            elif self.budget.can_replay():
                self.lock_replay()
            else:  # locking is one more build: it never takes the run past its budget
                rec.warnings.append(
                    "environment not locked: too little of the budget left for the build that proves the lock"
                )
            if rec.status == "success":
                self._settle_dev_stage()
            return None
        if over_budget or self.budget.exhausted():
            replay_ws.close()
            rec.status = "over_budget"
            rec.remaining = (
                over_budget or self.budget.exhausted()
            ) + f"; the clean replay failed: {self._what_remains(outcome)}"
            return None
        self._reoffer_unreproduced(outcome)
        return replay_ws

    def _settle_dev_stage(self) -> None:
        """The development stage (git, the user) on top of the proven tested stage: the build
        started beside the first image's tests when the stage and the base image are still
        the same, else one built now on the final image's layers. Its Debian packages are then
        pinned to the versions it installed, as the tested stage's are to the replay's."""
        rec = self.record
        text = self.compile(self.graph).text
        if not has_dev_stage(text) or not hasattr(self.engine, "run_once"):
            return
        running, self._dev_build = self._dev_build, None
        packages = dev_packages(self.graph)
        if running is not None and dev_part(running.text) == dev_part(text):
            out = running.result(timeout=max(1.0, self.budget.left))
            if out is not None:
                out.on = running.on
        else:
            tag = f"setupbot-loop-{rec.run_id}:dev-final"
            tested = str(rec.replay.get("tag") or "")
            exists = getattr(self.engine, "image_exists", None)
            if tested and exists is not None and exists(tested):
                # the final tested image is built: the stage goes on it as it is, instead of
                # a build of the whole Dockerfile whose tested layers may not be in the cache
                # (a --no-cache replay, a builder stage)
                text = on_image(text, tested)
            out = build_dev_stage(self.engine, self.repo, text, tag, packages, timeout=self._build_timeout())
            out.on = "the final tested image"
        if out is None:
            rec.warnings.append("the development stage (git, the user) did not finish building within the budget")
            return
        rec.replay["dev_stage"] = out.to_json()
        rec.timings["dev_stage_seconds"] = round(out.seconds, 3)
        self.traj.record("dev-stage", outcome="ok" if out.ok else "failed", duration=out.seconds, detail=out.to_json())
        if not out.ok:
            rec.warnings.append(
                "the development stage (git and the user on top of the tested environment) did not build: "
                + out.log_tail
            )
            return
        for n in self.graph.of_type("SYSTEMLIB"):
            if n.name in out.versions and n.name in packages and not n.attrs.get("version"):
                n.attrs["version"] = out.versions[n.name]

    def _disproved_by_counts(self, outcome: TargetOutcome) -> KeptRepair | None:
        """A repair kept because more tests passed in the working container (the era set for
        failing assertions) whose clean replay passes fewer tests than the state before it did.
        Checked once per run: the replay without it is what the run then stands on."""
        if self._counts_checked or not self._ran(outcome):
            return None
        self._counts_checked = True
        passed = passed_count(outcome)
        for kept in self.record.repairs:
            sig = kept.signature
            if sig is not None and sig.kind == "assertion_drift" and kept.before_passed is not None:
                if passed < kept.before_passed:
                    return kept
        return None

    def _drop_disproved(self, replay_ws: Workspace, kept: KeptRepair) -> None:
        """Take the graph back to before ``kept`` (with any repair kept after it) and say why.
        The checkpoint was taken in a working container, not the replay's: only the graph and
        the record go back."""
        results = replay_ws.outcome.results
        passed, failed = results.count("passed"), results.count("failed")
        assert kept.checkpoint is not None
        undone = self.undo_to(replay_ws, kept.checkpoint)
        self.record.warnings.append(
            f"{kept.candidate.describe()} was kept because more tests passed in the working container, "
            f"but the clean replay passed {passed} ({failed} failed) against {kept.before_passed} before it: "
            "left out of the Dockerfile and replayed again"
            + (f" (also undone: {', '.join(k.candidate.describe() for k in undone[1:])})" if len(undone) > 1 else "")
        )
        self.traj.record(
            "rollback",
            command=[k.candidate.describe() for k in undone],
            outcome="replay-disproved",
            detail={"replay_passed": passed, "replay_failed": failed, "before_passed": kept.before_passed},
        )

    def _reoffer_unreproduced(self, outcome: TargetOutcome) -> None:
        """A kept repair whose failure is back in the clean replay did not reach the image: the
        graph does not hold it, whatever the working container showed. It leaves the record (the
        Dockerfile does not carry it) and is offered once more, now against the graph; a second
        replay that shows it again leaves it to the other candidates."""
        back = outcome.idents()
        for kept in list(self.record.repairs):
            sig, key = kept.signature, kept.candidate.key()
            if sig is None or sig.ident not in back or key in self.reoffered:
                continue
            self.reoffered.add(key)
            self.record.repairs.remove(kept)
            self.tried.get(sig.ident, set()).discard(key)
            for failed in self.failed_in_state.values():
                failed.discard(key)
            self.record.warnings.append(
                f"{kept.candidate.describe()} was kept in the working container, but the "
                f"clean replay still shows {sig.describe()}: tried again on the graph"
            )
            self.traj.record(
                "reoffer",
                command=[kept.candidate.describe()],
                outcome="replay-disproved",
                detail={"signature": sig.to_json()},
            )

    def _replay_record(self, o: TargetOutcome, tag: str, seconds: float) -> dict[str, Any]:
        """What the record keeps of a clean replay's outcome."""
        return {
            "ok": self._ran(o) or finds_no_tests(o),
            "tests_ran": ran_count(o),
            "collect_exit": o.collect_exit,
            "test_exit": o.test_exit,
            "tests": outcome_counts(o),
            "note": o.note,
            "signatures": [s.to_json() for s in o.signatures],
            "seconds": round(seconds, 3),
            "tag": tag,
        }

    def replay(self) -> Workspace:
        """Build the compiled Dockerfile with no cache, fresh container, run the target."""
        t0 = time.monotonic()
        self._final = True
        try:
            ws = self.open_workspace(no_cache=True, purpose="replay")
        finally:
            self._final = False
        self.record.replay = self._replay_record(ws.outcome, ws.tag, time.monotonic() - t0)
        timings = self.record.timings
        timings["replay_seconds"] = round(timings.get("replay_seconds", 0.0) + self.record.replay["seconds"], 3)
        self.traj.record(
            "replay-result",
            outcome="ok" if self.record.replay["ok"] else "failed",
            duration=time.monotonic() - t0,
            detail=self.record.replay,
        )
        return ws

    def _was_clean_replay(self, working: Workspace) -> bool:
        """Whether ``working`` already is a clean replay of the graph's Dockerfile: its image was
        built from the compiled Dockerfile as it stands now with no step from the engine's cache,
        and its outcome is its first test run, in the fresh container no trial has touched.
        Building the same Dockerfile again with --no-cache and running the same tests would prove
        nothing more, and a long suite would run twice. On a hosted runner, whose engine starts
        empty, a run that needs no repair gets here."""
        o = working.outcome
        if not working.from_scratch or working.first is not o or self.record.repairs:
            return False
        if getattr(working.dockerfile, "text", None) != self.compile(self.graph).text:
            return False
        return self._ran(o) and passed_count(o) > 0

    @staticmethod
    def _needs_no_test(pending: PendingLock) -> bool:
        """The drafted lock changes the proven Dockerfile's pins alone: no compiler or build tool
        left out and no wheel built in a builder stage, either of which a test may miss (a test
        that compiles, a library only the builder had), nor an installed distribution left out
        because nothing requires it (``bot.loop.lock.unrequired``). Those go to a replay that
        runs the tests."""
        return not pending.draft.left_out and not pending.draft.staged and not pending.working.unrequired

    def _prove_lock_by_build(self, pending: PendingLock, working: Workspace) -> None:
        """Build the drafted lock and keep it when it installs the working image's set; otherwise
        the lock and the graph go back, and the record says why."""
        tag = working.tag.rsplit(":", 1)[0] + ":locked"
        try:
            out = proven_by_build(self.engine, self.repo, pending, tag)
        except EngineError:
            raise  # the engine failed, not the lock: the run ends as it would on the replay's build
        except SetupbotError as exc:
            out = LockOutcome("failed", exc.what)  # _withdraw_prelock puts the lock file back
        if out.ok:
            self._prelocked = out  # the "lock" step records it (``_record_lock``)
            return
        self.traj.record("lock-draft", outcome="failed", duration=out.seconds, detail={"reason": out.reason})
        self._withdraw_prelock()
        self._prelock_refused = out.reason

    def _same_first_image(self, working: Workspace) -> bool:
        """Whether ``working``'s image, built with no step from the engine's cache, is what the
        graph's Dockerfile builds now although the run kept repairs: they changed only the test
        command or the variables the tests alone need, which leave every layer as it was
        (``builds_same_image``). A --no-cache rebuild would build the same layers again; a fresh
        container on that image, which no trial has touched, running the tests is the clean
        replay (``_fresh_container_replay``)."""
        if not working.from_scratch or not self.record.repairs:
            return False
        return builds_same_image(getattr(working.dockerfile, "text", ""), self.compile(self.graph).text)

    def _first_image_replay(self, working: Workspace, first: bool) -> Workspace:
        """The first image's own test run (``first``) or a fresh container on it, as the replay."""
        if first:
            return self._first_build_replay(working)
        return self._fresh_container_replay(working)

    def _fresh_container_replay(self, working: Workspace) -> Workspace:
        """Run the tests in a fresh container, with its own services, on ``working``'s image
        (``_same_first_image``), and record that run as the clean replay."""
        t0 = time.monotonic()
        self._final = True
        try:
            ws = self.open_on_image(working.tag, purpose="replay")
        finally:
            self._final = False
        self.record.replay = {
            **self._replay_record(ws.outcome, ws.tag, time.monotonic() - t0),
            "fresh_container": True,
            "build_seconds": round(working.build_seconds, 3),
        }
        timings = self.record.timings
        timings["replay_seconds"] = round(timings.get("replay_seconds", 0.0) + self.record.replay["seconds"], 3)
        why = "the first image was built from scratch; the repairs since changed only the test command or variables"
        self.traj.record(
            "replay-result",
            outcome="ok" if self.record.replay["ok"] else "failed",
            duration=time.monotonic() - t0,
            detail={**self.record.replay, "why": why},
        )
        return ws

    def _first_build_replay(self, working: Workspace) -> Workspace:
        """Record ``working``'s first test run as the clean replay (``_was_clean_replay``)."""
        self.record.replay = {
            **self._replay_record(working.outcome, working.tag, 0.0),
            "first_build": True,
            "build_seconds": round(working.build_seconds, 3),
        }
        self.traj.record(
            "replay-result",
            outcome="ok" if self.record.replay["ok"] else "failed",
            detail={**self.record.replay, "why": "the first image was built from scratch from this Dockerfile"},
        )
        return working

    def _lock_first(self, working: Workspace) -> PendingLock | None:
        """Draft the lock from the working image before the clean replay, so that the replay
        builds the locked Dockerfile and one no-cache build proves the environment and its
        lock. Only when that image was built from the graph's own Dockerfile (no repair tried
        in its container since) and its tests ran and passed, and the budget leaves room.
        The graph installs the lock until ``_hold_locked_replay`` says otherwise."""
        if not getattr(getattr(self.settings, "output", None), "lock", True):
            return None
        if not isinstance(self.graph, DepGraph) or not hasattr(self.engine, "run_once"):
            return None  # stand-in collaborators (tests) have no image to freeze
        o = working.outcome
        if not (self._ran(o) and passed_count(o) > 0) or not self.budget.can_replay():
            return None
        engine, frozen_from = self.engine, "the tested image"
        if not builds_same_image(getattr(working.dockerfile, "text", ""), self.compile(self.graph).text):
            if not self._repaired_in_container(working):
                return None  # the graph changed after that image was built, and not in its container
            # the repairs kept since were tried in its container, which holds the set the tests
            # passed with: the lock is frozen there, and the replay builds and tests it
            engine, frozen_from = ContainerReader(self.engine, working.session, working.tag), "the tested container"
        try:
            pending = draft_before_replay(
                engine,
                self.repo,
                self.graph,
                working_tag=working.tag,
                output_dir=self.settings.output.dir,
                compile_dockerfile=self.compile,
                frozen_from=frozen_from,
            )
        except SetupbotError as exc:
            self.traj.record("lock-draft", outcome="failed", detail={"reason": exc.what})
            return None
        if pending is None:
            return None
        if engine is not self.engine and pending.draft.staged and not self._python_only_in_container(working):
            # a builder stage is checked against the working image's libraries, which lack
            # what the container installed: the lock is made after the replay instead. When
            # the repairs there changed Python distributions and variables alone, the image's
            # system libraries are the container's, and the replay checks the rest
            pending.withdraw()
            self.traj.record(
                "lock-draft", outcome="skipped", detail={"reason": "a builder stage, frozen in a container"}
            )
            return None
        self.traj.record(
            "lock-draft",
            outcome="ok",
            duration=pending.seconds,
            detail={"from": working.tag, "count": len(pending.draft.lock.entries), "notes": pending.draft.notes},
        )
        self._prelock = pending
        self.graph = pending.draft.locked
        return pending

    def _python_only_in_container(self, working: Workspace) -> bool:
        """Whether the repairs kept in ``working``'s container changed only Python distributions,
        the test command or variables: no Debian package and no command, which could bring a
        system library the image lacks."""
        return all(a.kind in PYTHON_ONLY_ATOMS for k in self._kept_in(working) for a in k.candidate.atoms)

    def _kept_in(self, working: Workspace) -> list[KeptRepair]:
        """The repairs kept since ``working``'s image was built (their checkpoint names it)."""
        return [k for k in self.record.repairs if k.checkpoint is not None and k.checkpoint.workspace == working.tag]

    def _repaired_in_container(self, working: Workspace) -> bool:
        """Whether ``working``'s running container holds the graph's environment: it is alive,
        and the repairs kept since its image was built were all tried in it (in-container
        trials, undone by rolling it back). A repair tried by a rebuild would have made a new
        workspace, so the graph differs from the image only by what those trials did there."""
        if working.session is None:
            return False
        mine = self._kept_in(working)
        return bool(mine) and all(k.checkpoint.depth is not None for k in mine if k.checkpoint is not None)

    def _hold_locked_replay(self, pending: PendingLock, replay_ws: Workspace, working: Workspace) -> Workspace:
        """The replay of the locked Dockerfile holds when it passes at least the tests the
        working image passed and installs the same set: the lock is kept (``_prelocked``).
        Otherwise the lock file and the graph go back to what they were and the unlocked
        Dockerfile is replayed. A locked image that did not build leaves the lock to after that
        replay (``lock_replay`` tries without the builder stage, with the compiler); one that
        built but did not hold is not locked, and the record says why."""
        o = replay_ws.outcome
        before = passed_count(working.outcome)
        built = o.stage != "build"
        why = ""
        if not (self.record.replay.get("ok") and (ran_count(o) or 0) > 0):
            why = "the replay of the locked Dockerfile did not pass: " + (
                o.note or _last_lines(self._remains(o), 2) or "no test ran"
            )
        elif passed_count(o) < before and not (rerun := self._rerun_if_short(replay_ws, before)).get("held"):
            why = (
                f"the replay of the locked Dockerfile passed {passed_count(o)} tests, "
                f"against {before} in the working image"
            ) + (f" ({rerun['second']} when they ran again)" if rerun else "")
        else:
            out = proven_by_replay(self.engine, pending, self.record.replay["tag"])
            if out.ok:
                self._prelocked = out
                return replay_ws
            why = out.reason
        self._withdraw_prelock()
        self.traj.record("lock-draft", outcome="failed", detail={"reason": why, "built": built})
        if built:
            self._prelock_refused = why
        replay_ws.close()
        return self.replay()

    def _rerun_if_short(self, replay_ws: Workspace, before: int) -> dict[str, Any]:
        """A locked replay a few tests short of the working image (at most
        ``RERUN_SHORTFALL`` or 2 % of them) runs its tests once more in the same container:
        a suite whose order is shuffled, or whose tests race a clock, fails one or two tests on
        one run and not on the next, and that is no sign of the lock. It holds when the second
        run passes as many as the working image did; both counts are kept in the record. A
        larger shortfall, or no room in the budget for one more test run, is not rerun ({})."""
        first = passed_count(replay_ws.outcome)
        short = before - first
        if short > max(RERUN_SHORTFALL, before // 50) or replay_ws.session is None:
            return {}
        if not self.budget.can_start(self.budget.target_seconds or 0.0):
            return {}
        second = passed_count(self.evaluate(replay_ws))
        counts = {"first": first, "second": second, "working": before}
        self.record.replay["rerun"] = dict(counts)
        held = second >= before
        self.traj.record("replay-rerun", outcome="ok" if held else "failed", detail=dict(counts))
        if held:
            self.record.warnings.append(
                f"the replay of the locked Dockerfile passed {first} tests, and {second} when they ran "
                f"again in the same container, against {before} in the working image: tests that pass "
                "on one run and not on another (their order or timing), so the lock holds"
            )
        return {**counts, "held": held}

    def _withdraw_prelock(self) -> None:
        """The lock drafted before the replay is not kept: its file and the graph go back."""
        self._drop_plan_lock("the run did not prove it")
        pending, self._prelock, self._prelocked = self._prelock, None, None
        if pending is None:
            return
        pending.withdraw()
        self.graph = pending.unlocked

    def _lock_from_plan(self) -> None:
        """Before the first build: the plan's resolution, hashed, becomes the lock that the first
        image installs (bot.loop.lock.PlanLock). A run whose first image passes with no repair
        then proves the environment and its lock with that one image."""
        output = getattr(self.settings, "output", None)
        if not getattr(output, "lock", True) or output is None:
            return
        if not isinstance(self.graph, DepGraph) or not hasattr(self.engine, "run_once"):
            return  # stand-in collaborators (tests) have no image to freeze
        target = LockFile.in_output(self.repo, output.dir)
        try:
            self._lock_before = (target, target.read())
        except (safefs.UnsafePath, OSError):
            self._lock_before = None  # no lock is written there (bot.loop.lock.LockFile)
        self._complete_in_image()
        try:
            got = draft_from_plan(self.repo, self.graph, output_dir=output.dir)
        except OSError as exc:
            got = f"the lock file could not be written: {exc}"
        if isinstance(got, str):
            self.traj.record("lock-draft", outcome="skipped", detail={"from": "plan", "reason": got})
            return
        self._planlock = got
        self.traj.record(
            "lock-draft",
            outcome="ok",
            duration=got.seconds,
            detail={"from": "plan", "count": len(got.lock.entries), "notes": got.notes},
        )

    def _complete_in_image(self) -> None:
        """When the plan's lock is refused only because some pins have no wheel (the host never
        builds one, so they and what they need were left to the image), resolve the whole set
        in a container on the base image and build those pins there (``bot.loop.inimage``).
        If each builds as a pure-Python wheel, the plan's resolution is complete and the lock
        can be drafted from it; otherwise the plan stays as it was, and the record says why."""
        if plan_lock_refusal(self.graph) != WHEEL_LESS_REFUSAL or plan_lock_refusal(self.graph, wheel_less=False):
            return
        image = str(getattr(self.plan, "base_image", "") or "")
        python = str(self.graph.runtime.attrs.get("version", "") or self.python)
        if not image or not self.budget.can_replay():
            return
        t0 = time.monotonic()
        requirements, constraints = install_specs(self.graph), constraint_specs(self.graph)
        refresh = getattr(getattr(self.settings, "output", None), "refresh_lock", False)

        def key() -> str | None:
            image_id = getattr(self.engine, "image_id", lambda tag: None)(image)
            index = host_index_config().uv_args()
            return cache_key(requirements, constraints, python, image_id, index) if image_id else None

        known = key()
        got = load_cached(known) if known and not refresh else None
        if got is None:
            progress.current().stage("resolve", "in a container")
            try:
                with self.engine.session(image, name_hint="resolve") as session:
                    got = resolve_in_image(
                        session, requirements, constraints, wheel_less=lambda pins: wheel_less(pins, python)
                    )
            except SetupbotError as exc:
                self.traj.record(
                    "resolve-in-image", outcome="failed", duration=time.monotonic() - t0, detail={"error": exc.what}
                )
                return
            known = known or key()  # a base image pulled for the session has an id now
            if known:
                store(known, got)
            detail = {**got.to_json(), "image": image}
        else:
            got.seconds = time.monotonic() - t0
            detail = {**got.to_json(), "image": image, "cached": True}
        self.traj.record("resolve-in-image", outcome="ok" if got.ok else "failed", duration=got.seconds, detail=detail)
        self.record.timings["resolve_in_image_seconds"] = round(got.seconds, 3)
        if got.ok:
            complete_resolution(self.graph, got.pins, got.pure, f"a container on {image}")

    def _put_back_lock_file(self) -> None:
        """The run ends with an error and writes no outputs: the lock file, which a proof may
        have written already, goes back to what the run found (absent when there was none)."""
        before, self._lock_before = getattr(self, "_lock_before", None), None
        if before is None:
            return
        target, found = before
        try:
            if target.read() != found:
                target.restore(found)
        except (safefs.UnsafePath, OSError) as exc:
            log.warning("the lock file could not be put back as it was: %s", exc)

    def _drop_plan_lock(self, why: str) -> None:
        """The lock resolved from the plan goes: its file back as it was, and out of the graph."""
        plan, self._planlock = getattr(self, "_planlock", None), None
        if plan is None:
            return
        plan.withdraw(self.graph)
        self.traj.record("lock-draft", outcome="withdrawn", detail={"from": "plan", "reason": why})

    def _plan_lock_failed_build(self, outcome: TargetOutcome) -> bool:
        """The first image did not build with the lock resolved from the plan: the lock did not
        install, or the image did not build without the build tools the lock left out. The lock
        goes and the plan's ranges and tools are built as they were; True when it went."""
        plan = self._planlock
        if plan is None or outcome.stage != "build":
            return False
        in_lock = failed_in_lock_install(outcome.log)
        if not plan.left_out and not in_lock:
            return False  # a failure of its own, which the loop repairs with the lock in place
        said = "did not install it" if in_lock else f"did not build without {', '.join(plan.left_out)}"
        self._drop_plan_lock(f"the first image {said}")
        return True

    def _prove_plan_lock(self, tag: str, proof: str) -> bool:
        """Keep the plan's lock (``_prelocked``) when image ``tag`` installed exactly its set;
        otherwise it goes, and the lock is made after the clean replay."""
        assert self._planlock is not None
        out = proven_plan_lock(self.engine, self.graph, self._planlock, tag, proof)
        if out.ok:
            self._planlock, self._prelocked = None, out
            return True
        self._drop_plan_lock(out.reason)
        return False

    def _record_lock(self, out: LockOutcome) -> None:
        """What the record and the report say of a lock that was kept."""
        self.record.replay["lock"] = out.to_json()
        self.record.timings["lock_seconds"] = round(out.seconds, 3)
        self.traj.record("lock", outcome="ok", duration=out.seconds, detail=out.to_json())
        for note in out.notes:
            self.record.warnings.append(f"lock: {note}")
        self.record.lock_text = out.text
        self.record.replay["tag"] = out.tag

    def lock_replay(self) -> None:
        """Lock what the clean replay proved (bot.loop.lock, issue 16): the graph then compiles
        to a Dockerfile that installs the lock, and the replay tag becomes the locked image's,
        which the verification runs on. A lock that does not reproduce the set is not kept."""
        if not getattr(getattr(self.settings, "output", None), "lock", True):
            # the maintainer keeps version ranges: the replay's image is the proven one
            self.record.replay["lock"] = {"status": "off", "reason": "output.lock is false"}
            return
        if not isinstance(self.graph, DepGraph) or not hasattr(self.engine, "run_once"):
            return  # stand-in collaborators (tests) have no image to freeze

        t0 = time.monotonic()
        try:
            out = lock_environment(
                self.engine,
                self.repo,
                self.graph,
                replay_tag=self.record.replay["tag"],
                output_dir=self.settings.output.dir,
            )
        except SetupbotError as exc:
            self.record.warnings.append(f"environment not locked: {exc.what}")
            return
        self.record.replay["lock"] = out.to_json()
        self.record.timings["lock_seconds"] = round(time.monotonic() - t0, 3)
        self.traj.record(
            "lock", outcome="ok" if out.ok else out.status, duration=time.monotonic() - t0, detail=out.to_json()
        )
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
        rank = (STAGE_RANK[outcome.stage], passed_count(outcome))
        if not best or tuple(best["rank"]) < rank:
            self.record.best = {
                "rank": list(rank),
                "outcome": outcome.to_json(),
                "dockerfile": self.compile(self.graph).text,
            }

    def _no_tests_reason(self, outcome: TargetOutcome) -> str:
        """What was tried to find tests, for a run whose clean replay ran none."""
        skipped = outcome.results.count("skipped")
        head = f"the clean replay ran no test ({skipped} skipped)" if skipped else "the clean replay ran no test"
        tried = "; ".join(f"`{cmd}`: {found}" for cmd, found in self.tests_tried.items())
        target = getattr(self.graph, "target", None)
        sources = [
            f"{e[0]}" + (f":{e[1]}" if e[1] else "") + f" ({e[2]})" for e in (getattr(target, "evidence", None) or [])
        ][:3]

        dirs = find_test_dirs(self.repo)
        where = (
            f"test folders present: {', '.join(d + '/' for d in dirs)}"
            if dirs
            else "no tests/, test/, src/tests/ or testing/ folder"
        )
        text = f"{head}. Test commands tried: {tried or 'none'}. {where}"
        if sources:
            text += f"; the test command came from {', '.join(sources)}"
        return text + (
            ". Name the test command in .github/setupbot.yml (target.test_command) if the tests are elsewhere."
        )

    def _what_remains(self, outcome: TargetOutcome) -> str:
        text = self._remains(outcome)
        if self.record.strategies:
            text += (
                " (generic strategies tried: "
                + "; ".join(f"{t['strategy']}: {'kept' if t['kept'] else 'no help'}" for t in self.record.strategies)
                + ")"
            )
        return text

    def _remains(self, outcome: TargetOutcome) -> str:
        # collection_error only stands for "failed, unclassified" so that era pins can be tried
        sigs = [s for s in outcome.setup_failures if s.kind != "collection_error"]
        if sigs:
            return "unresolved: " + "; ".join(f"{s.describe()}: {s.message}{self._no_python_note(s)}" for s in sigs[:5])
        outside = next((s for s in outcome.signatures if s.category == "external"), None)
        what = {"build": "the build", "collect": "the tests' collection"}.get(outcome.stage, "the tests")
        if outcome.stage != "done" and outside is not None and outside.kind == "gpu_toolkit":
            return (
                f"{what} compiles CUDA or ROCm extensions, and no runner image or index here has a GPU "
                "toolkit, so no change to the environment gets past it; run it on a runner with the "
                f"toolkit, or use the distribution's CPU variant if it has one: {outside.message}"
            )
        if outcome.stage != "done" and outside is not None:
            return (
                f"{what} reaches for a host outside ({outside.key or 'unnamed'}) that does not answer here, "
                "so no change to the environment gets past it; run it where that host answers"
                + (", or make the tests skip without it" if outcome.stage != "build" else "")
                + f": {outside.message}"
            )
        if outcome.stage != "done":
            tried = (
                " (pinning the releases of the repository's era did not help)"
                if any(s.kind == "collection_error" and self.tried.get(s.ident) for s in outcome.setup_failures)
                else ""
            )
            return f"the target stopped at {outcome.stage} with no classified cause{tried}: " + _last_lines(
                outcome.log, 5
            )
        return "nothing"

    def _no_python_note(self, sig: Signature) -> str:
        """Pins that need a Python none of the offered images has: say so plainly."""
        offered = ", ".join(sorted(self.available, key=lambda v: tuple(int(x) for x in v.split(".")))) or "none"
        if sig.kind == "python_pin" and next_python(sig.key, self.available, "") is None:
            fits = next_python(sig.key, _older_standins(self.available), "")
            return (
                f"; none of the offered Pythons ({offered}) satisfies {sig.key}: an image with such a Python is needed"
                + (_bootstrap_hint([fits]) if fits else "")
            )
        if sig.kind == "no_matching_distribution" and "==" in sig.key:
            return f"; no offered Python ({offered}) installs this pin" + _bootstrap_hint(
                _older_standins(self.available)
            )
        return ""

    def _learn(self) -> None:
        """Repairs the LLM or a person supplied that survived the clean replay become units."""
        if self.store is None:
            return
        for kept in self.llm_repairs:
            if kept not in self.record.repairs:
                continue
            try:
                # a shared store holds what the LLM taught in quarantine until a person approves
                # it (`setupbot knowledge approve ID`): other repositories never run it unseen
                quarantine = kept.candidate.source == "llm" and bool(getattr(self.store, "shared", False))
                uid = learn_unit(
                    self.store,
                    kept.log_excerpt,
                    kept.candidate.atoms,
                    {"source": kept.candidate.source, "repo": self.repo.name, "run_id": self.record.run_id},
                    quarantine=quarantine,
                )
                self.traj.record("learn", outcome="ok", detail={"unit": uid})
            except SetupbotError as exc:
                self.record.warnings.append(f"learning: {exc}")


def _older_standins(available: list[str]) -> list[str]:
    """Pythons older than every offered one that `setupbot images bootstrap` can build offline
    (a Debian suite's own interpreter), newest first."""
    if not available:
        return []
    oldest = min(Version(v) for v in available)
    return sorted({v for v in SUITE_PYTHON.values() if Version(v) < oldest}, key=Version, reverse=True)


def _bootstrap_hint(versions: list[str]) -> str:
    if not versions:
        return ""
    v = versions[0]
    return f" (offline, `setupbot images bootstrap --python {v}` builds a stand-in of Python {v})"
