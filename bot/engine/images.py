"""Offline base images: ``setupbot images bootstrap`` and what this engine can offer.

No registry may be reachable, so the images generated Dockerfiles name (``python:3.13-slim``,
``debian:bookworm-slim``, service images) are built locally: debootstrap a Debian suite, import
it as ``setupbot/rootfs:<suite>``, then build each stand-in from its recipe (bot.engine.recipes).
A stand-in is labelled with its recipe hash and reused while the hash matches.

Everything is keyed by what shapes it, so a warm engine's bootstrap builds nothing and an empty
one reuses what a cache directory kept (``images.cache_dir``, which CI can carry between runs):
the debootstrap tarball is named by the rootfs recipe hash (suite, variant, mirror, what is
pruned); with ``images.archives`` each imported rootfs and built stand-in is also kept as a
``docker save`` archive named by its hash and loaded into an empty store instead of being
rebuilt. A load keeps the image ID, so the stand-ins built on a loaded base keep their hashes.
"""

from __future__ import annotations

import concurrent.futures
import graphlib
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from bot.config import Settings
from bot.engine.ca import CA_ENV, CA_LABEL
from bot.engine.core import LABEL, Engine
from bot.engine.recipes import (
    ROOTFS_REPOSITORY,
    SUITE_PYTHON,
    ImageRecipe,
    all_recipes,
    core_recipes,
    rootfs_tag,
    service_recipes,
)
from bot.engine.sources import ImageSource
from bot.errors import ConfigError, ImageUnavailableError
from bot.graph.runtime import OFFICIAL_PYTHONS
from bot.hostenv import host_env
from bot.paths import templates_dir
from bot.templating import render_template

log = logging.getLogger(__name__)

STANDIN_LABEL = "setupbot.standin"
RECIPE_LABEL = "setupbot.recipe"
ROOTFS_KEY_LABEL = "setupbot.rootfs.key"
# Bump when the way a rootfs tarball is made changes, so every cached tarball is remade.
ROOTFS_FORMAT = "1"
DEBOOTSTRAP = "/usr/sbin/debootstrap"
DEBOOTSTRAP_SCRIPTS = "/usr/share/debootstrap/scripts"


def DEFAULT_DEBIAN_MIRROR() -> str:
    """debootstrap's own default mirror, read from the installed debootstrap (needed only when
    a SCRIPT argument must follow the MIRROR argument)."""
    try:
        m = re.search(r'^DEF_MIRROR="([^"]+)"', Path(DEBOOTSTRAP).read_text(errors="replace"), re.M)
    except OSError:
        m = None
    if m is None:
        raise ImageUnavailableError("cannot tell debootstrap's default mirror", "Set images.mirror to a Debian mirror.")
    return m.group(1)


# Left out of the rootfs tarball, as the official slim images do (docs, man pages, locales,
# downloaded .debs, apt lists).
_PRUNE = (
    "var/cache/apt/archives",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "usr/share/groff",
    "usr/share/lintian",
)
_KEEP = re.compile(r"^usr/share/doc/[^/]+/copyright$|^usr/share/locale/locale\.alias$")


@dataclass(frozen=True)
class Outcome:
    tag: str
    action: str  # "reused" | "built" | "failed"
    seconds: float
    detail: str = ""


@dataclass(frozen=True)
class OfferedService:
    name: str
    version: str
    image: str
    ports: tuple[int, ...]


def cache_dir(settings: Settings) -> Path:
    configured = settings.images.cache_dir
    path = Path(configured).expanduser() if configured else Path.home() / ".cache" / "setupbot" / "rootfs"
    path.mkdir(parents=True, exist_ok=True)
    return path


# ---------------------------------------------------------------------- what is offered
def available_pythons(engine: Engine) -> list[str]:
    """Every Python the image source offers (bot.engine.sources): the local store's, plus the
    official tags when a registry answers. None at all is an ImageUnavailableError naming the fix."""
    return ImageSource(engine).offered_pythons()


