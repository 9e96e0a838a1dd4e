"""The judge: re-checks each charge with one or two commands of its own, in its own fresh
container, and rules. A charge is dismissed when

  optional_dependency  it is about a dependency the project declares optional (an extra) or
                       imports inside ``try/except ImportError``
  own_assertion        the failing tests fail on the repository's own assertions, not on the
                       environment (the code ran and gave a different answer)
  external_cause       the failure is the network to a host that is not reachable from here
                       (DNS, unreachable network, proxy), which no setup can fix
  not_reproduced       the judge's own re-run of the command passes

and upheld otherwise (``reproduced``). Every ruling keeps the commands the judge ran.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.logtext import OUTSIDE_NETWORK
from bot.verify.facts import RepoFacts
from bot.verify.prosecutor import Charge, Executor, run, tail

UPHELD, DISMISSED = "upheld", "dismissed"

OPTIONAL_DEPENDENCY = "optional_dependency"
OWN_ASSERTION = "own_assertion"
EXTERNAL_CAUSE = "external_cause"
NOT_REPRODUCED = "not_reproduced"
REPRODUCED = "reproduced"

# Network failures to hosts outside (bot.logtext) and a missing GPU: no environment can fix them,
# so they do not count against it
EXTERNAL_PATTERNS = re.compile(
    OUTSIDE_NETWORK.pattern + r"|CUDA (?:is )?not available|requires? (?:a )?GPU|no GPU", re.IGNORECASE
)

ASSERTION_PATTERNS = re.compile(
    r"^(?:AssertionError|assert |E\s+assert |Failed: DID NOT RAISE|AssertionError:)"
    r"|^(?:[\w.]+\.)?(?:AssertionError|assert)\b|(?:^|\s)assert .* ==|DID NOT RAISE|DID NOT WARN"
    r"|^(?:Expected|Regex pattern did not match)",
    re.IGNORECASE | re.MULTILINE,
)

ENVIRONMENT_PATTERNS = re.compile(
    r"ModuleNotFoundError|ImportError|No module named|OperationalError|Connection refused"
    r"|ConnectionRefusedError|command not found|No such file or directory: '[^']*(?:bin|lib)"
    r"|cannot open shared object|undefined symbol|DLL load failed|OSError: .*lib",
    re.IGNORECASE,
)


@dataclass
class Ruling:
    charge_id: str
    kind: str
    decision: str
    rule: str
    reason: str
    commands: list[dict[str, Any]] = field(default_factory=list)
    upheld_tests: list[str] = field(default_factory=list)
    dismissed_tests: dict[str, str] = field(default_factory=dict)

    @property
    def upheld(self) -> bool:
        return self.decision == UPHELD

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _record(res: Any) -> dict[str, Any]:
    return {
        "argv": res.argv,
        "exit_code": res.exit_code,
        "timed_out": res.timed_out,
        "output_tail": tail(res.output, 8, 1200),
    }


def _module_of(error: str) -> str | None:
    m = re.search(r"No module named '([\w.]+)'", error)
    return m.group(1).split(".")[0] if m else None


def is_optional(charge: Charge, facts: RepoFacts) -> str | None:
    """Why the charge is about an optional dependency, or None."""
    dist = charge.details.get("dist")
    module = charge.details.get("module")
    missing = _module_of(charge.evidence)
    if dist and dist in facts.optional:
        return f"{dist} is only required by an extra"
    if charge.details.get("own"):
        # the project itself failing to import is never optional; unless what it misses is
        if missing and missing in facts.guarded_imports and missing != module:
            return f"{missing} is imported inside try/except ImportError"
        return None
    for name in (module, missing):
        if name and name in facts.guarded_imports:
            return f"{name} is imported inside try/except ImportError"
    if charge.kind == "entry_point_failed" and missing:
        from packaging.utils import canonicalize_name

        if canonicalize_name(missing) in facts.optional or missing in facts.guarded_imports:
            return f"the command needs {missing}, which the project declares optional"
    return None


def classify_failure(message: str) -> str:
    """'external', 'assertion', 'environment' or 'unknown' for one failing test's message."""
    if EXTERNAL_PATTERNS.search(message):
        return "external"
    if ENVIRONMENT_PATTERNS.search(message):
        return "environment"
    if ASSERTION_PATTERNS.search(message):
        return "assertion"
    return "unknown"


