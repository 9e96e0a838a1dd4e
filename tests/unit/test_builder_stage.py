"""The builder stage (issue 16 item 5, issue 18 item 2): when the compilers only build the wheels
of locked distributions the index has only as source, they stay in a stage of their own and
the final image installs the wheels. With stand-ins for the engine and the index; the real
build is tests/integration/test_builder_stage.py."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

from dockerfile_parse import DockerfileParser

from bot.compile import compile_dockerfile
from bot.compile.dockerfile import without_dev_stage
from bot.compile.plan import make_plan
from bot.engine.dockerfile import base_images
from bot.engine.results import BuildResult, ExecResult
from bot.graph.lock import LockEntry, RequirementsLock, apply_lock, lock_summary, parse_lock
from bot.graph.mapping import Registry
from bot.loop import lock as vlock

REPOS = Path(__file__).parents[1] / "fixtures" / "repos"
H1 = "sha256:" + "a" * 64
H2 = "sha256:" + "b" * 64
REPLAY = "setupbot-loop-x:replay-1"


def plan(repo: Path):
    return make_plan(repo, None, available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False))


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "r"
    shutil.copytree(REPOS / "plan-ci-services", repo)  # psycopg: libpq-dev and build-essential
    return repo


def _lock(built: list[str]) -> RequirementsLock:
    return RequirementsLock(
        [LockEntry("psycopg2", "2.9.9", [H1, H2]), LockEntry("requests", "2.31.0", [H1])],
        "0123456789abcdef" * 2,
        "3.11",
        debs={"build-essential": "12.9", "libpq-dev": "15.8"},
        built=built,
    )


def _stages(text: str) -> list[list[dict]]:
    """The Dockerfile's instructions, split at each FROM."""
    stages: list[list[dict]] = []
    for ins in DockerfileParser(fileobj=io.BytesIO(text.encode())).structure:
        if ins["instruction"] == "FROM":
            stages.append([])
        if ins["instruction"] != "COMMENT":
            stages[-1].append(ins)
    return stages


def test_the_compilers_build_the_wheels_in_a_stage_of_their_own(tmp_path):
    g = plan(_repo(tmp_path)).graph
    lock = _lock(["psycopg2"])
    apply_lock(g, lock, ".devcontainer/requirements.lock", source="test", apt_versions=lock.debs)
    text = compile_dockerfile(g).text
    builder, final, dev = _stages(text)
    assert builder[0]["value"] == "python:3.11-slim AS wheels"
    assert final[0]["value"] == "python:3.11-slim AS env"
    # git and the user are for the editor alone: in the development stage, not in the others
    assert dev[0]["value"] == "env AS dev"
    assert any("install -y --no-install-recommends git" in i["value"] for i in dev)
    assert any(i["value"] == "useradd --create-home dev" for i in dev)
    assert not any("git" in i["value"] or "useradd" in i["value"] for i in builder + final)
    b_apt = next(i["value"] for i in builder if "apt-get install" in i["value"])
    f_apt = next(i["value"] for i in final if "apt-get install" in i["value"])
    # the builder has the compiler and the headers, the final image the headers (their libraries) only
    assert "build-essential=12.9" in b_apt and "libpq-dev=15.8" in b_apt
    assert "build-essential" not in f_apt and "libpq-dev=15.8" in f_apt
    # the builder checks the source archive against the lock's hashes and builds only it
    wheel = next(i["value"] for i in builder if "pip wheel" in i["value"])
    assert f"psycopg2==2.9.9 --hash={H1} --hash={H2}" in wheel and "requests" not in wheel
    assert "--require-hashes" in wheel and "-r /tmp/built.txt" in wheel and "--no-deps" in wheel
    assert "--use-pep517" in wheel  # a setup.py-only sdist builds where the base image has no wheel package
    # the final image installs those wheels, then the whole lock, which finds them in place
    values = [i["value"] for i in final]
    copy = values.index('--from=wheels ["/wheels", "/tmp/wheels"]')
    lock_install = next(k for k, v in enumerate(values) if "-r /tmp/requirements.lock" in v)
    assert "--no-index --find-links /tmp/wheels psycopg2==2.9.9" in values[copy + 1] and copy + 1 < lock_install
    assert "--require-hashes" in values[lock_install]
    assert "builder stage: build-essential only to build wheels of 1 locked distribution(s)" in text
    # the engine pulls only the base image (the stage is no image to fetch)
    assert base_images(text) == ["python:3.11-slim"]
    assert lock_summary(g)["built"] == ["psycopg2"] and lock_summary(g)["build_tools"] == ["build-essential"]


