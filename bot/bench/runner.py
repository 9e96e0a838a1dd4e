"""The benchmark run: for each repository, export the pinned tree once; for each system,
produce a Dockerfile (timed) and score it in a fresh no-cache build; append one JSON line.

Everything a pair creates in the engine carries that pair's run label and is removed when the
pair is scored (``--keep-images`` keeps them), so a 21-repository run does not fill the disk.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bot import __version__
from bot.bench import previous
from bot.bench import results as results_io
from bot.bench.determinism import check_determinism
from bot.bench.repos import BenchRepo, ExportResult, copy_tree, export_tree, new_scratch, prepare_git_dir
from bot.bench.score import Score, run_cargo_tests_in_image, score_dockerfile
from bot.bench.systems import SYSTEMS, SystemContext, SystemResult, runner_for
from bot.compile.dockerfile import without_dev_stage
from bot.config import Settings
from bot.ecosystems import select
from bot.engine import Engine, capture
from bot.errors import EngineError, InputError, SetupbotError
from bot.hostenv import host_env


@dataclass
class BenchOptions:
    repos: list[BenchRepo]
    systems: tuple[str, ...] = SYSTEMS
    out: Path = Path("bench/results")
    git_root: Path | None = Path("/work/.mirror")
    jobs: int = 1
    test_timeout: int = 900
    collect_timeout: int = 600
    pipreqs_timeout: int = 300
    force: bool = False
    keep_images: bool = False
    settings: Settings | None = None
    command: str = ""
    # Builds the engine of one pair from the settings; the real Engine unless a caller (a test)
    # hands in another implementation of the same contract.
    engine_factory: Callable[[object], object] | None = None
    # build setupbot's Dockerfile a second time with no cache and compare the package sets
    determinism: bool = False
    # after a pair, the engine's unused build cache is pruned when less than this is free where
    # it keeps images (a long bench under BuildKit filled 60 GB of cache and failed a build on
    # "No space left on device"); 0: never
    min_free_gb: float = 20.0


class Progress:
    """One line per step on stderr: ``[3/63 · 00:41:07] owner/name · declared · build``."""

    def __init__(self, total: int, stream=None) -> None:
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.stream = stream or sys.stderr
        self._lock = threading.Lock()  # --jobs > 1: lines from several workers

    def _clock(self) -> str:
        s = int(time.monotonic() - self.started)
        return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"

    def step(self, repo: str, system: str, message: str) -> None:
        with self._lock:
            print(
                f"[{self.done}/{self.total} · {self._clock()}] {repo} · {system} · {message}",
                file=self.stream,
                flush=True,
            )

    def finish_pair(self, repo: str, system: str, record: dict) -> None:
        with self._lock:
            self.done += 1
        verdict = "skipped" if record.get("status") == "skipped" else "EBSR ✓" if record.get("ebsr") else "EBSR ✗"
        tests = record.get("tests") or {}
        detail = (
            f"{tests.get('passed', 0)} passed / {tests.get('failed', 0)} failed"
            if record.get("ebsr")
            else record.get("reason", "")
        )
        self.step(repo, system, f"{verdict} {detail} ({record.get('total_seconds', 0):.0f}s)")


def image_tag(repo: BenchRepo, system: str, run_id: str) -> str:
    """A valid image reference: repository names allow only [a-z0-9._-] and slashes."""
    name = re.sub(r"[^a-z0-9._-]+", "-", repo.name.lower().replace("/", "-")).strip("-._") or "repo"
    return f"setupbot-bench/{name}:{re.sub(r'[^A-Za-z0-9_.-]+', '-', f'{system}-{run_id}')[:128]}"


def _artifact_dir(out: Path, repo: BenchRepo, system: str) -> Path:
    return out / "artifacts" / repo.slug / system


_COMMIT: list[str] = []


def setupbot_commit() -> str:
    """The commit of the setupbot checkout running the benchmark ("" outside a git checkout), so
    that results from resumed runs say which code produced them."""
    if not _COMMIT:
        import subprocess

        here = Path(__file__).resolve().parent
        try:
            proc = subprocess.run(
                ["git", "-C", str(here), "rev-parse", "--short=12", "HEAD"],
                capture_output=True,
                text=True,
                timeout=10,
                env=host_env(),
            )
            dirty = subprocess.run(
                ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no", "--", ":/bot", ":/templates"],
                capture_output=True,
                text=True,
                timeout=10,
                env=host_env(),
            )
            commit = proc.stdout.strip() if proc.returncode == 0 else ""
            _COMMIT.append(commit + ("+dirty" if commit and dirty.stdout.strip() else ""))
        except (OSError, subprocess.TimeoutExpired):
            _COMMIT.append("")
    return _COMMIT[0]


def _base_record(repo: BenchRepo, system: str, ecosystem: str = "") -> dict:
    return {
        "repo": repo.name,
        "sha": repo.sha,
        "system": system,
        # the lead ecosystem of the exported tree; "" when the tree could not be exported
        "ecosystem": ecosystem,
        "difficulty": repo.difficulty,
        "gold": repo.gold,
        "setupbot_version": __version__,
        "setupbot_commit": setupbot_commit(),
        "ebsr": False,
        "tests": {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "total": 0},
        "essr": 0.0 if repo.gold else None,
        "pass_share": None,
        "tokens": 0,
        "steps": None,
        "repairs": None,
    }


def _finish(record: dict, score: Score | None, repo: BenchRepo) -> dict:
    if score is not None:
        record.update(
            {
                "ebsr": score.ebsr,
                "built": score.built,
                "build_seconds": score.build_seconds,
                "image_bytes": score.image_bytes,
                "collect_exit": score.collect_exit,
                "collect_seconds": score.collect_seconds,
                "collected": score.collected,
                "tests": score.tests.to_json(),
                "test_exit": score.test_exit,
                "test_seconds": score.test_seconds,
                "test_timed_out": score.test_timed_out,
                "counts_from": score.counts_from,
                "build_log_tail": score.build_log_tail,
                "collect_tail": score.collect_tail,
                "test_tail": score.test_tail,
            }
        )
        if score.reason and not record.get("reason"):
            record["reason"] = score.reason
        t = score.tests
        ran = t.passed + t.failed + t.errors
        record["pass_share"] = round(t.passed / ran, 4) if ran else 0.0
        if repo.gold:
            record["essr"] = round(min(t.passed / repo.gold, 1.0), 4)
        if record.get("status") in (None, "ok"):
            unscored = "tests-not-built" if record.get("ecosystem") == "rust" else "collect-failed"
            record["status"] = "ok" if score.ebsr else "build-failed" if not score.built else unscored
    return record


def _new_engine(opts: BenchOptions):
    if opts.engine_factory is not None:
        return opts.engine_factory(opts.settings)
    assert opts.settings is not None, "the real engine is made from the bench settings"
    return Engine.from_settings(opts.settings)


def _pinned_settings(settings: Settings | None, export: ExportResult) -> Settings | None:
    if export.commit_date and settings is not None and not settings.target.as_of:
        # the tree is exported without .git: the pinned commit's date is the era reference
        settings = dataclasses.replace(settings, target=dataclasses.replace(settings.target, as_of=export.commit_date))
    return settings


def _record_production(record: dict, result: SystemResult, system: str, settings: Settings | None) -> None:
    produced = result.produced
    record.update(
        {
            "produce_seconds": round(produced.seconds, 2),
            "mode": result.mode,
            "steps": result.steps,
            "repairs": result.repairs,
            "tokens": result.tokens,
            "details": produced.details,
        }
    )
    if (system == "setupbot" or system.startswith("setupbot@")) and settings is not None:
        record["budget_seconds"] = settings.budgets.wall_clock  # for the overshoot in the summary


def _record_dockerfile(record: dict, artifacts: Path, dockerfile: str) -> None:
    (artifacts / "Dockerfile").write_text(dockerfile)
    record["dockerfile_sha256"] = hashlib.sha256(dockerfile.encode()).hexdigest()
    record["dockerfile_lines"] = sum(
        1 for ln in dockerfile.splitlines() if ln.strip() and not ln.lstrip().startswith("#")
    )


def _scored_context(pristine: Path, scratch: Path, files: dict[str, str]) -> Path:
    if not files:
        return pristine
    # the Dockerfile installs files setupbot writes next to it (the lock): the scored
    # context is the pristine export plus exactly those files
    context = copy_tree(pristine, scratch / "context")
    for rel, text in files.items():
        target = context / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return context


def _fresh_score(
    engine,
    repo: BenchRepo,
    system: str,
    context: Path,
    dockerfile: str,
    artifacts: Path,
    scratch: Path,
    opts: BenchOptions,
    ecosystem: str = "python",
) -> tuple[Score, str]:
    """Build ``dockerfile`` with no cache and run the tests; returns the score and the image tag."""
    # The context is the pristine export: whatever a system wrote into its copy does
    # not reach the scored build.
    tag = image_tag(repo, system, engine.run_id)
    score_image = None
    if ecosystem == "rust":

        def score_image(engine, tag: str, score: Score) -> Score:
            return run_cargo_tests_in_image(
                engine, tag, score, collect_timeout=opts.collect_timeout, test_timeout=opts.test_timeout
            )

    score = score_dockerfile(
        engine,
        context,
        dockerfile,
        tag,
        collect_timeout=opts.collect_timeout,
        test_timeout=opts.test_timeout,
        junit_dest=artifacts / "junit.xml",
        build_log=scratch / "build.log",
        score_image=score_image,
    )
    if not score.built and (scratch / "build.log").is_file():
        (artifacts / "build.log.txt").write_text(
            "\n".join((scratch / "build.log").read_text(errors="replace").splitlines()[-400:])
        )
    return score, tag


def _produce(
    system: str, ecosystem: str, pristine: Path, export: ExportResult, opts: BenchOptions, engine, scratch: Path
) -> SystemResult:
    """Run ``system`` on a private copy of the tree, for the repository's lead ecosystem."""
    ctx = SystemContext(
        repo_dir=copy_tree(pristine, scratch / "repo"),
        scratch=scratch,
        engine=engine,
        settings=_pinned_settings(opts.settings, export),
        test_timeout=opts.test_timeout,
        pipreqs_timeout=opts.pipreqs_timeout,
        collect_timeout=opts.collect_timeout,
        ecosystem=ecosystem,
    )
    run = runner_for(system)
    assert run is not None  # run_bench refused unknown systems
    return run(ctx)