def default_pythons(settings: Settings) -> list[str]:
    """What the engine has (stand-in images) when it answers, else the official list."""
    try:
        found = available_pythons(Engine.from_settings(settings))
        if found:
            return found
    except Exception as exc:  # no engine here: plan against the official tags
        log.debug("engine did not answer for available pythons: %s", exc)
    return list(OFFICIAL_PYTHONS)


def local_pythons(engine: Engine) -> list[str]:
    """Python versions with a ``python:X.Y-slim`` image on this engine (stand-in or official)."""
    versions = set()
    for ref in engine.image_tags("python"):
        m = re.fullmatch(r"python:(\d+\.\d+)-slim", ref)
        if m:
            versions.add(m.group(1))
    return sorted(versions, key=lambda v: tuple(int(p) for p in v.split(".")))


def available_services(engine: Engine) -> list[OfferedService]:
    """Service images from the recipe registry that are present on this engine."""
    offered = []
    for recipe in service_recipes():
        if engine.image_exists(recipe.tag):
            offered.append(OfferedService(recipe.name, recipe.version, recipe.tag, tuple(recipe.ports)))
    return offered


# ---------------------------------------------------------------------- selection
def select_recipes(
    settings: Settings, pythons: Iterable[str] | None = None, services: Iterable[str] | None = None
) -> list[ImageRecipe]:
    """The recipes to build, with everything they build FROM, in dependency order.
    ``None`` means all; unknown names are a ConfigError with the known ones."""
    suites = tuple(settings.images.suites)
    configured = {r.tag: r for r in all_recipes(suites)}
    # the Python of a suite images.suites leaves out is built when named (with its Debian)
    registry = {**{r.tag: r for s in SUITE_PYTHON if s not in suites for r in core_recipes((s,))}, **configured}
    pythons_known = {r.name: r for r in registry.values() if r.kind == "python"}
    services_known: dict[str, list[ImageRecipe]] = {}
    for r in registry.values():
        if r.kind == "service":
            services_known.setdefault(r.name, []).append(r)

    wanted: list[ImageRecipe] = [r for r in configured.values() if r.kind == "debian"]
    default = [r.name for r in configured.values() if r.kind == "python"]
    for version in default if pythons is None else pythons:
        if version not in pythons_known:
            raise ConfigError(
                f"no stand-in recipe for Python {version}",
                f"Choose among: {', '.join(sorted(pythons_known)) or 'none'} (images.suites: {', '.join(suites)}).",
            )
        wanted.append(pythons_known[version])
    for name in services_known if services is None else services:
        if name not in services_known:
            raise ConfigError(
                f"no stand-in recipe for the service {name!r}",
                f"Choose among: {', '.join(sorted(services_known)) or 'none yet'}.",
            )
        wanted.extend(services_known[name])

    closure: dict[str, ImageRecipe] = {}
    stack = list(wanted)
    while stack:
        r = stack.pop()
        if r.tag in closure:
            continue
        closure[r.tag] = r
        if r.base in registry:
            stack.append(registry[r.base])
    # Dependency order; among images that are ready, Debian before Python before services (the
    # Python stand-ins are what most runs wait for).
    rank = {"debian": 0, "python": 1}
    sorter = graphlib.TopologicalSorter({tag: ({r.base} & closure.keys()) for tag, r in closure.items()})
    sorter.prepare()
    order: list[ImageRecipe] = []
    ready: list[ImageRecipe] = []
    while sorter.is_active():
        ready.extend(closure[tag] for tag in sorter.get_ready())
        ready.sort(key=lambda r: (rank.get(r.kind, 2), r.tag))
        chosen = ready.pop(0)
        order.append(chosen)
        sorter.done(chosen.tag)
    return order


