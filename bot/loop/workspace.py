"""One workspace: an image built from the compiled Dockerfile, the sibling services the graph
asks for (on a private network), and a runner container on that image."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bot import progress
from bot.compile.dockerfile import without_dev_stage
from bot.errors import SetupbotError
from bot.loop.devstage import DevStageBuild, dev_packages, dev_part, on_base, on_image
from bot.loop.diagnose import diagnose
from bot.loop.state import LoopBase
from bot.loop.target import TargetOutcome
from bot.services import ServiceSpec, forward_targets, start_localhost_forwarding

log = logging.getLogger(__name__)


def start_services(manager: Any, reqs: Sequence[Any], ci_env: Mapping[str, str], traj: Any, warnings: list[str]) -> Any:
    """Start ``reqs`` with ``manager``, record the "services" step in ``traj``, and say in
    ``warnings`` (the report) each service the repository declares that could not be started.
    The Python loop and the Rust loop both start their services through this."""
    t0 = time.monotonic()
    started = manager.start(reqs, ci_env=dict(ci_env))
    traj.record(
        "services",
        command=[getattr(o, "name", "?") for o in started.outcomes],
        duration=time.monotonic() - t0,
        outcome="ok" if started.all_healthy else "unhealthy",
        detail={"services": [o.to_json() for o in started.outcomes]},
    )
    for o in started.outcomes:
        if getattr(o, "healthy", True):
            continue
        note = (
            f"service {getattr(o, 'name', '?')} ({getattr(o, 'requested_image', '') or getattr(o, 'kind', '')}) "
            f"was not started: {getattr(o, 'note', '') or 'not healthy'}"
        )
        if note not in warnings:
            warnings.append(note)
    return started


class ServicesBeside:
    """A workspace's services, started in a thread while its image builds. ``result`` waits
    for them and gives the target's environment and their network, or raises in the run's own
    thread what starting them raised there."""

    def __init__(self, start: Callable[[], tuple[dict[str, str], str | None]]) -> None:
        self._result: tuple[dict[str, str], str | None] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(start,), name="setupbot-services", daemon=True)
        self._thread.start()

    def _run(self, start: Callable[[], tuple[dict[str, str], str | None]]) -> None:
        try:
            self._result = start()
        except BaseException as exc:  # noqa: BLE001 - raised again where the run waits for them
            self._error = exc

    def result(self) -> tuple[dict[str, str], str | None]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


class Workspace:
    def __init__(self, tag: str, dockerfile: Any) -> None:
        self.tag = tag
        self.dockerfile = dockerfile
        self.stack = contextlib.ExitStack()
        self.session: Any = None
        self.env: dict[str, str] = {}
        self.target_env: dict[str, str] = {}
        self.forwards: list[str] = []  # LISTEN:ALIAS:PORT relayed from the runner's localhost
        self.outcome = TargetOutcome("build")
        # built with no step from the engine's cache (as a --no-cache build would be), and the
        # outcome of the first test run in its fresh container: together a clean replay of
        # this Dockerfile while no trial has touched them (bot.loop.replay)
        self.from_scratch = False
        self.first: TargetOutcome | None = None
        self.build_seconds = 0.0

    def close(self) -> None:
        try:
            self.stack.close()
        except SetupbotError as exc:
            log.warning("cleanup: %s", exc.what)


class WorkspaceMixin(LoopBase):
    """Opens workspaces for the loop: build, services, runner, and the first evaluation."""

    def _plan_env(self) -> dict[str, str]:
        env = dict(self.plan.env)
        env.update(dict(self.settings.target.env or {}))
        return env

    def _pin_base(self) -> None:
        """Make the base image present through the image source and record where it came from:
        a registry image's digest pins the generated FROM; a stand-in has none."""
        rt = getattr(self.graph, "runtime", None)
        resolve = getattr(self.engine, "resolve_image", None)
        image = rt.attrs.get("base_image") if rt is not None else None
        if rt is None or not image or resolve is None:
            return
        if rt.attrs.get("base_resolved") == image:
            return
        resolved = resolve(image)
        rt.attrs.update(base_digest=resolved.digest, base_origin=resolved.origin, base_resolved=image)

    # -- one workspace ----------------------------------------------------------------------
    def _service_requirements(self) -> list[Any]:
        """The services the graph holds: the plan's and those a kept repair started."""
        return list(self.plan.services)

    def open_workspace(self, *, no_cache: bool = False, purpose: str = "build") -> Workspace:
        progress.current().stage(purpose)
        self.budget.spend_step()
        self._pin_base()
        dockerfile = self.compile(self.graph)
        self.n_builds += 1
        tag = f"setupbot-loop-{self.record.run_id}:{'replay' if no_cache else 'work'}-{self.n_builds}"
        ws = Workspace(tag, dockerfile)
        started = time.monotonic()
        # the loop builds and tests the tested stage; the development stage (git, the user) is
        # built once, on the tested stage's base image beside this first build (bot.loop.devstage)
        text = without_dev_stage(dockerfile.text)
        if self._dev_build is None and text != dockerfile.text:
            self._start_dev_stage(dockerfile.text, tag.rsplit(":", 1)[0] + f":dev-{self.n_builds}")
        beside = self._services_beside(ws)
        build = self.engine.build(self.repo, text, tag, no_cache=no_cache, timeout=self._build_timeout())
        self.budget.measured(build=build.seconds)
        if getattr(build, "limits_note", "") and build.limits_note not in self.record.warnings:
            self.record.warnings.append(build.limits_note)
        self.record.timings["build_seconds"] = self.record.timings.get("build_seconds", 0.0) + build.seconds
        sigs = diagnose(build.log) if not build.ok else []
        self.traj.record(
            purpose,
            command=["build", tag] + (["--no-cache"] if no_cache else []),
            exit_code=0 if build.ok else 1,
            output_tail=build.log[-2000:],
            duration=time.monotonic() - started,
            outcome="ok" if build.ok else "failed",
            detail={"signatures": [s.to_json() for s in sigs], "cached_steps": getattr(build, "cached_steps", None)},
        )
        if not build.ok:
            if beside is not None:
                with contextlib.suppress(SetupbotError):  # the build's failure is the outcome
                    beside.result()
                ws.close()
            ws.outcome = TargetOutcome("build", sigs, log=build.log, note="the image build failed")
            return ws
        if self._dev_build is None and text != dockerfile.text:
            # the tested stage starts from another stage: the development stage on this image
            self._dev_build = self._dev_stage_build(dockerfile.text, tag.rsplit(":", 1)[0] + f":dev-{self.n_builds}")
        elif no_cache and text != dockerfile.text:
            self._dev_on_replay(dockerfile.text, tag)
        if not self._start_runner(ws, purpose, beside=beside):
            return ws
        ws.from_scratch = not no_cache and getattr(build, "cached_steps", None) == 0
        ws.build_seconds = build.seconds
        return ws

    def _start_dev_stage(self, text: str, tag: str) -> None:
        """The development stage alone on the tested stage's base image, beside the first build
        (``devstage.on_base``); nothing when that base is another stage (it waits for the image)."""
        alone = on_base(text)
        if alone is None:
            return
        build_text, base = alone
        self._dev_build = self._dev_stage_build(
            text, tag, build_text=build_text, on=f"the tested stage's base image ({base}), beside the run's first build"
        )

    def _dev_on_replay(self, text: str, tag: str) -> None:
        """A clean replay whose development stage is not the one built beside the run's first
        build (a repair put git into the tested stage, so the stage no longer installs it): the
        stage is built on the replay's image beside its tests, instead of after them when the
        run settles it. One still running is left to finish."""
        running = self._dev_build
        if running is not None and (dev_part(running.text) == dev_part(text) or not running.done()):
            return
        self._dev_build = self._dev_stage_build(
            text,
            tag.rsplit(":", 1)[0] + f":dev-{self.n_builds}",
            build_text=on_image(text, tag),
            on="the clean replay's image, beside its tests",
        )

    def _dev_stage_build(self, text: str, tag: str, **where: str) -> DevStageBuild:
        """The development stage's build of ``text`` as ``tag``, started in its thread."""
        return DevStageBuild(
            self.engine, self.repo, text, tag, dev_packages(self.graph), timeout=self._build_timeout(), **where
        )

    def open_on_image(self, tag: str, *, purpose: str) -> Workspace:
        """A workspace on image ``tag``, which this run built from the graph's Dockerfile: a
        fresh runner container and services, and the first evaluation in it."""
        progress.current().stage(purpose)
        self.budget.spend_step()
        ws = Workspace(tag, self.compile(self.graph))
        self._start_runner(ws, purpose)
        return ws

    def _services_beside(self, ws: Workspace) -> ServicesBeside | None:
        """The workspace's services, started beside its image build: they do not depend on the
        image, and each build otherwise waited for their health probes after it (django-tasks:
        11 s for MariaDB and PostgreSQL before each runner). None when the graph holds none."""
        if not self._service_requirements():
            return None
        env = self._plan_env()
        return ServicesBeside(lambda: (env, self._start_services(ws, env)))

    def _start_runner(self, ws: Workspace, purpose: str = "build", beside: ServicesBeside | None = None) -> bool:
        """Start ``ws``'s services (or take those started beside its build) and runner
        container on its image and evaluate the target there; False (the outcome says why) when
        the runner did not start. The progress line says the tests run (a long suite otherwise
        shows as the build, for many minutes)."""
        try:
            if beside is not None:
                env, network = beside.result()
            else:
                env = self._plan_env()
                network = self._start_services(ws, env)
            ws.env = env
            ws.session = ws.stack.enter_context(self.engine.session(ws.tag, env=env, network=network))
        except SetupbotError as exc:
            ws.close()
            ws.outcome = TargetOutcome("build", [], log=exc.render(), note=f"the runner did not start: {exc.what}")
            self.traj.record("start", outcome="failed", output_tail=exc.render())
            return False
        progress.current().stage(purpose, "the tests")
        ws.outcome = self.evaluate(ws)
        ws.first = ws.outcome
        return True

    def _start_services(self, ws: Workspace, env: dict[str, str]) -> str | None:
        """Start the services the graph holds on a private network (closed with the workspace)
        and add their wiring to ``env``; returns the network, or None when none is needed."""
        reqs = self._service_requirements()
        if not reqs:
            return None
        network = ws.stack.enter_context(self.engine.network())
        manager = ws.stack.enter_context(self.service_manager(self.engine, network))
        started = start_services(manager, reqs, env, self.traj, self.record.warnings)
        env.update(started.env)
        # CI reaches services on localhost: relay 127.0.0.1/::1 to each sibling
        ws.forwards = forward_targets(started.outcomes, [ServiceSpec.from_any(r) for r in reqs])
        return network

    def _build_timeout(self) -> int:
        """An image build is cut where its phase's time ends (like every command)."""
        limit = int(getattr(self.settings.engine, "build_timeout", 1800) or 1800)
        return max(1, min(limit, int(self.budget.room(final=self._final))))

    def _exec(self, ws: Workspace, argv: list[str], action: str, env: Mapping[str, str] | None = None) -> Any:
        snap = str(getattr(ws.session, "depth", ""))
        t0 = self.budget.now()
        res = ws.session.exec(
            argv,
            env=dict(env or ws.target_env) or None,
            timeout=self.budget.timeout_for_command(final=self._final),
            # the tests' own caches and reports are made again in a fresh container: a run of
            # them leaves nothing that a snapshot must keep (bot.engine.session)
            changes=action not in ("collect", "test"),
        )
        if action == "trial":
            self.budget.measured(command=self.budget.now() - t0)
        self.traj.record(
            action,
            command=list(argv),
            exit_code=res.exit_code,
            output_tail=res.output[-2000:],
            duration=res.duration,
            snapshot=snap,
            outcome="timeout" if res.timed_out else ("ok" if res.exit_code == 0 else "failed"),
        )
        return res

    def _ensure_forwarding(self, ws: Workspace) -> None:
        """The localhost relay runs in the runner (a rolled-back container has none)."""
        if not start_localhost_forwarding(ws.session, ws.forwards):
            note = "localhost forwarding to the services did not start; tests must use the service names"
            if note not in self.record.warnings:
                self.record.warnings.append(note)
