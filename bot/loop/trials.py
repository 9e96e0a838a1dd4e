"""Trials: a candidate is tried in the runner container (snapshot, apply, evaluate, keep
or roll back) or by rebuilding the image from the graph; backtracking abandons a sub-path."""

from __future__ import annotations

import shutil

from bot import progress
from bot.atoms import PIP_INSTALL, Atom
from bot.errors import SetupbotError
from bot.graph.apply import REPAIR_EVIDENCE
from bot.loop.candidates import _excerpt
from bot.loop.diagnose import Signature
from bot.loop.lock import forget_plan_lock, keeps_plan_lock
from bot.loop.records import Checkpoint, KeptRepair
from bot.loop.repair import Candidate
from bot.loop.state import LoopBase
from bot.loop.target import TargetOutcome, changes_test_command, compare, fixed, passed_count, runs_more_tests
from bot.loop.workspace import Workspace

# A trial's pip install runs with uv when the host has it (setupbot depends on it): the era set
# (sixty pins) took pip 38 s in importlib_metadata's runner. uv is copied in for the command and
# removed after it, so no snapshot and no test sees it. uv reads neither PIP_CONSTRAINT nor the
# other PIP_ variables a repair may have set: the wrapper hands the constraint on, and any other
# PIP_ setting than these means pip, which reads it, runs instead (exit 97: uv did nothing).
UV_IN_RUNNER = "/tmp/setupbot-uv/uv"
UV_NOT_USED = 97
_PIP_SETTINGS_UV_TAKES = (
    "PIP_CERT",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_CONSTRAINT",
    "PIP_BREAK_SYSTEM_PACKAGES",
    # what pip prints, waits for or caches, never what it installs (a CI workflow's env sets
    # some: jaraco's projects quieten pip's warnings)
    "PIP_DISABLE_PIP_VERSION_CHECK",
    "PIP_NO_PYTHON_VERSION_WARNING",
    "PIP_NO_WARN_SCRIPT_LOCATION",
    "PIP_ROOT_USER_ACTION",
    "PIP_NO_INPUT",
    "PIP_PROGRESS_BAR",
    "PIP_NO_COLOR",
    "PIP_QUIET",
    "PIP_VERBOSE",
    "PIP_DEFAULT_TIMEOUT",
    "PIP_TIMEOUT",
    "PIP_RETRIES",
    "PIP_NO_CACHE_DIR",
    "PIP_CACHE_DIR",
)
UV_WRAPPER = (
    "for v in $(env | sed -n 's/^\\(PIP_[A-Z0-9_]*\\)=.*/\\1/p'); do case \"$v\" in "
    + "|".join(_PIP_SETTINGS_UV_TAKES)
    + f') ;; *) echo "$v is set and uv does not read it: pip installs this" >&2; exit {UV_NOT_USED};; esac; done; '
    'if [ -n "${PIP_CONSTRAINT:-}" ]; then export UV_CONSTRAINT="$PIP_CONSTRAINT"; fi; '
    'if [ -n "${PIP_BREAK_SYSTEM_PACKAGES:-}" ]; then export UV_BREAK_SYSTEM_PACKAGES=1; fi; '
    'exec "$0" "$@"'
)


def uv_argv(argv: list[str]) -> list[str] | None:
    """The uv command that does what the trial's ``pip install`` argv does, wrapped so that it
    takes the container's pip settings (``UV_WRAPPER``); None for any other command."""
    if argv[: len(PIP_INSTALL)] != PIP_INSTALL:
        return None
    rest = argv[len(PIP_INSTALL) :]
    return ["sh", "-c", UV_WRAPPER, UV_IN_RUNNER, "pip", "install", "--system", "--quiet", "--no-cache", *rest]