# ---------------------------------------------------------------------- rootfs
def rootfs_key(settings: Settings, suite: str) -> str:
    """The rootfs recipe hash: changes with anything that shapes the debootstrap tree."""
    payload = {
        "format": ROOTFS_FORMAT,
        "suite": suite,
        "variant": "minbase",
        "mirror": settings.images.mirror,
        "prune": list(_PRUNE),
        "keep": _KEEP.pattern,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def rootfs_tarball(settings: Settings, suite: str, log_line: Callable[[str], None] = log.info) -> Path:
    """The cached debootstrap tree of ``suite`` as a tarball named by its recipe hash (made
    once, ~30 s per suite); tarballs of the suite's earlier recipes are removed."""
    cache = cache_dir(settings)
    tarball = cache / f"{suite}-{rootfs_key(settings, suite)}.tar"
    if tarball.is_file() and tarball.stat().st_size > 0:
        return tarball
    if not os.path.exists(DEBOOTSTRAP):
        raise ImageUnavailableError(
            f"{suite}: no cached rootfs at {tarball} and debootstrap is not installed",
            "Install it (`apt-get install debootstrap`, as root), or copy a rootfs tarball there.",
        )
    with tempfile.TemporaryDirectory(prefix=f"debootstrap-{suite}-", dir=cache) as tmp:
        tree = Path(tmp) / "root"
        argv = [DEBOOTSTRAP, "--variant=minbase", suite, str(tree), *_mirror_args(settings, suite)]
        log_line(f"debootstrap {suite} from {settings.images.mirror or 'its default mirror'}")
        r = subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=host_env()
        )
        if r.returncode != 0:
            out = r.stdout.decode(errors="replace")
            raise ImageUnavailableError(
                f"debootstrap of {suite} failed",
                "Check that the Debian mirror (images.mirror) is reachable and that this runs as root.",
                argv=argv,
                exit_code=r.returncode,
                stderr=out,
            )
        _prune(tree)
        partial = cache / f"{tarball.name}.partial"
        with tarfile.open(partial, "w") as tar:
            tar.add(str(tree), arcname=".")
        partial.rename(tarball)
    for stale in [cache / f"{suite}.tar", *cache.glob(f"{suite}-*.tar")]:
        if stale != tarball and re.fullmatch(rf"{re.escape(suite)}(-[0-9a-f]{{16}})?\.tar", stale.name):
            stale.unlink(missing_ok=True)
    return tarball


def _mirror_args(settings: Settings, suite: str) -> list[str]:
    """debootstrap's MIRROR and SCRIPT arguments. An empty images.mirror leaves the mirror to
    debootstrap's own default; a suite newer than this debootstrap knows (forky on a bookworm
    host) uses the testing/unstable script, which every newer suite shares."""
    scripts = Path(DEBOOTSTRAP_SCRIPTS)
    script = [] if (scripts / suite).exists() or not (scripts / "sid").exists() else [str(scripts / "sid")]
    mirror = settings.images.mirror or (DEFAULT_DEBIAN_MIRROR() if script else "")
    return [mirror, *script] if mirror else []