def junit_to_nodeid(test_id: str, repo: Path | None) -> str | None:
    """'tests.test_db.TestX::test_a' -> 'tests/test_db.py::TestX::test_a', when the file is
    found in the repository."""
    classname, _, name = test_id.rpartition("::")
    if not classname:
        return None
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if repo is None or (repo / path).is_file():
            return "::".join([path, *parts[cut:], name])
    return None


class Judge:
    def __init__(
        self,
        executor: Executor,
        facts: RepoFacts,
        *,
        python: str = "python",
        repo: Path | None = None,
        test_command: Iterable[str] | None = None,
    ) -> None:
        self.executor = executor
        self.facts = facts
        self.python = python
        self.repo = repo
        self.test_command = list(test_command or [python, "-m", "pytest"])

    def rule(self, charge: Charge) -> Ruling:
        handler = getattr(self, f"_rule_{charge.kind}", self._rule_rerun)
        return handler(charge)

    def _ruling(
        self, charge: Charge, decision: str, rule: str, reason: str, commands: Sequence[Any] = (), **kw: Any
    ) -> Ruling:
        return Ruling(charge.id, charge.kind, decision, rule, reason, [_record(c) for c in commands], **kw)

    def _rerun(self, charge: Charge, timeout: int = 120) -> Any | None:
        if not charge.command or "<import probe>" in charge.command:
            return None
        return run(self.executor, charge.command, timeout=timeout)

    def _rule_rerun(self, charge: Charge) -> Ruling:
        """Shared by import, entry point and pip check charges."""
        why = is_optional(charge, self.facts)
        if why:
            return self._ruling(charge, DISMISSED, OPTIONAL_DEPENDENCY, why)
        res = self._rerun(charge)
        evidence = charge.evidence + ("\n" + res.output if res else "")
        if EXTERNAL_PATTERNS.search(evidence):
            return self._ruling(
                charge,
                DISMISSED,
                EXTERNAL_CAUSE,
                "the failure is the network to a host that is not reachable",
                [res] if res else [],
            )
        if res is not None and res.exit_code == 0 and not res.timed_out:
            return self._ruling(charge, DISMISSED, NOT_REPRODUCED, "the judge's re-run passed", [res])
        return self._ruling(
            charge, UPHELD, REPRODUCED, "reproduced" if res else "the evidence stands", [res] if res else []
        )

    def _rule_pip_check(self, charge: Charge) -> Ruling:
        res = self._rerun(charge)
        if res is not None and res.exit_code == 0:
            return self._ruling(charge, DISMISSED, NOT_REPRODUCED, "pip check is clean on re-run", [res])
        problems = [
            p
            for p in (res.output if res else charge.evidence).splitlines()
            if " requires " in p or " has requirement " in p
        ]
        # A conflict only about distributions the project lists as optional is not the project's
        optional = self.facts.optional

        def about_optional(line: str) -> bool:
            from packaging.utils import canonicalize_name

            words = re.findall(r"[A-Za-z0-9][A-Za-z0-9._-]*", line)
            return bool(words) and canonicalize_name(words[0]) in optional

        if problems and all(about_optional(p) for p in problems):
            return self._ruling(
                charge,
                DISMISSED,
                OPTIONAL_DEPENDENCY,
                "every conflict is in a distribution the project declares optional",
                [res] if res else [],
            )
        # the reviewer reads which: pip's own lines, the first two, each clipped
        named = "; ".join(p.strip().rstrip(".")[:160] for p in problems[:2])
        more = f" (+{len(problems) - 2} more)" if len(problems) > 2 else ""
        count = (
            "1 dependency conflict remains"
            if len(problems) == 1
            else f"{len(problems) or 'some'} dependency conflicts remain"
        )
        return self._ruling(
            charge, UPHELD, REPRODUCED, count + (f": {named}{more}" if named else ""), [res] if res else []
        )

    def _rule_tests_failed(self, charge: Charge) -> Ruling:
        messages: dict[str, str] = charge.details.get("messages") or {}
        upheld: list[str] = []
        dismissed: dict[str, str] = {}
        for test, message in messages.items():
            kind = classify_failure(message)
            if kind == "assertion":
                dismissed[test] = OWN_ASSERTION
            elif kind == "external":
                dismissed[test] = EXTERNAL_CAUSE
            else:
                upheld.append(test)
        commands = []
        # re-run one or two of the environment's failures: a flaky one is dismissed
        for test in list(upheld[:2]):
            nodeid = junit_to_nodeid(test, self.repo)
            if nodeid is None:
                continue
            res = run(self.executor, [*self.test_command, "-q", "-p", "no:cacheprovider", nodeid], timeout=300)
            commands.append(res)
            if res.exit_code == 0:
                upheld.remove(test)
                dismissed[test] = NOT_REPRODUCED
        if not upheld:
            rules = sorted(set(dismissed.values()))
            return self._ruling(
                charge,
                DISMISSED,
                rules[0] if len(rules) == 1 else "+".join(rules),
                f"{len(dismissed)} failing tests are not the environment's fault",
                commands,
                dismissed_tests=dismissed,
            )
        return self._ruling(
            charge,
            UPHELD,
            REPRODUCED,
            f"{len(upheld)} tests fail because of the environment ({len(dismissed)} dismissed)",
            commands,
            upheld_tests=upheld,
            dismissed_tests=dismissed,
        )

    def _collect(self) -> Any:
        """pytest's collection; another runner has none, so its command runs as it is (unittest's
        and Django's "Ran N tests" then say what it found)."""
        if not any("pytest" in part for part in self.test_command[:3]):
            return run(self.executor, list(self.test_command), timeout=300)
        return run(self.executor, [*self.test_command, "--collect-only", "-q", "-p", "no:cacheprovider"], timeout=300)

    def _rule_lifecycle_incomplete(self, charge: Charge) -> Ruling:
        if charge.details.get("reason") == "not run":
            return self._ruling(charge, UPHELD, REPRODUCED, "the tests were not run")
        res = self._collect()
        if EXTERNAL_PATTERNS.search(res.output) and res.exit_code != 0:
            return self._ruling(
                charge, DISMISSED, EXTERNAL_CAUSE, "collection itself needs a host that is not reachable", [res]
            )
        return self._ruling(
            charge,
            UPHELD,
            REPRODUCED,
            "collection "
            + ("works but the run did not finish" if res.exit_code == 0 else f"fails too (exit {res.exit_code})"),
            [res],
        )

    def _rule_no_tests(self, charge: Charge) -> Ruling:
        res = self._collect()
        m = re.search(r"(\d+) tests? collected", res.output) if res.exit_code == 0 else None
        # another runner ran its tests: "Ran N tests" counts them whatever they answered
        m = m or re.search(r"^Ran (\d+) tests? in ", res.output, re.M)
        if m and int(m.group(1)) > 0:
            return self._ruling(charge, DISMISSED, NOT_REPRODUCED, f"collection finds {m.group(1)} tests", [res])
        return self._ruling(charge, UPHELD, REPRODUCED, "no test is collected", [res])

    def _rule_all_skipped(self, charge: Charge) -> Ruling:
        messages = charge.details.get("skip_messages") or []
        if messages and all(EXTERNAL_PATTERNS.search(m) for m in messages):
            return self._ruling(charge, DISMISSED, EXTERNAL_CAUSE, "every skip is for something outside (network, GPU)")
        return self._ruling(charge, UPHELD, REPRODUCED, "nothing was tested")


def judge(executor: Executor, facts: RepoFacts, charges: Iterable[Charge], **kw: Any) -> list[Ruling]:
    """Rule on each charge, in order."""
    j = Judge(executor, facts, **kw)
    return [j.rule(c) for c in charges]
