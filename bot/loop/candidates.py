"""Repair candidates for a signature: the experience base, the rules and the era pins,
merged in the order the evidence deserves."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from packaging.utils import NormalizedName, canonicalize_name

from bot.atoms import Atom, spec_name
from bot.errors import SetupbotError
from bot.graph.apply import checkout_holds, is_the_project, project_compiles, project_name
from bot.graph.build import install_spec
from bot.loop.diagnose import Signature
from bot.loop.repair import (
    Candidate,
    distributions_for,
    knowledge_candidates,
    merge_candidates,
    repo_context,
    rule_candidates,
)
from bot.loop.state import LoopBase
from bot.loop.target import TargetOutcome
from bot.loop.workspace import Workspace

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
PROVIDER_KINDS = frozenset(
    {"missing_module", "import_name_error", "module_attribute", "missing_native_submodule", "plugin_hook_mismatch"}
)
LOG_FOR_RETRIEVAL = 20_000


def _excerpt(log_text: str, sig: Signature | None) -> str:
    """The part of the log a retriever should see: around the signature's line, and the tail."""
    if not log_text:
        return ""
    if sig is not None and sig.message and sig.message in log_text:
        i = log_text.index(sig.message)
        around = log_text[max(0, i - 4000) : i + 4000]
        return around[-LOG_FOR_RETRIEVAL:]
    return log_text[-LOG_FOR_RETRIEVAL:]


# a distribution's bare name, and a pin an atom may carry as it is (no local version label, no URL)
_BARE_NAME = r"[A-Za-z0-9][A-Za-z0-9._\-]*"
_PLAIN_PIN = re.compile(_BARE_NAME + r"==[A-Za-z0-9.!]+")
# catalogue kinds that are SQL servers a database URL can name
SQL_SERVERS = ("postgres", "mysql")