def _produce_and_score(
    repo: BenchRepo,
    system: str,
    pristine: Path,
    export: ExportResult,
    opts: BenchOptions,
    progress: Progress,
    engine,
    scratch: Path,
    record: dict,
) -> dict:
    """The body of :func:`run_pair` once its engine exists; fills and returns ``record``."""
    progress.step(repo.name, system, "producing a Dockerfile")
    ecosystem = record.get("ecosystem") or "python"
    result = _produce(system, ecosystem, pristine, export, opts, engine, scratch)
    produced = result.produced
    _record_production(record, result, system, _pinned_settings(opts.settings, export))
    if result.skipped:
        record.update({"status": "skipped", "reason": result.skipped})
        return record
    artifacts = _artifact_dir(opts.out, repo, system)
    artifacts.mkdir(parents=True, exist_ok=True)
    if not produced.ok or not produced.dockerfile:
        record.update({"status": "produce-failed", "reason": produced.reason or "no Dockerfile"})
        return record
    _record_dockerfile(record, artifacts, produced.dockerfile)
    context = _scored_context(pristine, scratch, produced.files)
    first_image = result.extra.get("image")
    record["replay_reused"] = result.replay is not None
    # what the first image was built from: the clean replay builds the tested stage alone
    # (git and the user's development stage are not in it), so the second build is the same
    first_text = produced.dockerfile
    if result.replay is not None:
        score = result.replay
        first_text = without_dev_stage(produced.dockerfile)
    else:
        progress.step(repo.name, system, "fresh no-cache build and tests")
        score, first_image = _fresh_score(
            engine, repo, system, context, produced.dockerfile, artifacts, scratch, opts, ecosystem
        )
    # the determinism check compares pip freeze and dpkg-query: a Python measure
    if opts.determinism and system == "setupbot" and ecosystem == "python" and score.built and first_image:
        progress.step(repo.name, system, "determinism: second no-cache build")
        record["determinism"] = check_determinism(
            engine, context, first_text, first_image, image_tag(repo, system, engine.run_id) + "-again"
        )
    record["status"] = "ok"
    return _finish(record, score, repo)