def test_no_builder_stage_without_wheels_to_build_or_without_a_compiler(tmp_path):
    g = plan(_repo(tmp_path)).graph
    apply_lock(g, _lock([]), ".devcontainer/requirements.lock", source="test")
    text = compile_dockerfile(g).text
    assert " AS wheels" not in text and "--from=" not in text and "build-essential" in text
    # a name the lock does not hold stages nothing
    g = plan(_repo(tmp_path / "2")).graph
    apply_lock(g, _lock(["not-locked"]), ".devcontainer/requirements.lock", source="test")
    assert " AS wheels" not in compile_dockerfile(g).text


def test_the_builder_stage_is_written_into_the_lock_and_reused_from_it(tmp_path):
    """A later run that reuses the lock builds the same two stages: the lock file says which
    distributions the builder stage builds. A line naming anything the lock does not pin, or
    anything that is not a distribution name, is ignored."""
    text = _lock(["psycopg2"]).render()
    assert "# builder stage: psycopg2" in text.splitlines()
    back = parse_lock(text)
    assert back is not None and back.built == ["psycopg2"]
    hostile = text.replace("# builder stage: psycopg2", "# builder stage: evil\n# builder stage: x; rm -rf /")
    assert parse_lock(hostile).built == []
    g = plan(_repo(tmp_path)).graph
    apply_lock(g, back, ".devcontainer/requirements.lock", source="reused", apt_versions=back.debs)
    assert "FROM python:3.11-slim AS wheels" in compile_dockerfile(g).text


class _Engine:
    """Freezes images from a table; builds record their Dockerfile. ``fail_staged``: a build
    with a builder stage fails; ``missing``: the locked image's extension modules miss these
    libraries (the replay's do not)."""

    def __init__(self, fail_staged: bool = False, missing: str = "") -> None:
        self.sets = {
            REPLAY: '[["psycopg2", "2.9.9", false, false], ["requests", "2.31.0", false, true]]',
            "python:3.11-slim": "[]",
        }
        self.builds: list[str] = []
        self.fail_staged = fail_staged
        self.missing = missing

    def run_once(self, image, argv, timeout=300, env=None, network="none"):
        if argv[0] == "dpkg-query":
            return ExecResult(list(argv), 0, "build-essential=12.9\nlibpq-dev=15.8\n", 0.1)
        if argv[0] == "sh":
            staged = image != REPLAY and "AS wheels" in self.builds[-1]
            return ExecResult(list(argv), 0, self.missing if staged else "", 0.1)
        return ExecResult(list(argv), 0, "SETUPBOT-DISTS:" + self.sets[image], 0.1)

    def build(self, context, text, tag, no_cache=False):
        self.builds.append(text)
        self.sets[tag] = self.sets[REPLAY]
        ok = not (self.fail_staged and "AS wheels" in text)
        return BuildResult(ok, tag, "" if ok else "error: failed building wheel for psycopg2", 1.0)


def _lock_it(tmp_path, monkeypatch, engine):
    repo = _repo(tmp_path)
    monkeypatch.setattr(
        vlock, "fetch_hashes", lambda pins, py, **kw: ([LockEntry(n, v, [H1]) for n, v in sorted(pins.items())], [])
    )
    asked: list[dict] = []
    monkeypatch.setattr(vlock, "wheel_less", lambda pins, *a, **k: asked.append(dict(pins)) or ["psycopg2"])
    out = vlock.lock_environment(engine, repo, plan(repo).graph, replay_tag=REPLAY, output_dir=".devcontainer")
    return repo, out, asked


def test_a_pin_with_only_an_sdist_is_built_in_the_builder_stage(tmp_path, monkeypatch):
    engine = _Engine()
    repo, out, asked = _lock_it(tmp_path, monkeypatch, engine)
    assert out.status == "locked", out.reason
    # the pure-Python pin is not asked about; the other one has no wheel
    assert asked == [{"psycopg2": "2.9.9"}]
    assert len(engine.builds) == 1 and "FROM python:3.11-slim AS wheels" in engine.builds[0]
    # the lock's build is the tested stage: the development stage (git, the user) is built later
    assert out.lock.built == ["psycopg2"] and without_dev_stage(out.dockerfile) == engine.builds[0]
    assert "FROM env AS dev" in out.dockerfile and "FROM env AS dev" not in engine.builds[0]
    assert "# builder stage: psycopg2" in (repo / ".devcontainer" / "requirements.lock").read_text()
    assert any("build-essential only in a builder stage" in n and "psycopg2" in n for n in out.notes), out.notes


