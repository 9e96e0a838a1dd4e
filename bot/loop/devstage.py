"""The Dockerfile's development stage (bot.compile.dockerfile ``_dev_steps``): git and the
non-root user on top of the tested stage. The loop builds, tests and replays the tested stage
alone; this stage is built once, on the tested stage's base image, in a thread beside the run's
first build, and the Debian packages it installed are pinned to the versions it got (issue 16).

What it installs does not depend on the Python packages below it: the same instructions on the
same base image and Debian archive. So one build on the base image proves it for the final
tested image too, and no run waits for it after its first tests; a run whose development stage
changed since (other packages, another base image) builds it again on the final image."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.compile.dockerfile import DEV_STAGE_FROM, without_dev_stage
from bot.engine.dockerfile import from_lines
from bot.errors import EngineError, SetupbotError
from bot.graph.model import DEV_STAGE, TESTED_STAGE, DepGraph, dev_stage_only
from bot.loop.lock import DPKG_FORMAT, parse_dpkg_output


def has_dev_stage(text: str) -> bool:
    return without_dev_stage(text) != text


def dev_part(text: str) -> tuple[str, str]:
    """What the development stage's build depends on besides the tested image: the tested
    stage's base image (its FROM line; a builder stage before it does not count) and the
    stage's own instructions."""
    froms = [line.strip() for line in text.splitlines() if line.startswith("FROM ")]
    tested = next((line for line in froms if line.endswith(f" AS {TESTED_STAGE}")), froms[0] if froms else "")
    return tested, _dev_text(text)


def _dev_text(text: str) -> str:
    """The development stage's own part of the compiled Dockerfile (empty when it has none)."""
    return text[len(without_dev_stage(text)) :]


def on_image(text: str, tag: str) -> str:
    """The development stage of ``text`` alone, on the built image ``tag`` of its tested stage:
    what ``FROM {TESTED_STAGE} AS {DEV_STAGE}`` builds, without building that stage again."""
    return _dev_text(text).replace(DEV_STAGE_FROM, f"FROM {tag} AS {DEV_STAGE}", 1)


def on_base(text: str) -> tuple[str, str] | None:
    """The development stage of ``text`` alone, on the image its tested stage starts from, and
    that image; None when that FROM names another stage. Built beside the run's first build: the
    stage installs the same packages from the same archive whatever lies between (the Python
    packages of the tested stage), so it does not wait for that build."""
    tested, lines = dev_part(text)[0], text.splitlines()
    base = next((f for f in from_lines(text) if lines[f.index].strip() == tested), None)
    if base is None or base.stage_ref or base.image == "scratch":
        return None
    return on_image(text, base.image), base.image


def dev_packages(graph: DepGraph) -> list[str]:
    """The Debian packages only the development stage installs."""
    return sorted(n.name for n in graph.of_type("SYSTEMLIB") if n.action == "apt" and dev_stage_only(n))


@dataclass
class DevStageOutcome:
    ok: bool
    tag: str
    seconds: float
    log_tail: str = ""
    versions: dict[str, str] = field(default_factory=dict)  # Debian package -> installed version
    on: str = ""  # which tested image it was built on, in words

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "tag": self.tag,
            "on": self.on,
            "seconds": round(self.seconds, 3),
            "versions": dict(sorted(self.versions.items())),
            **({"log_tail": self.log_tail} if self.log_tail else {}),
        }


def build_dev_stage(
    engine: Any, repo: Path, text: str, tag: str, packages: list[str], timeout: float | None = None
) -> DevStageOutcome:
    """Build the whole Dockerfile ``text`` (its last stage is the development one) as ``tag``,
    with the engine's cache, and read the versions of ``packages`` it installed."""
    t0 = time.monotonic()
    try:
        build = engine.build(repo, text, tag, timeout=timeout)
    except EngineError:
        raise  # the engine failed, not the stage: the run ends, as on any other build
    except SetupbotError as exc:
        return DevStageOutcome(False, tag, time.monotonic() - t0, exc.what)
    if not build.ok:
        tail = " ".join(build.log.strip().splitlines()[-3:])[:400]
        return DevStageOutcome(False, tag, time.monotonic() - t0, tail)
    versions: dict[str, str] = {}
    if packages:
        try:
            r = engine.run_once(tag, ["dpkg-query", "-W", "-f", DPKG_FORMAT, *packages], timeout=120)
        except SetupbotError as exc:
            return DevStageOutcome(True, tag, time.monotonic() - t0, f"versions not read: {exc.what}")
        versions = {k: v for k, v in parse_dpkg_output(r.output).items() if k in packages}
    return DevStageOutcome(True, tag, time.monotonic() - t0, versions=versions)


class DevStageBuild:
    """One development-stage build running in a daemon thread (the engine's builds are separate
    processes, so it runs beside the replay's tests; an interrupted run does not wait for it)."""

    def __init__(
        self,
        engine: Any,
        repo: Path,
        text: str,
        tag: str,
        packages: list[str],
        timeout: float | None = None,
        *,
        build_text: str | None = None,
        on: str = "the run's first tested image, beside its tests",
    ) -> None:
        self.text = text  # the whole compiled Dockerfile it stands for (``dev_part`` compares it)
        self.on = on
        self._outcome: DevStageOutcome | None = None
        self._engine_error: EngineError | None = None
        self._thread = threading.Thread(
            target=self._run,
            args=(engine, repo, build_text or text, tag, packages, timeout),
            name="setupbot-dev-stage",
            daemon=True,
        )
        self._thread.start()

    def _run(self, engine: Any, repo: Path, text: str, tag: str, packages: list[str], timeout: float | None) -> None:
        try:
            self._outcome = build_dev_stage(engine, repo, text, tag, packages, timeout)
        except EngineError as exc:
            self._engine_error = exc  # raised where the run waits for the stage (``result``)
        except Exception as exc:  # noqa: BLE001 - the thread's failure is the outcome, never lost
            self._outcome = DevStageOutcome(False, tag, 0.0, f"{type(exc).__name__}: {exc}"[:400])

    def done(self) -> bool:
        """Whether the build has ended (its outcome, or its engine failure, is there to take)."""
        return not self._thread.is_alive()

    def result(self, timeout: float | None = None) -> DevStageOutcome | None:
        """The outcome, or None when it did not finish within ``timeout`` seconds. An engine
        failure in the thread is raised here, in the run's own thread."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            return None
        if self._engine_error is not None:
            raise self._engine_error
        return self._outcome
