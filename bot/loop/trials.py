"""Trials: a candidate is tried in the runner container (snapshot, apply, evaluate, keep
or roll back) or by rebuilding the image from the graph; backtracking abandons a sub-path."""

from __future__ import annotations

from bot import progress
from bot.errors import SetupbotError
from bot.graph.apply import REPAIR_EVIDENCE
from bot.loop.candidates import _excerpt
from bot.loop.diagnose import Signature
from bot.loop.records import KeptRepair
from bot.loop.repair import Candidate, trial_commands
from bot.loop.state import LoopBase
from bot.loop.target import TargetOutcome, changes_test_command, compare, runs_more_tests
from bot.loop.workspace import Workspace


class TrialsMixin(LoopBase):
    """Trials of one candidate, keeping or undoing them."""

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


    def _trial_estimate(self, cand: Candidate) -> float:
        """Seconds a trial is expected to take, from what was measured: a target run, plus an
        image build when the repair changes the image."""
        target = self.budget.target_seconds or 0.0
        if cand.in_container:
            return target + (self.budget.command_seconds or 0.0) * max(1, sum(len(trial_commands(a)) for a in cand.atoms))
        return (self.budget.build_seconds or 0.0) + target