def test_a_builder_stage_that_does_not_build_gives_way_to_one_stage(tmp_path, monkeypatch):
    engine = _Engine(fail_staged=True)
    repo, out, _ = _lock_it(tmp_path, monkeypatch, engine)
    assert out.status == "locked", out.reason
    assert len(engine.builds) == 2 and " AS wheels" not in engine.builds[1] and "build-essential" in engine.builds[1]
    assert out.lock.built == [] and without_dev_stage(out.dockerfile) == engine.builds[1]
    assert "builder stage:" not in (repo / ".devcontainer" / "requirements.lock").read_text()
    assert any(n.startswith("no builder stage: the image with a builder stage did not build") for n in out.notes)


def test_a_library_the_compilers_brought_keeps_them_in_the_final_image(tmp_path, monkeypatch):
    """A wheel built with OpenMP links libgomp, which came with gcc: without the compilers the
    final image's loader does not find it, so the one-stage form is kept."""
    engine = _Engine(missing="libgomp.so.1 => not found\n")
    _, out, _ = _lock_it(tmp_path, monkeypatch, engine)
    assert out.status == "locked", out.reason
    assert len(engine.builds) == 2 and " AS wheels" not in engine.builds[1]
    assert any("lacks libgomp.so.1 => not found" in n for n in out.notes), out.notes


def test_no_builder_stage_when_the_project_itself_compiles(tmp_path, monkeypatch):
    repo = tmp_path / "r"
    shutil.copytree(REPOS / "plan-setup-py-only", repo)  # Extension(...) in setup.py
    monkeypatch.setattr(
        vlock, "fetch_hashes", lambda pins, py, **kw: ([LockEntry(n, v, [H1]) for n, v in sorted(pins.items())], [])
    )
    monkeypatch.setattr(vlock, "wheel_less", lambda pins, *a, **k: ["psycopg2"])
    engine = _Engine()
    out = vlock.lock_environment(engine, repo, plan(repo).graph, replay_tag=REPLAY, output_dir=".devcontainer")
    assert out.status == "locked" and " AS wheels" not in engine.builds[0] and "build-essential" in engine.builds[0]


class _Libraries:
    """Images whose ldd "not found" lines are given per tag."""

    def __init__(self, missing: dict[str, str]) -> None:
        self.missing = missing

    def run_once(self, image, argv, timeout=300, env=None, network="none"):
        return ExecResult(list(argv), 0, self.missing.get(image, ""), 0.1)


def test_a_vendored_library_under_another_hash_is_not_a_library_lost():
    """auditwheel vendors libcrypto into psycopg-binary's .libs under a hash of its contents;
    another release of the wheel has another hash. The same library missing in both is not
    one the builder stage lost; a library missing only now is."""
    engine = _Libraries(
        {
            "final": "libcrypto-1736dd4b.so.3 => not found\nlibgomp.so.1 => not found\n",
            "tested": "libcrypto-8e1bd9c2.so.3 => not found\n",
        }
    )
    assert vlock._staged_libraries_missing(engine, "final", "tested") == "libgomp.so.1 => not found"
    # what the tested container lacked, read when the lock was frozen there, is the reference
    lost = vlock._staged_libraries_missing(engine, "final", "tested", before={"libgomp.so.1 => not found"})
    assert lost == "libcrypto-1736dd4b.so.3 => not found"


def test_a_lock_with_a_builder_stage_frozen_in_a_container_reads_its_libraries_there(tmp_path, monkeypatch):
    """Drafted in the tested container, the lock keeps what that container's extension modules
    did not find, and the replay's image is checked against that, not against the image the
    container started from (which lacks what the repairs installed there)."""
    repo = _repo(tmp_path)
    monkeypatch.setattr(
        vlock, "fetch_hashes", lambda pins, py, **kw: ([LockEntry(n, v, [H1]) for n, v in sorted(pins.items())], [])
    )
    monkeypatch.setattr(vlock, "wheel_less", lambda pins, *a, **k: ["psycopg2"])
    in_container: list[list[str]] = []

    class _Session:
        def exec(self, argv, env=None, timeout=60, workdir=None, changes=True):
            in_container.append(list(argv))
            if argv[0] == "sh":
                return ExecResult(list(argv), 0, "libcrypto-8e1bd9c2.so.3 => not found\n", 0.1)
            return _Engine().run_once(REPLAY, argv)

    engine = _Engine()
    reader = vlock.ContainerReader(engine, _Session(), "setupbot-loop-x:work-1")
    pending = vlock.draft_before_replay(
        reader, repo, plan(repo).graph, working_tag="setupbot-loop-x:work-1", output_dir=".devcontainer"
    )
    assert pending is not None and pending.draft.staged
    assert pending.libraries_before == {"libcrypto-8e1bd9c2.so.3 => not found"}
    assert any(argv[0] == "sh" for argv in in_container)
