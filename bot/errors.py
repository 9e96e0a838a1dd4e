"""One error hierarchy. Each kind of failure has its own exit code and a message that says
what failed and what to do next (see docs/architecture.md, "Errors").

The exit codes are one table shared by every command (``EXIT_CODES``; the README documents it):

  0    success at or above the verdict gate (publish.min_verdict)
  1    internal error (a bug in setupbot: run with --debug and report it)
  2    bad configuration            3    bad input (not a repository, unreadable file)
  4    container engine unavailable 5    image build failed        6    image unavailable
  7    budget exhausted             8    LLM failed               9    experience store failed
  10   GitHub error
  20   unresolved: no replayed success
  21   below the gate: replayed, but the verdict is under publish.min_verdict (or no test ran)
  22   regression: the change breaks the environment the base branch had (github, fail-on)
  23   not supported: no registered ecosystem recognises the repository ("not supported yet:
       found package.json, go.mod"); nothing was planned, written or published
  130  interrupted (SIGINT / SIGTERM); outputs written so far are kept
"""

from __future__ import annotations

import textwrap


class SetupbotError(Exception):
    """Base class. ``what`` says what failed, ``fix`` what the user can do about it."""

    exit_code = 1

    def __init__(self, what: str, fix: str = "") -> None:
        self.what = textwrap.dedent(what).strip()
        self.fix = textwrap.dedent(fix).strip()
        super().__init__(self.what)

    def render(self) -> str:
        text = f"setupbot: error: {self.what}"
        if self.fix:
            text += "\n" + textwrap.indent(self.fix, "  ")
        return text


class ConfigError(SetupbotError):
    """Bad configuration: unknown key, wrong type, missing required value."""

    exit_code = 2


class InputError(SetupbotError):
    """The repository or an input file cannot be used at all (not: a malformed manifest,
    which is a warning and the run goes on)."""

    exit_code = 3


class EngineError(SetupbotError):
    """The container engine failed or is unreachable. Keeps argv, exit code and output tails."""

    exit_code = 4

    def __init__(
        self,
        what: str,
        fix: str = "",
        *,
        argv: list[str] | None = None,
        exit_code: int | None = None,
        stdout: str = "",
        stderr: str = "",
    ) -> None:
        super().__init__(what, fix)
        self.argv = list(argv or [])
        self.returncode = exit_code
        self.stdout_tail = stdout[-4000:]
        self.stderr_tail = stderr[-4000:]

    def render(self) -> str:
        text = super().render()
        if self.argv:
            text += f"\n  command: {' '.join(self.argv)}"
        if self.returncode is not None:
            text += f"\n  exit code: {self.returncode}"
        if self.stderr_tail.strip():
            tail = "\n".join(self.stderr_tail.strip().splitlines()[-15:])
            text += "\n  stderr (tail):\n" + textwrap.indent(tail, "    ")
        return text


class BuildError(EngineError):
    """An image build failed."""

    exit_code = 5


class ImageUnavailableError(EngineError):
    """A base or service image is not present and cannot be pulled or bootstrapped."""

    exit_code = 6


class BudgetExceeded(SetupbotError):
    """A step, token or wall-clock budget ran out."""

    exit_code = 7


class LLMError(SetupbotError):
    """The LLM endpoint failed after retries; callers fall back to the deterministic path."""

    exit_code = 8


class KnowledgeError(SetupbotError):
    """The experience store cannot be opened or a unit is invalid."""

    exit_code = 9


class GitHubError(SetupbotError):
    """A GitHub API call failed after retries, or an action was refused (e.g. a branch the bot
    does not own)."""

    exit_code = 10


class SetupFailed(SetupbotError):
    """The run ended without a replayed success. Not a crash: the report says what remains."""

    exit_code = 20


class BelowGate(SetupbotError):
    """The clean replay passed, but the verdict is below ``publish.min_verdict`` (this includes
    a replay that ran no test at all)."""

    exit_code = 21


class Regression(SetupbotError):
    """A pull request breaks the environment that the base branch's verified plan had."""

    exit_code = 22


class NotSupported(SetupbotError):
    """No registered ecosystem (bot.ecosystems.REGISTRY) recognises the repository. Not a
    failure of the run: nothing was planned, no Dockerfile written, no pull request opened.
    ``markers`` are the other ecosystems' manifests found (``package.json``, ``go.mod``)."""

    exit_code = 23

    def __init__(self, what: str, fix: str = "", *, markers: list[str] | None = None) -> None:
        super().__init__(what, fix)
        self.markers = list(markers or [])


class Interrupted(SetupbotError):
    """SIGINT or SIGTERM: the run stopped, wrote what it had and cleaned up."""

    exit_code = 130


EXIT_CODES: dict[int, str] = {
    0: "success at or above the verdict gate",
    1: "internal error",
    ConfigError.exit_code: "bad configuration",
    InputError.exit_code: "bad input",
    EngineError.exit_code: "container engine unavailable or failed",
    BuildError.exit_code: "image build failed",
    ImageUnavailableError.exit_code: "image unavailable",
    BudgetExceeded.exit_code: "budget exhausted",
    LLMError.exit_code: "LLM failed",
    KnowledgeError.exit_code: "experience store failed",
    GitHubError.exit_code: "GitHub error",
    SetupFailed.exit_code: "unresolved: no replayed success",
    BelowGate.exit_code: "below the verdict gate (or no test ran)",
    Regression.exit_code: "regression against the base branch's environment",
    NotSupported.exit_code: "not supported: no registered ecosystem recognises the repository",
    Interrupted.exit_code: "interrupted",
}