class CandidatesMixin(LoopBase):
    """Which repairs the loop tries for a signature, best first."""

    def candidates_for(self, sig: Signature, outcome: TargetOutcome) -> list[Candidate]:
        if getattr(self, "_repo_context", None) is None:
            self._repo_context = repo_context(self.repo)
        context: dict[str, Any] = {
            "python": self.python,
            "os": "debian",
            **(self._repo_context or {}),
            **self._database_context(),
        }
        # the top-level modules the checkout holds (the plan's reading): the experience base
        # offers no namesake of them from the index (a loop double may have no graph)
        graph = getattr(self, "graph", None)
        if graph is not None and graph.meta.get("checkout_modules"):
            context["checkout_modules"] = list(graph.meta["checkout_modules"])
        excerpt = _excerpt(outcome.log, sig)
        try:
            from_store = knowledge_candidates(self.retriever, excerpt, context, self.settings.knowledge.k)
        except SetupbotError as exc:
            self.record.warnings.append(f"experience base: {exc.what}")
            from_store = []
        rules = rule_candidates(
            sig,
            repo=self.repo,
            python=self.python,
            available_pythons=self.available,
            repo_env=self.settings.target.env,
            # (the graph is asked only for the kinds whose rules read it: a loop double may have none)
            specs=self._plan_specs() if sig.kind in ("missing_native_submodule", "missing_env") else None,
        )
        rules = rules + self._resolution_candidates(sig) + self.era_candidates(sig, outcome.log)
        tried = self.tried.setdefault(sig.ident, set())
        failed_here = self.failed_in_state.get(frozenset(outcome.idents()), set())
        # units whose signal matched first, then the obvious rules, then units that are only
        # similar text (lexical/embedding neighbours): those are the weakest evidence
        # (every missing module of the outcome counts: a unit matched for another signature, such
        # as "no tests collected", reads the same log)
        others = [s for s in outcome.signatures if s.kind == "missing_module"]
        rules = self._own_name_only(rules, sig, others)
        exact = self._own_name_only([c for c in from_store if c.exact], sig, others)
        similar = self._fit_for_the_project(self._own_name_only([c for c in from_store if not c.exact], sig, others))
        # a missing native submodule is precise: units about missing modules would reinstall
        # the same wheel-less build
        groups = (rules, exact, similar) if sig.kind == "missing_native_submodule" else (exact, rules, similar)
        merged = self._prefer_installed(sig, merge_candidates(*groups))
        cands = [c for c in merged if c.key() not in tried and c.key() not in failed_here]
        return cands[: max(0, self.settings.budgets.max_repairs_per_signature - len(tried))]

    def _own_name_only(
        self, cands: list[Candidate], sig: Signature | None = None, others: Sequence[Signature] = ()
    ) -> list[Candidate]:
        """``install_project`` only for the project's own name: the metadata a failure misses may
        be a dependency's, which installing the project does not give. And for the project's own
        name, never a distribution of that name from the index: it would be a published release
        (or a stranger's), not the checkout under test."""
        # the project's own name, when the failure misses its metadata: no namesake from the index
        # (the graph is asked only then: a loop double may have none)
        shunned: set[str] = set()
        if sig is not None and sig.kind == "missing_distribution" and sig.key:
            own = project_name(self.graph)
            if own and is_the_project(self.graph, sig.key):
                shunned = {canonicalize_name(own)}
        # a module of the checkout's own package is missing (a submodule it never built, such as
        # a Cython module): a distribution of that name from the index is a stranger's, or a
        # published release that would replace the checkout's install
        # (a loop double may have no graph)
        graph = getattr(self, "graph", None)
        for missing in [sig, *others]:
            if missing is not None and missing.kind == "missing_module" and graph is not None:
                if checkout_holds(graph, missing.key):
                    shunned |= {
                        canonicalize_name(missing.key),
                        *(canonicalize_name(d) for d in distributions_for(missing.key)),
                    }

        def fits(a: Atom) -> bool:
            if a.kind == "install_project":
                return is_the_project(self.graph, a.args["name"])
            if a.kind == "pip_install" and shunned:
                return all(spec_name(p) not in shunned for p in a.args["packages"])
            return True

        return [c for c in cands if all(fits(a) for a in c.atoms)]

    def _fit_for_the_project(self, similar: list[Candidate]) -> list[Candidate]:
        """Units offered only for similar text, less those that cannot fit the project: a project
        that compiles its own extension (C, or Rust through maturin or setuptools-rust) cannot run
        from the checkout, because the tests import the compiled module, so "dependencies only"
        is no answer to its failed build."""
        fitting = [c for c in similar if not any(a.kind == "install_deps_only" for a in c.atoms)]
        # (the graph is asked only when there is something to leave out)
        return fitting if len(fitting) < len(similar) and project_compiles(self.graph) else similar

    def _installed_providers(self, ws: Workspace) -> dict[str, list[str]]:
        try:
            r = ws.session.exec(["python", "-c", PROVIDERS_SCRIPT], timeout=120, changes=False)
            return json.loads(r.output.strip().splitlines()[-1]) if r.exit_code == 0 and r.output.strip() else {}
        except (SetupbotError, ValueError, IndexError):
            return {}

    def _resolution_candidates(self, sig: Signature) -> list[Candidate]:
        """pip's resolver backtracked until the build was stopped: uv resolved the same
        requirements on the host for this Python (the plan's resolution), and its versions as
        constraints leave pip nothing to search."""
        if sig.kind != "resolver_backtracking":
            return []
        res = (getattr(getattr(self, "graph", None), "meta", None) or {}).get("resolution") or {}
        pins = res.get("pins") or {}
        if not res.get("ok") or not pins or str(res.get("python") or "") != self.python:
            return []
        own = project_name(self.graph)
        specs = [
            f"{name}=={version}"
            for name, version in sorted(pins.items())
            if (not own or canonicalize_name(name) != canonicalize_name(own))
            and _PLAIN_PIN.fullmatch(f"{name}=={version}")
        ]
        if not specs:
            return []
        over = f" over {sig.key.replace(',', ', ')}" if sig.key else ""
        return [
            Candidate(
                [Atom("pip_constraint", {"constraints": specs})],
                "rule",
                why=f"pip's resolver backtracked{over}; uv resolved the same requirements on the host for Python "
                f"{self.python}, and its {len(specs)} versions leave pip nothing to search",
            )
        ]

    def _database_context(self) -> dict[str, str]:
        """``database``: the one SQL server kind the code's client libraries talk to (the plan's
        service_clients hint), for a unit whose fix is that server (a database URL read from an
        unset variable). Nothing when there is none, or more than one."""
        # (a loop double may have no graph, or one without nodes)
        nodes = getattr(getattr(self, "graph", None), "nodes", None)
        target = nodes.get("target:tests") if isinstance(nodes, dict) else None
        clients = (target.attrs.get("service_clients") if target is not None else None) or {}
        sql = sorted(kind for kind in clients if kind in SQL_SERVERS)
        return {"database": sql[0]} if len(sql) == 1 else {}

    def _plan_specs(self) -> dict[str, str]:
        return {
            n.name: install_spec(n.attrs.get("spec", n.name), n.attrs.get("pinned") or n.attrs.get("resolved"))
            for n in self.graph.of_type("PACKAGE")
            if n.action == "pip"
        }

    def _declared_distributions(self) -> set[str]:
        """Distributions the repository itself declares (not guessed from an import)."""
        return {
            n.name for n in self.graph.of_type("PACKAGE") if n.action == "pip" and n.attrs.get("source") != "import"
        }

    def _prefer_installed(self, sig: Signature, cands: list[Candidate]) -> list[Candidate]:
        """When a distribution the repository declares already provides the module, never
        install another distribution for it; if another one is installed too (an import guessed
        the original of a fork), leaving that one out comes first."""
        if sig.kind not in PROVIDER_KINDS or not sig.key or not self.providers.get(sig.key):
            return cands
        from packaging.utils import canonicalize_name

        installed = {canonicalize_name(p) for p in self.providers[sig.key]}
        # a bare name that is installed already installs nothing: the trial would only run the
        # tests again (faststream.broker missing from the faststream installed)
        cands = [c for c in cands if not _reinstalls_only(c, installed)]
        declared = {canonicalize_name(d) for d in self._declared_distributions()}
        own = installed & declared
        if not own:
            return cands

        def installs_other(c: Candidate) -> bool:
            for a in c.atoms:
                if a.kind == "pip_install":
                    for spec in a.args["packages"]:
                        name = spec_name(spec)
                        if name not in own:
                            return True
            return False

        out = [c for c in cands if not installs_other(c)]
        others = sorted(installed - own)
        if others:
            out.insert(
                0,
                Candidate(
                    [Atom("drop_package", {"manager": "pip", "packages": others})],
                    "rule",
                    why=f"{', '.join(sorted(own))} (declared) provides {sig.key}; "
                    f"{', '.join(others)} installs the same module over it",
                ),
            )
        return out


def _reinstalls_only(cand: Candidate, installed: set[NormalizedName]) -> bool:
    """Whether the candidate only asks pip for distributions in ``installed`` by their bare
    names (no version, extra, marker or URL), which pip and uv answer "already satisfied"."""
    packages = [p for a in cand.atoms if a.kind == "pip_install" for p in a.args["packages"]]
    return (
        bool(packages)
        and all(a.kind == "pip_install" for a in cand.atoms)
        and all(re.fullmatch(_BARE_NAME, p.strip()) and spec_name(p) in installed for p in packages)
    )