def _prune(tree: Path) -> None:
    for rel in _PRUNE:
        top = tree / rel
        if not top.is_dir():
            continue
        for path in sorted(top.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            relative = path.relative_to(tree).as_posix()
            if _KEEP.match(relative):
                continue
            if path.is_dir() and not path.is_symlink():
                try:
                    path.rmdir()
                except OSError:
                    pass  # keeps a kept file's directory
            else:
                path.unlink()


def ensure_rootfs(
    engine: Engine, settings: Settings, suite: str, log_line: Callable[[str], None] = log.info
) -> Outcome:
    """``setupbot/rootfs:<suite>`` present and made from the current rootfs recipe (an image
    imported before images carried the recipe hash counts as current)."""
    tag = rootfs_tag(suite)
    key = rootfs_key(settings, suite)
    if engine.image_id(tag) is not None and engine.image_labels(tag).get(ROOTFS_KEY_LABEL, key) == key:
        return Outcome(tag, "reused", 0.0)
    started = time.monotonic()
    archive = image_archive(settings, tag, key)
    if load_archive(
        engine, settings, archive, [tag], lambda: engine.image_labels(tag).get(ROOTFS_KEY_LABEL) == key, log_line
    ):
        return Outcome(tag, "reused", time.monotonic() - started, f"loaded from {archive}")
    tarball = rootfs_tarball(settings, suite, log_line)
    log_line(f"import {tarball} as {tag}")
    engine.run_cli(
        [
            "import",
            "--change",
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "--change",
            f"LABEL {LABEL}=1 setupbot.rootfs={suite} {ROOTFS_KEY_LABEL}={key}",
            "--change",
            'CMD ["bash"]',
            str(tarball),
            tag,
        ],
        timeout=900,
    )
    save_archive(engine, settings, archive, [tag], log_line)
    return Outcome(tag, "built", time.monotonic() - started)


# ---------------------------------------------------------------------- image archives
def image_archive(settings: Settings, tag: str, key: str) -> Path:
    """Where ``images.archives`` keeps ``tag`` as made by the recipe whose hash is ``key``."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", tag)
    return cache_dir(settings) / "images" / f"{slug}@{key}.tar"


def load_archive(
    engine: Engine,
    settings: Settings,
    archive: Path,
    tags: list[str],
    current: Callable[[], bool],
    log_line: Callable[[str], None] = log.info,
) -> bool:
    """Load a kept archive into the engine; True when it is there and gives the image its
    recipe expects (``current``). A damaged archive is removed and the image is built instead."""
    if not settings.images.archives or not archive.is_file():
        return False
    log_line(f"load {', '.join(tags)} from {archive}")
    r = engine.run_cli(["load", "--input", str(archive)], check=False, timeout=900)
    if r.returncode == 0 and all(engine.image_id(t) is not None for t in tags) and current():
        return True
    log_line(f"the archive {archive} did not give the expected image; building instead")
    archive.unlink(missing_ok=True)
    return False


def save_archive(
    engine: Engine, settings: Settings, archive: Path, tags: list[str], log_line: Callable[[str], None] = log.info
) -> None:
    """Keep the freshly made image (all its tags) under its recipe hash, replacing the
    archives of the same image's earlier recipes. Best effort: a failure is logged."""
    if not settings.images.archives:
        return
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    r = engine.run_cli(["save", "--output", str(partial), *tags], check=False, timeout=900)
    if r.returncode != 0:
        partial.unlink(missing_ok=True)
        log_line(f"could not keep {tags[0]} as an archive: {r.stderr.strip()[-300:]}")
        return
    partial.rename(archive)
    stem = archive.name.split("@", 1)[0]
    for stale in archive.parent.glob(f"{stem}@*.tar"):
        if stale != archive:
            stale.unlink(missing_ok=True)


# ---------------------------------------------------------------------- stand-ins
def _template_extra(settings: Settings) -> dict[str, str]:
    mirror = settings.images.mirror.rstrip("/")
    if not mirror:  # the template keeps the mirror debootstrap chose
        return {"mirror": "", "security_mirror": ""}
    security = re.sub(r"/debian$", "/debian-security", mirror) if mirror.endswith("/debian") else mirror + "-security"
    return {"mirror": mirror, "security_mirror": security}


def standin_current(engine: Engine, recipe: ImageRecipe, recipe_hash: str) -> bool:
    labels = engine.image_labels(recipe.tag)
    return labels.get(STANDIN_LABEL) == "1" and labels.get(RECIPE_LABEL) == recipe_hash


def build_standin(
    engine: Engine,
    settings: Settings,
    recipe: ImageRecipe,
    *,
    force: bool = False,
    log_line: Callable[[str], None] = log.info,
) -> Outcome:
    started = time.monotonic()
    base_id = engine.image_id(recipe.base)
    if base_id is None:
        raise ImageUnavailableError(
            f"{recipe.tag}: its base image {recipe.base} is not present",
            "Bootstrap the base first (it is chosen automatically by `setupbot images bootstrap`).",
        )
    extra = _template_extra(settings)
    fingerprint = engine.ca.fingerprint if engine.ca else ""
    digest = recipe.recipe_hash(base_id, fingerprint, extra)
    if not force and standin_current(engine, recipe, digest):
        for alias in recipe.aliases:
            if engine.image_id(alias) != engine.image_id(recipe.tag):
                engine.tag(recipe.tag, alias)
        return Outcome(recipe.tag, "reused", time.monotonic() - started)
    archive = image_archive(settings, recipe.tag, digest)
    if not force and load_archive(
        engine,
        settings,
        archive,
        [recipe.tag, *recipe.aliases],
        lambda: standin_current(engine, recipe, digest),
        log_line,
    ):
        return Outcome(recipe.tag, "reused", time.monotonic() - started, f"loaded from {archive}")

    log_line(f"build {recipe.tag} from {recipe.base}")
    stage = f"setupbot/standin-build:{digest}"
    failed = _build_stage(engine, recipe, extra, stage, started)
    if failed is None:
        failed = _finish_standin(engine, recipe, stage, digest, started)
    if failed is not None:
        return failed
    save_archive(engine, settings, archive, [recipe.tag, *recipe.aliases], log_line)
    return Outcome(recipe.tag, "built", time.monotonic() - started)


def _build_stage(
    engine: Engine, recipe: ImageRecipe, extra: dict[str, str], stage: str, started: float
) -> Outcome | None:
    """Build the recipe's own Dockerfile (rendered with its context files) as ``stage``; the
    failed outcome when it does not build, else None."""
    with tempfile.TemporaryDirectory(prefix="setupbot-standin-") as tmp:
        context = Path(tmp)
        variables = recipe.template_variables(extra)
        build_args: dict[str, str] = {}
        if recipe.context:
            shutil.copytree(templates_dir() / recipe.context, context, dirs_exist_ok=True)
        for name, template in recipe.files.items():
            target = context / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if template.endswith(".j2"):
                target.write_text(render_template(template, **variables))
            else:
                shutil.copyfile(templates_dir() / template, target)
        if recipe.wheels:
            fetched = _download_wheels(recipe.wheels, context / "wheels")
            if fetched:
                return Outcome(recipe.tag, "failed", time.monotonic() - started, fetched)
        if recipe.template:
            text = render_template(recipe.template, **variables)
        else:
            text = (context / "Dockerfile").read_text()
            build_args["BASE"] = recipe.base
        first = engine.build_raw(context, text, stage, {LABEL: "1"}, build_args=build_args)
        if not first.ok:
            return Outcome(recipe.tag, "failed", time.monotonic() - started, first.log[-3000:])
    return None


def _download_wheels(requirements: Iterable[str], dest: Path) -> str:
    """The host's pip downloads these wheels (pure Python: pip, setuptools) with its own index
    configuration; the error to report, or "" when they are there."""
    dest.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check"]
    try:
        r = subprocess.run(
            [*argv, "--dest", str(dest), *requirements],
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
            env=host_env(),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"pip download {' '.join(requirements)}: {exc}"
    if r.returncode != 0:
        return f"pip download {' '.join(requirements)} failed:\n{(r.stdout + r.stderr)[-2000:]}"
    return ""


def _finish_standin(engine: Engine, recipe: ImageRecipe, stage: str, digest: str, started: float) -> Outcome | None:
    """Probe ``stage`` (its answer may become an environment variable), then build the labelled
    stand-in and its aliases from it with the CA bundle; the stage is untagged either way. The
    failed outcome, or None when the stand-in is built."""
    env = dict(recipe.env)
    try:
        if recipe.probe:
            probe = engine.run_once(stage, list(recipe.probe), timeout=300)
            if not probe.ok:
                return Outcome(
                    recipe.tag,
                    "failed",
                    time.monotonic() - started,
                    f"probe {list(recipe.probe)} failed:\n{probe.output[-3000:]}",
                )
            if recipe.version_env:
                lines = [line.strip() for line in probe.output.splitlines() if line.strip()]
                env[recipe.version_env] = lines[-1] if lines else ""

        labels = {LABEL: "1", STANDIN_LABEL: "1", RECIPE_LABEL: digest, "setupbot.standin.of": recipe.tag}
        if engine.ca:
            labels[CA_LABEL] = engine.ca.fingerprint
        with tempfile.TemporaryDirectory(prefix="setupbot-finish-") as tmp:
            context = Path(tmp)
            if engine.ca:
                engine.ca.write_context(context)
            text = render_template(
                "images/finish.Dockerfile.j2", base=stage, ca=engine.ca is not None, ca_env=CA_ENV, env=env
            )
            final = engine.build_raw(context, text, [recipe.tag, *recipe.aliases], labels)
        if not final.ok:
            return Outcome(recipe.tag, "failed", time.monotonic() - started, final.log[-3000:])
    finally:
        engine.untag(stage)
    return None


def bootstrap(
    engine: Engine,
    settings: Settings,
    pythons: Iterable[str] | None = None,
    services: Iterable[str] | None = None,
    *,
    force: bool = False,
    log_line: Callable[[str], None] = log.info,
    jobs: int = 1,
) -> list[Outcome]:
    """Make the chosen stand-ins present (all when ``None``): rootfs, Debian, Python, services.
    A failure of one image is reported and the others go on; a failed base skips its users.
    With ``jobs`` above 1, that many images are made at once, each as soon as its base is
    there (the builds wait on the network and the disk as much as on the processor)."""
    engine.ping()
    recipes = select_recipes(settings, pythons, services)
    suites = sorted({r.base.split(":", 1)[1] for r in recipes if r.base.startswith(ROOTFS_REPOSITORY + ":")})
    jobs = max(1, int(jobs))
    outcomes: list[Outcome] = []
    failed: set[str] = set()

    def rootfs(suite: str) -> Outcome:
        try:
            return ensure_rootfs(engine, settings, suite, log_line)
        except ImageUnavailableError as exc:
            return Outcome(rootfs_tag(suite), "failed", 0.0, exc.render())

    def standin(recipe: ImageRecipe) -> Outcome:
        outcome = build_standin(engine, settings, recipe, force=force, log_line=log_line)
        log_line(f"{outcome.action:7} {outcome.tag} ({outcome.seconds:.0f}s)")
        return outcome

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="bootstrap") as pool:
        for outcome in pool.map(rootfs, suites):
            outcomes.append(outcome)
            if outcome.action == "failed":
                failed.add(outcome.tag)
        # each recipe as soon as its base is made; the order of ``recipes`` among those ready
        pending = list(recipes)
        running: dict[concurrent.futures.Future[Outcome], ImageRecipe] = {}
        while pending or running:
            made = {o.tag for o in outcomes}
            for recipe in list(pending):
                if recipe.base in failed:
                    pending.remove(recipe)
                    outcomes.append(Outcome(recipe.tag, "failed", 0.0, f"skipped: its base {recipe.base} failed"))
                    failed.add(recipe.tag)
                elif len(running) < jobs and (recipe.base in made or not any(recipe.base == r.tag for r in recipes)):
                    pending.remove(recipe)
                    running[pool.submit(standin, recipe)] = recipe
            if not running:
                if pending:  # a base that is neither made nor pending: cannot happen, but never spin
                    raise RuntimeError(f"stand-ins wait on bases that are not made: {[r.base for r in pending]}")
                break
            done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                running.pop(future)
                outcome = future.result()
                outcomes.append(outcome)
                if outcome.action == "failed":
                    failed.add(outcome.tag)
    return outcomes


__all__ = [
    "available_pythons",
    "local_pythons",
    "available_services",
    "bootstrap",
    "select_recipes",
    "core_recipes",
    "Outcome",
    "OfferedService",
    "cache_dir",
    "ensure_rootfs",
    "rootfs_key",
    "rootfs_tarball",
    "image_archive",
    "load_archive",
    "save_archive",
]
