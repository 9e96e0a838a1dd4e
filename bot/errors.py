"""One error hierarchy. Each kind of failure has its own exit code and a message that says
what failed and what to do next (see docs/architecture.md, "Errors")."""

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

    def __init__(self, what: str, fix: str = "", *, argv: list[str] | None = None,
                 exit_code: int | None = None, stdout: str = "", stderr: str = "") -> None:
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