def _close_pair(record: dict, started: float, engine, opts: BenchOptions, scratch: Path) -> None:
    record["total_seconds"] = round(time.monotonic() - started, 2)
    record["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if engine is not None and not opts.keep_images:
        try:
            record["cleaned"] = engine.clean(engine.run_id)
        except Exception as exc:  # noqa: BLE001 - report, keep going
            record["cleanup_error"] = str(exc)[-300:]
    if engine is not None and opts.min_free_gb > 0:
        try:
            guard = disk_guard(engine, opts.min_free_gb)
        except Exception as exc:  # noqa: BLE001 - report, keep going
            guard = {"error": str(exc)[-300:]}
        if guard:
            record["disk"] = guard
    shutil.rmtree(scratch, ignore_errors=True)


def disk_guard(engine, min_free_gb: float) -> dict:
    """When less than ``min_free_gb`` is free where the engine keeps its images, prune the build
    cache no build is using, so that the next pair's build does not fail for room; what it found
    and did, or {} when there was room (or the engine does not say where it keeps them). A pair
    running beside this one keeps the cache its builds are using."""
    free = engine.free_disk_bytes()
    if free is None or free >= min_free_gb * 2**30:
        return {}
    pruned = engine.prune_build_cache()
    after = engine.free_disk_bytes()
    return {
        "free_gb": round(free / 2**30, 1),
        "pruned_build_cache": pruned,
        "free_gb_after": None if after is None else round(after / 2**30, 1),
    }


def export_ecosystem(tree: Path) -> str:
    """The lead ecosystem of an exported tree (``bot.ecosystems.select``); "python" when none is
    recognised (the Python systems then say what they make of it)."""
    return export_ecosystems(tree)[0]


def export_ecosystems(tree: Path) -> list[str]:
    """Every ecosystem of an exported tree, lead first (``["python"]`` when none is recognised):
    a Python package whose own code is a Rust extension is ``["python", "rust"]``."""
    names = select(tree).names
    return names or ["python"]


def run_pair(
    repo: BenchRepo, system: str, pristine: Path, export: ExportResult, opts: BenchOptions, progress: Progress
) -> dict:
    """Produce and score one system on one repository. Never raises: failures are records."""
    record = _base_record(repo, system)
    record["export"] = export.to_json()
    started = time.monotonic()
    scratch = new_scratch(f"setupbot-bench-{repo.slug}-{system}-")
    engine = None
    try:
        names = export_ecosystems(pristine)
        record["ecosystem"], record["ecosystems"] = names[0], names
        engine = _new_engine(opts)
        record["run_id"] = engine.run_id
        return _produce_and_score(repo, system, pristine, export, opts, progress, engine, scratch, record)
    except EngineError as exc:
        record.update({"status": "infra-error", "reason": exc.render()[-1500:]})
        return record
    except SetupbotError as exc:
        record.update({"status": "system-error", "reason": exc.render()[-1500:]})
        return record
    except Exception as exc:  # noqa: BLE001 - one broken pair must not stop the benchmark
        record.update(
            {
                "status": "system-error",
                "reason": f"{exc.__class__.__name__}: {exc}"[-1500:],
                "traceback": traceback.format_exc()[-3000:],
            }
        )
        return record
    finally:
        _close_pair(record, started, engine, opts, scratch)


def run_repo(repo: BenchRepo, systems: list[str], opts: BenchOptions, progress: Progress) -> list[dict]:
    scratch = new_scratch(f"setupbot-bench-{repo.slug}-")
    records: list[dict] = []
    try:
        try:
            progress.step(repo.name, "-", f"exporting {repo.sha[:12]}")
            git_dir = prepare_git_dir(repo, opts.git_root, scratch)
            export = export_tree(git_dir, repo.sha, scratch / "tree")
            if export.missing:
                progress.step(
                    repo.name,
                    "-",
                    f"{len(export.missing)} blob(s) absent from the snapshot, skipped: "
                    + ", ".join(export.missing[:5]),
                )
        except (InputError, OSError) as exc:
            reason = exc.render() if isinstance(exc, SetupbotError) else str(exc)
            for system in systems:
                record = _base_record(repo, system)
                record.update({"status": "input-error", "reason": reason[-1500:], "total_seconds": 0})
                results_io.append_record(opts.out, record)
                progress.finish_pair(repo.name, system, record)
                records.append(record)
            return records
        for system in systems:
            if capture.cancelled():
                break  # the benchmark is stopping: this pair runs on the next resume
            record = run_pair(repo, system, scratch / "tree", export, opts, progress)
            if capture.cancelled():
                break  # stopped midway: not a result (the pair reruns on resume)
            results_io.append_record(opts.out, record)
            progress.finish_pair(repo.name, system, record)
            records.append(record)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return records


def run_bench(opts: BenchOptions, progress_stream=None) -> list[dict]:
    capture.reset_cancel()
    unknown = [s for s in opts.systems if runner_for(s) is None]
    if unknown:
        raise InputError(
            f"unknown system(s): {', '.join(unknown)}",
            f"Choose from {', '.join(SYSTEMS)}, or setupbot@<commit> for this project's code at another commit.",
        )
    for system in opts.systems:
        rev = previous.revision_of(system)
        if rev is not None:
            previous.resolve(rev)  # an unknown commit fails here, before any repository runs
    done = set() if opts.force else results_io.done_pairs(opts.out)
    work: list[tuple[BenchRepo, list[str]]] = []
    skipped = 0
    for repo in opts.repos:
        todo = [s for s in opts.systems if (repo.name.lower(), repo.sha.lower(), s) not in done]
        skipped += len(opts.systems) - len(todo)
        if todo:
            work.append((repo, todo))
    total = sum(len(t) for _, t in work)
    progress = Progress(total, progress_stream)
    if skipped:
        print(
            f"setupbot bench: {skipped} pair(s) already in {opts.out}, skipped (--force reruns them)",
            file=progress.stream,
            flush=True,
        )
    meta = results_io.read_meta(opts.out)
    commands = [c for c in meta.get("commands", []) if c != opts.command] + ([opts.command] if opts.command else [])
    results_io.write_meta(
        opts.out,
        {
            **meta,
            "commands": commands,
            "last_started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "systems": list(opts.systems),
            "test_timeout": opts.test_timeout,
        },
    )
    records: list[dict] = []
    if opts.jobs <= 1:
        for repo, todo in work:
            records += run_repo(repo, todo, opts, progress)
    else:
        # a signal reaches this (the main) thread only: the queued repositories are cancelled
        # and the running ones stopped (their commands get SIGTERM), so a stopped benchmark
        # does not go on through its whole list
        pool = ThreadPoolExecutor(max_workers=opts.jobs)
        futures = [pool.submit(run_repo, repo, todo, opts, progress) for repo, todo in work]
        try:
            for future in futures:
                records += future.result()
        except BaseException:
            capture.cancel_all()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown()
    return records