class TrialsMixin(LoopBase):
    """Trials of one candidate, keeping or undoing them."""

    def _record_outcome(self, cand: Candidate, outcome: str) -> None:
        if cand.unit_id and self.retriever is not None:
            try:
                self.retriever.record_outcome(cand.unit_id, outcome)
            except SetupbotError as exc:
                self.record.warnings.append(f"telemetry for {cand.unit_id}: {exc.what}")

    # -- the one way back ------------------------------------------------------------------------
    def checkpoint(self, ws: Workspace) -> Checkpoint:
        """The state now. An in-container trial takes its snapshot right after the checkpoint,
        which is the frame ``undo_to`` rolls the container back to."""
        depth = ws.session.depth if ws.session is not None else None
        return Checkpoint(self.graph.to_json(), ws.tag, depth, dict(ws.target_env), len(self.record.repairs))

    def undo_to(self, ws: Workspace, cp: Checkpoint, *, depth: int | None = None) -> list[KeptRepair]:
        """Return to ``cp``: the graph, the kept repairs and, when the checkpoint was taken in this
        workspace, the runner container (rolled back to the snapshot taken at ``cp``, or to
        ``depth`` when given) and its target environment. Returns the kept repairs undone."""
        undone = self.record.repairs[cp.kept :]
        del self.record.repairs[cp.kept :]
        self.graph = type(self.graph).from_json(cp.graph)
        if getattr(self, "_planlock", None) is None:
            forget_plan_lock(self.graph)  # dropped since ``cp``: its file is gone too
        to = cp.depth if depth is None else depth
        if ws.session is not None and cp.workspace == ws.tag and to is not None:
            frames = ws.session.depth - to
            if frames > 0:
                ws.session.rollback(frames)
            ws.target_env = dict(cp.target_env)
        return undone

    @staticmethod
    def _repair_detail(cand: Candidate, sig: Signature | None) -> str:
        return (sig.describe() + ": " if sig else "") + (cand.why or cand.describe())

    def _apply_to_graph(self, cand: Candidate, sig: Signature | None) -> None:
        # one evidence item (a list of one tuple: apply_atom iterates over items)
        evidence = [(REPAIR_EVIDENCE, None, self._repair_detail(cand, sig))]
        for atom in cand.atoms:
            self.graph.apply_atom(atom, evidence)

    def _retell(self, cand: Candidate, trialled: Signature | None, fixed_sig: Signature) -> None:
        """The repair was trialled against one failure and fixed another: the graph's evidence
        (which the Dockerfile's comment cites) names the one it fixed."""
        was, now = self._repair_detail(cand, trialled), self._repair_detail(cand, fixed_sig)
        for node in getattr(self.graph, "nodes", {}).values():
            node.evidence = [(f, ln, now if f == REPAIR_EVIDENCE and d == was else d) for f, ln, d in node.evidence]

    # -- trials -------------------------------------------------------------------------------
    def trial_in_container(
        self, ws: Workspace, cand: Candidate, sig: Signature | None, cp: Checkpoint
    ) -> tuple[str, TargetOutcome]:
        """Snapshot, apply the candidate to the graph and the container, evaluate; keep it when
        the error state improved, else ``undo_to`` the checkpoint."""
        before = ws.outcome
        snap = ws.session.snapshot(note=cand.describe()[:200])
        self.traj.record("snapshot", snapshot=str(snap), outcome="ok", detail={"depth": ws.session.depth})
        self._apply_to_graph(cand, sig)
        self._for_tests_alone(cand)
        trial_env = dict(ws.target_env)
        failed = ""
        for atom in cand.atoms:
            if atom.kind == "set_env":
                trial_env[atom.args["name"]] = atom.args["value"]
            failed = self._run_trial_commands(ws, atom, trial_env)
            if failed:
                break
        after = (
            TargetOutcome(before.stage, before.signatures, log=before.log, note=failed)
            if failed
            else self.evaluate(ws, trial_env)
        )
        verdict = "failed" if failed else compare(before, after, sig)
        if not failed and changes_test_command(cand) and not runs_more_tests(before, after):
            verdict = "no-more-tests"
        if verdict == "improved" or (verdict == "unchanged" and sig is None and not failed and after.passed):
            ws.target_env = trial_env
            ws.outcome = after
            self.traj.record(
                "keep",
                command=[cand.describe()],
                snapshot=str(snap),
                outcome="kept",
                detail={"candidate": cand.to_json(), "after": after.to_json()},
            )
            return "kept", after
        self.undo_to(ws, cp)
        self.traj.record(
            "rollback",
            command=[cand.describe()],
            snapshot=str(snap),
            outcome=verdict,
            detail={"candidate": cand.to_json(), "after": after.to_json(), "frames": 1},
        )
        return verdict, after

    def _for_tests_alone(self, cand: Candidate) -> None:
        """A candidate that only sets variables (and the test command) is tried in the runner,
        with the variables given to the test run alone: the image's install steps never ran with
        them, so the Dockerfile sets them after those steps (bot.compile.dockerfile), where a
        change to them rebuilds no install."""
        if not all(a.kind in ("set_env", "test_command") for a in cand.atoms):
            return
        for atom in cand.atoms:
            nodes = getattr(self.graph, "nodes", {})
            node = nodes.get(f"config:env:{atom.args['name']}") if atom.kind == "set_env" else None
            if node is not None:
                node.attrs["for_tests"] = True

    def _run_trial_commands(self, ws: Workspace, atom: Atom, trial_env: dict[str, str]) -> str:
        """Run what applies ``atom`` in the runner; the failed command, or "" when all passed.
        A pip install goes to uv first (``uv_argv``); when uv is not there, does not run, or
        fails, pip runs it as written, and its verdict is the trial's."""
        for argv in atom.trial_commands():
            self.budget.spend_step()
            env = {**ws.env, **trial_env}
            if self._by_uv(ws, argv, env):
                continue
            r = self._exec(ws, argv, "trial", env)
            if r.exit_code != 0:
                return f"{' '.join(argv)} exited {r.exit_code}"
        return ""

    def _by_uv(self, ws: Workspace, argv: list[str], env: dict[str, str]) -> bool:
        """Run a trial's pip install with the host's uv, copied into the runner for the command
        and removed after it; True when uv installed it."""
        fast = uv_argv(argv)
        host_uv = shutil.which("uv")
        if fast is None or host_uv is None or not hasattr(ws.session, "copy_in"):
            return False
        try:
            ws.session.copy_in(host_uv, UV_IN_RUNNER)
            r = self._exec(ws, fast, "trial", env)
        except SetupbotError:
            return False
        finally:
            ws.session.exec(["rm", "-rf", UV_IN_RUNNER.rsplit("/", 1)[0]], timeout=60)
        return r.exit_code == 0

    def trial_by_rebuild(
        self, ws: Workspace, cand: Candidate, sig: Signature | None, cp: Checkpoint
    ) -> tuple[str, Workspace]:
        """Apply the candidate to the graph and build a new workspace from it; keep it when the
        error state improved, else close it and ``undo_to`` the checkpoint in the old one."""
        self._apply_to_graph(cand, sig)
        new_ws = self.open_workspace(purpose="trial-build")
        verdict = compare(ws.outcome, new_ws.outcome, sig)
        if changes_test_command(cand) and not runs_more_tests(ws.outcome, new_ws.outcome):
            verdict = "no-more-tests"
        if verdict == "improved":
            self.traj.record(
                "keep",
                command=[cand.describe()],
                outcome="kept",
                detail={"candidate": cand.to_json(), "after": new_ws.outcome.to_json()},
            )
            return "kept", new_ws
        new_ws.close()
        self.undo_to(ws, cp)
        self.traj.record(
            "rollback",
            command=[cand.describe()],
            outcome=verdict,
            detail={"candidate": cand.to_json(), "after": new_ws.outcome.to_json(), "rebuild": True},
        )
        return verdict, ws

    def try_candidate(
        self, ws: Workspace, cand: Candidate, sig: Signature | None, alternatives: list[Candidate]
    ) -> tuple[bool, Workspace]:
        """Trial one candidate; on success record the kept repair and return the live workspace."""
        progress.current().trial(cand.describe())
        if sig is not None:
            self.tried.setdefault(sig.ident, set()).add(cand.key())
        before = ws.outcome
        before_idents = before.idents()
        excerpt = _excerpt(before.log, sig)
        # the lock resolved from the plan holds only the plan's set: a repair that changes what
        # pip installs drops it, and the lock is made after the clean replay instead
        if not keeps_plan_lock(cand.atoms):
            self._drop_plan_lock(f"{cand.describe()} was tried")
        cp = self.checkpoint(ws)
        if cand.in_container and ws.session is not None:
            verdict, _ = self.trial_in_container(ws, cand, sig, cp)
            new_ws = ws
        else:
            cp = Checkpoint(cp.graph, cp.workspace, None, cp.target_env, cp.kept)  # nothing to roll back
            verdict, new_ws = self.trial_by_rebuild(ws, cand, sig, cp)
        if verdict == "kept":
            if new_ws is not ws:
                ws.close()
            # the report names the failure the repair fixed, which may be another than the target
            done = fixed(before, new_ws.outcome, sig)
            if done is not sig and done is not None:
                self.tried.setdefault(done.ident, set()).add(cand.key())
                excerpt = _excerpt(before.log, done)
                self._retell(cand, sig, done)
            self._keep(
                KeptRepair(
                    done,
                    cand,
                    excerpt,
                    checkpoint=cp,
                    alternatives=alternatives,
                    before_idents=before_idents,
                    before_passed=passed_count(before) if before.results is not None else None,
                )
            )
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
        """Abandon a sub-path: ``undo_to`` before the latest kept in-container repair (in this
        workspace) that came before ``stuck`` appeared and still has an untried alternative, then
        try that one."""
        for kept in reversed(self.record.repairs):
            cp = kept.checkpoint
            if cp is None or cp.depth is None or cp.workspace != ws.tag or stuck.ident in kept.before_idents:
                continue
            alternatives = [
                c
                for c in kept.alternatives
                if kept.signature is None or c.key() not in self.tried.get(kept.signature.ident, set())
            ]
            if not alternatives or ws.session.depth - cp.depth <= 0:
                continue
            frames = ws.session.depth - cp.depth
            undone = self.undo_to(ws, cp)
            for k in undone:
                self._record_outcome(k.candidate, "failure")
            self.traj.record(
                "rollback",
                command=[k.candidate.describe() for k in undone],
                outcome="abandoned",
                detail={"frames": frames, "stuck_on": stuck.to_json()},
            )
            # the target state before that repair: re-evaluate on the restored container
            ws.outcome = self.evaluate(ws)
            for cand in alternatives:
                ok, ws = self.try_candidate(ws, cand, kept.signature, alternatives[1:])
                if ok:
                    return True, ws
            return False, ws
        return False, ws

    def undo_frames(self, ws: Workspace, frames: int) -> None:
        """Roll the runner back ``frames`` snapshots (the LLM planner's rollback) and undo the
        kept repairs made above them."""
        depth = ws.session.depth - frames
        dropped = [
            k.checkpoint
            for k in self.record.repairs
            if k.checkpoint is not None
            and k.checkpoint.workspace == ws.tag
            and k.checkpoint.depth is not None
            and k.checkpoint.depth >= depth
        ]
        cp = dropped[0] if dropped and dropped[0] is not None else self.checkpoint(ws)
        undone = self.undo_to(ws, cp, depth=depth)
        self.traj.record("rollback", outcome="requested", detail={"frames": frames, "undone": len(undone)})
        ws.outcome = self.evaluate(ws)

    def _trial_estimate(self, cand: Candidate) -> float:
        """Seconds a trial is expected to take, from what was measured: a target run, plus an
        image build when the repair changes the image."""
        target = self.budget.target_seconds or 0.0
        if cand.in_container:
            return target + (self.budget.command_seconds or 0.0) * max(
                1, sum(len(a.trial_commands()) for a in cand.atoms)
            )
        return (self.budget.build_seconds or 0.0) + target
