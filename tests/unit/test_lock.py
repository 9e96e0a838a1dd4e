"""The requirements lock (issue 16): its pip-compile format, the inputs hash, the Dockerfile that
installs from it, reuse while the inputs are unchanged, and the pieces that freeze an image and
look up hashes (with stand-ins for the engine and the index)."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest

from bot.atoms import Atom
from bot.compile import compile_dockerfile
from bot.compile.plan import make_plan
from bot.config import load_settings
from bot.engine.results import BuildResult, ExecResult
from bot.graph.lock import (
    LOCK_NODE,
    MARKER_LINE,
    LockEntry,
    RequirementsLock,
    apply_lock,
    inputs_hash,
    lock_summary,
    parse_lock,
)
from bot.graph.mapping import Registry
from bot.graph.model import DepGraph
from bot.loop import lock as vlock
from bot.outputs import has_marker

REPOS = Path(__file__).parents[1] / "fixtures" / "repos"
H1 = "sha256:" + "a" * 64
H2 = "sha256:" + "b" * 64


def plan(repo: Path, settings=None, resolve=False):
    return make_plan(
        repo, settings, available_pythons=["3.11", "3.12"], resolve=resolve, registry=Registry(enabled=False)
    )


def sample_lock(inputs: str = "0123456789abcdef" * 2) -> RequirementsLock:
    return RequirementsLock(
        [LockEntry("requests", "2.31.0", [H2, H1]), LockEntry("attrs", "23.1.0", [H1])],
        inputs,
        "3.11",
        debs={"libpq-dev": "15.8-0+deb12u1"},
    )


def test_lock_renders_in_pip_compile_format_and_parses_back():
    text = sample_lock().render()
    lines = text.splitlines()
    assert has_marker(text) and MARKER_LINE in lines
    # sorted by name; each pin ends in a continuation, hashes sorted, the last one without "\"
    i = lines.index("attrs==23.1.0 \\")
    assert lines[i + 1] == f"    --hash={H1}"
    j = lines.index("requests==2.31.0 \\")
    assert lines[j + 1 : j + 3] == [f"    --hash={H1} \\", f"    --hash={H2}"]
    assert i < j
    back = parse_lock(text)
    assert back.pins == {"attrs": "23.1.0", "requests": "2.31.0"}
    assert back.inputs_hash == "0123456789abcdef" * 2 and back.hashed
    assert back.debs == {"libpq-dev": "15.8-0+deb12u1"}
    assert parse_lock("requests==1.0\n") is None  # not a lock setupbot can vouch for


def test_lock_without_hashes_says_so():
    lock = RequirementsLock([LockEntry("six", "1.16.0")], "f" * 32)
    assert not lock.hashed
    assert "six==1.16.0\n" in lock.render()


def test_inputs_hash_is_stable_and_follows_the_ranges(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    (repo / "requirements.txt").write_text("requests>=2\n")
    first = inputs_hash(plan(repo).graph)
    assert first == inputs_hash(plan(repo).graph)
    (repo / "requirements.txt").write_text("requests>=2.30\n")
    assert inputs_hash(plan(repo).graph) != first
    # a repair after planning does not change what the lock was resolved from
    p = plan(repo)
    assert p.graph.meta["inputs_hash"] == inputs_hash(p.graph)


def _locked_graph(name: str, lock: RequirementsLock | None = None) -> DepGraph:
    g = plan(REPOS / name).graph
    apply_lock(
        g,
        lock or sample_lock(),
        ".devcontainer/requirements.lock",
        source="test",
        apt_versions={"libpq-dev": "15.8-0+deb12u1"},
    )
    return g


COVERING = RequirementsLock(
    [
        LockEntry(n, v, [H1])
        for n, v in (("psycopg", "3.2.1"), ("psycopg-binary", "3.2.1"), ("redis", "5.0.8"), ("pytest", "8.3.2"))
    ],
    "0123456789abcdef" * 2,
    "3.11",
)


def test_locked_dockerfile_installs_the_lock_with_hashes_and_no_deps():
    g = _locked_graph("plan-ci-services", COVERING)
    text = compile_dockerfile(g).text
    assert 'COPY [".devcontainer/requirements.lock", "/tmp/requirements.lock"]' in text
    assert "python -m pip install --no-cache-dir --require-hashes --no-deps -r /tmp/requirements.lock" in text
    # the lock comes before the source, the project after it without resolving again
    assert text.index("--require-hashes") < text.index('COPY [".", "/workspace"]') < text.index("--no-deps -e")
    assert "libpq-dev=15.8-0+deb12u1" in text
    assert "inputs sha256:" + "0123456789abcdef" * 2 in text
    # what the lock covers is not installed a second time: the lock and the project are the only
    # pip steps left
    unlocked = compile_dockerfile(plan(REPOS / "plan-ci-services").graph).text
    assert "redis" in unlocked and "pytest" in unlocked.split('COPY [".", "/workspace"]')[0]
    assert text.count("pip install") == 2 and "redis" not in text


def test_locked_dockerfile_still_installs_what_the_lock_does_not_cover():
    g = _locked_graph("plan-ci-services")
    text = compile_dockerfile(g).text
    # not in the sample lock: installed after it, as before
    after = text.split("--require-hashes")[1]
    assert "redis" in after and "pytest" in after


def test_a_requirement_whose_marker_excludes_the_image_python_is_not_installed_after_the_lock(tmp_path):
    """dishka on Python 3.13 kept ``pip install 'exceptiongroup>=1.1.3; python_version < "3.11"'``
    after its lock: a no-op, since the replay proved the set without it. A requirement whose
    marker holds stays."""
    repo = tmp_path / "r"
    shutil.copytree(REPOS / "plan-ci-services", repo)
    manifest = repo / "pyproject.toml"
    manifest.write_text(
        manifest.read_text().replace(
            '"redis"]',
            """"redis", 'exceptiongroup>=1.1.3; python_version < "3.11"', 'tomli-w; python_version >= "3.11"']""",
        )
    )
    g = plan(repo).graph
    assert g.runtime.attrs["version"] == "3.11"
    unlocked = compile_dockerfile(g).text
    assert "exceptiongroup" in unlocked  # without a lock the Dockerfile says what the manifest says
    apply_lock(g, COVERING, ".devcontainer/requirements.lock", source="test")
    text = compile_dockerfile(g).text
    assert "exceptiongroup" not in text
    assert "tomli-w" in text.split("--require-hashes")[1]


def test_unhashed_lock_installs_without_require_hashes():
    g = plan(REPOS / "plan-ci-services").graph
    apply_lock(
        g, RequirementsLock([LockEntry("six", "1.16.0")], "f" * 32), ".devcontainer/requirements.lock", source="test"
    )
    text = compile_dockerfile(g).text
    assert "--no-deps -r /tmp/requirements.lock" in text and "--require-hashes" not in text


def test_lock_summary_for_the_report():
    g = _locked_graph("plan-ci-services")
    s = lock_summary(g)
    assert s["count"] == 2 and s["hashed"] and s["refresh"] == "setupbot run --refresh-lock ."
    assert lock_summary(plan(REPOS / "plan-ci-services").graph) == {}


def test_report_says_locked_n_distributions():
    from bot.report.model import from_pipeline
    from bot.report.render import render_report

    g = _locked_graph("plan-ci-services")
    report = from_pipeline({"graph": g.to_json(), "python": "3.11"}, None, None, repository="x")
    text = render_report(report)
    assert "locked 2 distributions" in text
    assert "sha256:" + "0123456789abcdef" * 2 in text and "setupbot run --refresh-lock" in text


def _with_lock(tmp_path: Path, inputs: str) -> Path:
    repo = tmp_path / "r"
    shutil.copytree(REPOS / "plan-ci-services", repo)
    lock = RequirementsLock([LockEntry("requests", "2.31.0", [H1])], inputs, "3.11", debs={"libpq-dev": "15.8"})
    (repo / ".devcontainer").mkdir(exist_ok=True)
    (repo / ".devcontainer" / "requirements.lock").write_text(lock.render())
    return repo


def test_plan_reuses_the_lock_while_its_inputs_are_unchanged(tmp_path, monkeypatch):
    from bot.compile import plan as plan_mod

    monkeypatch.setattr(plan_mod, "sdist_only", lambda *a, **k: None)
    monkeypatch.setattr(plan_mod, "uv_compile", lambda *a, **k: pytest.fail("a reused lock is not resolved again"))
    inputs = plan(REPOS / "plan-ci-services").graph.meta["inputs_hash"]
    repo = _with_lock(tmp_path, inputs)
    p = plan(repo, load_settings(repo), resolve=True)
    assert p.graph.nodes[LOCK_NODE].attrs["source"].startswith("reused")
    assert p.graph.meta["resolution"]["from_lock"] == ".devcontainer/requirements.lock"
    assert "libpq-dev=15.8" in p.dockerfile.text


def test_refresh_lock_and_changed_inputs_resolve_anew(tmp_path, monkeypatch):
    from bot.compile import plan as plan_mod
    from bot.graph.resolve import Resolution

    calls = []
    monkeypatch.setattr(plan_mod, "sdist_only", lambda *a, **k: None)
    monkeypatch.setattr(plan_mod, "uv_compile", lambda *a, **k: calls.append(1) or Resolution(True, {}))
    inputs = plan(REPOS / "plan-ci-services").graph.meta["inputs_hash"]
    repo = _with_lock(tmp_path, inputs)
    refreshed = plan(repo, load_settings(repo, overrides={"output": {"refresh_lock": True}}), resolve=True)
    assert LOCK_NODE not in refreshed.graph.nodes and calls
    assert any("refreshed on request" in w.message for w in refreshed.warnings)
    repo2 = _with_lock(tmp_path / "b", "0" * 32)
    stale = plan(repo2, load_settings(repo2), resolve=True)
    assert LOCK_NODE not in stale.graph.nodes
    assert any("other inputs" in w.message for w in stale.warnings)


def test_refresh_lock_flag_reaches_the_settings(tmp_path):
    from bot.cli import build_parser

    args = build_parser().parse_args(["run", str(tmp_path), "--refresh-lock"])
    assert args.refresh_lock is True


# --- freezing and hashes ------------------------------------------------------------------------


def test_freeze_and_dpkg_output_parsing():
    out = 'pip noise\nSETUPBOT-DISTS:[["Requests", "2.31.0", false], ["myproj", "0.1", true]]\n'
    s = vlock.parse_freeze_output(out)
    assert s.dists == {"requests": "2.31.0"} and s.from_url == {"myproj": "0.1"}
    assert not vlock.parse_freeze_output("Traceback ...").ok
    assert vlock.parse_dpkg_output("libpq-dev=15.8-0+deb12u1\ngit=1:2.39.5-0+deb12u1\nbad line\n") == {
        "libpq-dev": "15.8-0+deb12u1",
        "git": "1:2.39.5-0+deb12u1",
    }


def test_lockable_pins_leave_out_the_project_and_the_base_image():
    replay = vlock.InstalledSet(
        dists={"pip": "24.0", "setuptools": "75.0", "requests": "2.31.0"}, from_url={"myproj": "0.1"}
    )
    base = vlock.InstalledSet(dists={"pip": "24.0", "setuptools": "65.5.1"})
    pins, from_url = vlock.lockable_pins(replay, base, "myproj")
    assert pins == {"setuptools": "75.0", "requests": "2.31.0"} and from_url == []
    replay.from_url["other"] = "1.0"
    assert vlock.lockable_pins(replay, base, "myproj")[1] == ["other"]


class _Resp(io.BytesIO):
    def __init__(self, body: str, ctype: str) -> None:
        super().__init__(body.encode())
        self.headers = {"Content-Type": ctype}

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def test_index_hashes_from_a_simple_html_page_and_pep691_json():
    html = (
        '<a href="../../f/tiny-1.0.tar.gz#sha256=' + "1" * 64 + '">x</a>'
        '<a href="tiny-1.0-py3-none-any.whl#sha256=' + "2" * 64 + '">x</a>'
        '<a href="tiny-1.1-py3-none-any.whl#sha256=' + "3" * 64 + '">x</a>'
    )
    seen = []

    def opener(req, timeout):
        seen.append(req.full_url)
        return _Resp(html, "text/html")

    got = vlock.index_hashes("Tiny", "1.0", index_url="http://127.0.0.1:1/simple", opener=opener)
    assert got == ["sha256:" + "1" * 64, "sha256:" + "2" * 64]
    assert seen == ["http://127.0.0.1:1/simple/tiny/"]
    body = '{"files": [{"filename": "tiny-1.0.tar.gz", "hashes": {"sha256": "' + "4" * 64 + '"}}]}'
    got = vlock.index_hashes(
        "tiny",
        "1.0",
        index_url="http://x/simple",
        opener=lambda req, timeout: _Resp(body, "application/vnd.pypi.simple.v1+json"),
    )
    assert got == ["sha256:" + "4" * 64]


def test_without_an_index_given_hashes_come_from_the_index_pip_uses_here(monkeypatch):
    """No registry host is written in setupbot: without a configured index the listing is the
    simple page of pip's own default index (asked of pip), and a configured index replaces it.
    The simple API is what every mirror serves (odfpy 1.4.1, an sdist, got no hash from a proxy
    that had no JSON API, and the lock did not build)."""
    from pip._internal.models.index import PyPI

    seen = []

    def opener(req, timeout):
        seen.append(req.full_url)
        return _Resp('<a href="odfpy-1.4.1.tar.gz#sha256=' + "5" * 64 + '">odfpy-1.4.1.tar.gz</a>', "text/html")

    for var in ("PIP_INDEX_URL", "UV_INDEX_URL", "UV_DEFAULT_INDEX"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    assert vlock.index_hashes("odfpy", "1.4.1", opener=opener) == ["sha256:" + "5" * 64]
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/mirror/simple/")
    assert vlock.index_hashes("ODFPy", "1.4.1", opener=opener) == ["sha256:" + "5" * 64]
    assert seen == [PyPI.simple_url.rstrip("/") + "/odfpy/", "http://127.0.0.1:9/mirror/simple/odfpy/"]


def test_a_lock_that_cannot_hash_every_distribution_carries_no_hashes():
    """pip checks every requirement's hashes once one has any: a lock with an unhashed pin
    writes none (and says why), so its own install does not refuse that pin."""
    lock = RequirementsLock(
        [LockEntry("six", "1.16.0", [H1]), LockEntry("odfpy", "1.4.1", [])], "0123456789abcdef" * 2, "3.11"
    )
    text = lock.render()
    assert "--hash" not in text.replace("# no --hash lines", "") and "odfpy==1.4.1\nsix==1.16.0\n" in text
    assert "# no --hash lines: the index gave none for odfpy" in text
    assert not parse_lock(text).hashed
    whole = RequirementsLock([LockEntry("six", "1.16.0", [H1])], "0123456789abcdef" * 2, "3.11").render()
    assert f"--hash={H1}" in whole and "no --hash lines" not in whole


def test_fetch_hashes_falls_back_to_the_index_for_what_uv_will_not_hash(monkeypatch):
    calls = []

    def fake_uv(pins, python, **kw):
        calls.append(dict(pins))
        if "docopt" in pins:
            return {}, "Because docopt==0.6.2 has no usable wheels and you require docopt==0.6.2, ..."
        return {n: LockEntry(n, v, [H1]) for n, v in pins.items()}, ""

    monkeypatch.setattr(vlock, "uv_hashes", fake_uv)
    monkeypatch.setattr(vlock, "index_hashes", lambda n, v, **kw: [H2] if n == "docopt" else [])
    entries, notes = vlock.fetch_hashes({"docopt": "0.6.2", "six": "1.16.0"}, "3.11")
    assert {e.name: e.hashes for e in entries} == {"docopt": [H2], "six": [H1]}
    assert calls[-1] == {"six": "1.16.0"} and notes == []


def test_hashes_uv_gave_once_are_not_asked_for_again_in_the_same_run(monkeypatch):
    """The plan's lock, the tested container's and the replay's share most pins: the second
    draft asks uv only for what is new (another version is new too)."""
    calls = []

    def fake_uv(pins, python, **kw):
        calls.append(dict(pins))
        return {n: LockEntry(n, v, [H1 if n == "six" else H2]) for n, v in pins.items()}, ""

    monkeypatch.setattr(vlock, "uv_hashes", fake_uv)
    first, _ = vlock.fetch_hashes({"six": "1.16.0", "idna": "3.7"}, "3.11")
    again, notes = vlock.fetch_hashes({"six": "1.16.0", "idna": "3.8", "attrs": "24.2.0"}, "3.11")
    assert calls == [{"six": "1.16.0", "idna": "3.7"}, {"idna": "3.8", "attrs": "24.2.0"}]
    assert {e.name: (e.version, e.hashes) for e in again} == {
        "six": ("1.16.0", [H1]),
        "idna": ("3.8", [H2]),
        "attrs": ("24.2.0", [H2]),
    }
    # another Python or index is asked again
    vlock.fetch_hashes({"six": "1.16.0"}, "3.12")
    vlock.fetch_hashes({"six": "1.16.0"}, "3.11", index_url="http://127.0.0.1:1/simple")
    assert calls[2:] == [{"six": "1.16.0"}, {"six": "1.16.0"}] and notes == []


class _Engine:
    """Freezes images from a table; builds record what they were given."""

    def __init__(self, sets: dict[str, str], build_ok: bool = True) -> None:
        self.sets = sets
        self.builds: list[str] = []
        self.build_ok = build_ok

    def run_once(self, image, argv, timeout=300, env=None, network="none"):
        if argv[0] == "dpkg-query":
            return ExecResult(list(argv), 0, "libpq-dev=15.8\nbuild-essential=12.9\n", 0.1)
        return ExecResult(list(argv), 0, "SETUPBOT-DISTS:" + self.sets[image], 0.1)

    def build(self, context, text, tag, no_cache=False):
        self.builds.append(text)
        self.sets[tag] = self.sets[next(iter(self.sets))]
        return BuildResult(self.build_ok, tag, "boom" if not self.build_ok else "", 1.0)


def test_lock_environment_writes_builds_and_checks_the_lock(tmp_path, monkeypatch):
    repo = tmp_path / "r"
    shutil.copytree(REPOS / "plan-ci-services", repo)
    g = plan(repo).graph
    monkeypatch.setattr(
        vlock, "fetch_hashes", lambda pins, py, **kw: ([LockEntry(n, v, [H1]) for n, v in sorted(pins.items())], [])
    )
    monkeypatch.setattr(vlock, "_compiled_pins", lambda *a, **k: None)  # no resolution here
    engine = _Engine(
        {
            "setupbot-loop-x:replay-2": '[["requests", "2.31.0", false], ["pip", "24.0", false]]',
            "python:3.11-slim": '[["pip", "24.0", false]]',
        }
    )
    out = vlock.lock_environment(engine, repo, g, replay_tag="setupbot-loop-x:replay-2", output_dir=".devcontainer")
    assert out.status == "locked", out.reason
    assert out.tag == "setupbot-loop-x:locked" and out.lock.pins == {"requests": "2.31.0"}
    assert (repo / ".devcontainer" / "requirements.lock").read_text() == out.text
    assert "--require-hashes" in engine.builds[0] and "libpq-dev=15.8" in engine.builds[0]
    # a second pass over a graph that installs this lock changes nothing and builds nothing
    apply_lock(g, out.lock, out.file, source="test", apt_versions=out.apt_versions)
    again = vlock.lock_environment(engine, repo, g, replay_tag="setupbot-loop-x:locked", output_dir=".devcontainer")
    assert again.status == "unchanged" and len(engine.builds) == 1


def test_a_lock_that_does_not_build_is_not_kept(tmp_path, monkeypatch):
    repo = tmp_path / "r"
    shutil.copytree(REPOS / "plan-ci-services", repo)
    monkeypatch.setattr(
        vlock, "fetch_hashes", lambda pins, py, **kw: ([LockEntry(n, v, [H1]) for n, v in sorted(pins.items())], [])
    )
    monkeypatch.setattr(vlock, "_compiled_pins", lambda *a, **k: None)
    engine = _Engine({"t:replay-1": '[["requests", "2.31.0", false]]', "python:3.11-slim": "[]"}, build_ok=False)
    out = vlock.lock_environment(engine, repo, plan(repo).graph, replay_tag="t:replay-1", output_dir=".devcontainer")
    assert out.status == "failed" and "did not build" in out.reason
    assert not (repo / ".devcontainer" / "requirements.lock").exists()
    # a hand-written lock is never replaced
    (repo / ".devcontainer").mkdir(exist_ok=True)
    (repo / ".devcontainer" / "requirements.lock").write_text("requests==2.0\n")
    out = vlock.lock_environment(engine, repo, plan(repo).graph, replay_tag="t:replay-1", output_dir=".devcontainer")
    assert out.status == "skipped"
    assert (repo / ".devcontainer" / "requirements.lock").read_text() == "requests==2.0\n"


# --- the resolution cache -----------------------------------------------------------------------


def test_resolutions_are_cached_by_their_inputs(tmp_path, monkeypatch):
    from bot.graph import resolve
    from bot.graph.resolve import Resolution

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    from types import SimpleNamespace

    monkeypatch.setattr(resolve, "shutil", SimpleNamespace(which=lambda name: "/usr/bin/uv"))
    calls = []

    def fake(uv, reqs, python, *rest):
        calls.append((tuple(reqs), python))
        if reqs == ["slow"]:
            return Resolution(False, error="uv pip compile timed out after 1s")
        return Resolution(True, {"requests": "2.31.0"}, seconds=5.0)

    monkeypatch.setattr(resolve, "_uv_compile", fake)
    first = resolve.uv_compile(["requests>=2"], "3.11")
    again = resolve.uv_compile(["requests>=2"], "3.11")
    assert first.pins == again.pins == {"requests": "2.31.0"} and len(calls) == 1
    assert again.seconds == 0.0
    resolve.uv_compile(["requests>=2"], "3.12")  # another input: resolved
    resolve.uv_compile(["requests>=2"], "3.11", use_cache=False)  # a refresh: resolved
    resolve.uv_compile(["requests>=2"], "3.11", constraints=["urllib3<2"])
    assert len(calls) == 4
    resolve.uv_compile(["slow"], "3.11")
    resolve.uv_compile(["slow"], "3.11")  # a timeout is not an answer
    assert len(calls) == 6
    monkeypatch.setattr(resolve, "CACHE_SECONDS", -1)  # expired
    resolve.uv_compile(["requests>=2"], "3.11")
    assert len(calls) == 7


def test_a_large_lock_is_installed_with_uv_from_a_throwaway_folder():
    big = RequirementsLock([LockEntry(f"pkg{i}", "1.0", [H1]) for i in range(25)], "0123456789abcdef" * 2, "3.11")
    text = compile_dockerfile(_locked_graph("plan-ci-services", big)).text
    step = next(b for b in text.split("\n\n") if "/tmp/requirements.lock" in b and b.lstrip().startswith(("#", "RUN")))
    assert "pip install --no-cache-dir --target /tmp/uv uv" in step
    assert "/tmp/uv/bin/uv pip install --system --no-cache --require-hashes --no-deps -r /tmp/requirements.lock" in step
    assert step.rstrip().endswith("rm -rf /tmp/uv")
    small = compile_dockerfile(_locked_graph("plan-ci-services", COVERING)).text
    assert "/tmp/uv" not in small


class _PickyEngine(_Engine):
    """Builds fail when the Dockerfile has no compiler and ``needs_compiler`` is set."""

    def __init__(self, sets, needs_compiler: bool) -> None:
        super().__init__(sets)
        self.needs_compiler = needs_compiler

    def build(self, context, text, tag, no_cache=False):
        result = super().build(context, text, tag, no_cache)
        if self.needs_compiler and "build-essential" not in text:
            return BuildResult(False, tag, "error: command 'gcc' failed: No such file or directory", 1.0)
        return result


class _DebsEngine(_PickyEngine):
    """Reads ``debs`` as the replay's Debian packages; with ``needs`` (package, error), a build
    whose Dockerfile lacks that package fails with that error."""

    def __init__(self, sets, debs: str, needs: tuple[str, str] | None = None) -> None:
        super().__init__(sets, needs_compiler=False)
        self.debs, self.needs = debs, needs

    def run_once(self, image, argv, timeout=300, env=None, network="none"):
        if argv[0] == "dpkg-query":
            return ExecResult(list(argv), 0, self.debs, 0.1)
        return super().run_once(image, argv, timeout, env, network)

    def build(self, context, text, tag, no_cache=False):
        if self.needs is not None and self.needs[0] not in text:
            self.builds.append(text)
            return BuildResult(False, tag, self.needs[1], 1.0)
        return super().build(context, text, tag, no_cache)


def _wheels_everywhere(monkeypatch, wheels: bool = True):
    from bot.graph import resolve
    from bot.graph.resolve import Resolution

    monkeypatch.setattr(
        vlock, "fetch_hashes", lambda pins, py, **kw: ([LockEntry(n, v, [H1]) for n, v in sorted(pins.items())], [])
    )
    # the lock module's own names: the tests never ask the real index
    monkeypatch.setattr(resolve, "sdist_only", lambda pins, *a, **k: None if wheels else "psycopg2")
    monkeypatch.setattr(resolve, "uv_compile", lambda *a, **k: Resolution(wheels, {}))
    monkeypatch.setattr(vlock, "wheel_less", lambda pins, *a, **k: [] if wheels else ["psycopg2"])


def test_the_locked_image_leaves_the_compiler_out_when_every_pin_has_a_wheel(tmp_path, monkeypatch):
    repo = tmp_path / "r"
    shutil.copytree(REPOS / "plan-ci-services", repo)
    g = plan(repo).graph
    assert g.nodes["systemlib:build-essential"].action == "apt"
    _wheels_everywhere(monkeypatch)
    sets = {"t:replay-1": '[["psycopg", "3.2.1", false]]', "python:3.11-slim": "[]"}
    engine = _PickyEngine(dict(sets), needs_compiler=False)
    out = vlock.lock_environment(engine, repo, g, replay_tag="t:replay-1", output_dir=".devcontainer")
    assert out.status == "locked" and len(engine.builds) == 1
    assert "build-essential" not in engine.builds[0] and "libpq-dev" in engine.builds[0]
    assert out.graph.nodes["systemlib:build-essential"].action is None
    assert any("build-essential left out" in n for n in out.notes)
    # the lock's header lists what the Dockerfile installs: the compiler is not among them
    header = (repo / ".devcontainer" / "requirements.lock").read_text()
    assert "# apt: libpq-dev=15.8" in header and "build-essential" not in header
    # a build that needed it after all gets it back
    (repo / ".devcontainer" / "requirements.lock").unlink()
    engine = _PickyEngine(dict(sets), needs_compiler=True)
    out = vlock.lock_environment(engine, repo, plan(repo).graph, replay_tag="t:replay-1", output_dir=".devcontainer")
    assert out.status == "locked" and len(engine.builds) == 2 and "build-essential" in engine.builds[1]
    assert out.graph.nodes["systemlib:build-essential"].action == "apt"
    assert any("build-essential kept" in n for n in out.notes)
    header = (repo / ".devcontainer" / "requirements.lock").read_text()
    assert "# apt: build-essential=12.9" in header and header == out.text


def test_build_tools_a_ci_workflow_names_are_left_out_with_the_compiler(tmp_path, monkeypatch):
    """python-control's CI builds slycot from source with cmake and gfortran; every locked
    distribution had a wheel, yet both stayed in its 1.05 GB image. They are left out with
    build-essential, as is a Rust toolchain from Debian a workflow installs for a dependency's
    sdist; the BLAS headers, a library, stay. A build that fails without them gets them all
    back."""
    repo = tmp_path / "r"
    shutil.copytree(REPOS / "plan-ci-services", repo)
    wf = repo / ".github" / "workflows"
    for f in wf.iterdir():
        f.write_text(
            f.read_text().replace("libpq-dev gettext", "libpq-dev gettext cmake gfortran libblas-dev rustc cargo")
        )
    g = plan(repo).graph
    assert {g.nodes[f"systemlib:{n}"].action for n in ("cmake", "gfortran", "libblas-dev", "rustc", "cargo")} == {"apt"}
    _wheels_everywhere(monkeypatch)
    sets = {"t:replay-1": '[["psycopg", "3.2.1", false]]', "python:3.11-slim": "[]"}

    debs = (
        "libpq-dev=15.8\nbuild-essential=12.9\ncmake=3.25.1-1\ngfortran=4:12.2.0-3\nlibblas-dev=3.11.0-2\n"
        "rustc=1.63.0+dfsg1-2\ncargo=0.66.0+ds1-1\n"
    )
    engine = _DebsEngine(dict(sets), debs)
    out = vlock.lock_environment(engine, repo, g, replay_tag="t:replay-1", output_dir=".devcontainer")
    assert out.status == "locked" and len(engine.builds) == 1
    built = engine.builds[0]
    assert not any(f" {t}" in built for t in ("build-essential", "cmake", "gfortran", "rustc", "cargo")), built
    assert "libblas-dev" in built and "libpq-dev" in built
    assert "build-essential, cargo, cmake, gfortran, rustc left out" in " ".join(out.notes), out.notes
    assert out.graph.nodes["systemlib:cmake"].action is None
    header = (repo / ".devcontainer" / "requirements.lock").read_text()
    assert "cmake=" not in header and "libblas-dev=3.11.0-2" in header

    (repo / ".devcontainer" / "requirements.lock").unlink()
    engine = _DebsEngine(dict(sets), debs, needs=("cmake", "CMake Error: cmake: not found"))
    out = vlock.lock_environment(engine, repo, plan(repo).graph, replay_tag="t:replay-1", output_dir=".devcontainer")
    assert out.status == "locked" and len(engine.builds) == 2
    assert all(t in engine.builds[1] for t in ("build-essential", "cmake", "gfortran", "rustc", "cargo"))
    assert out.graph.nodes["systemlib:gfortran"].action == "apt"
    assert any("build-essential, cargo, cmake, gfortran, rustc kept" in n for n in out.notes), out.notes
    assert "cmake=3.25.1-1" in (repo / ".devcontainer" / "requirements.lock").read_text()


def test_headers_only_a_source_build_needs_are_left_out_and_a_run_time_library_stays(tmp_path, monkeypatch):
    """iris-grib's image installed GEOS, PROJ and ecCodes headers (libeccodes-dev brings
    gfortran) for cartopy and eccodes, whose locked versions install from wheels: its apt layer
    took 47 s against 33 s with the ecCodes library alone, and its tests passed the same 447
    either way. The system table's build-only packages are left out with the compilers; the
    library the eccodes binding loads stays. One the CI installs itself, or a repair added,
    stays too, and a build that fails without them gets them back."""
    repo = tmp_path / "r"
    shutil.copytree(REPOS / "plan-ci-services", repo)
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"redis"]', '"redis", "cartopy", "eccodes"]'))
    g = plan(repo).graph
    headers = ("libgeos-dev", "libproj-dev", "proj-bin", "libeccodes-dev")
    assert {g.nodes[f"systemlib:{n}"].action for n in (*headers, "libeccodes0")} == {"apt"}
    assert all(g.nodes[f"systemlib:{n}"].attrs.get("build_only") for n in headers)
    assert not g.nodes["systemlib:libeccodes0"].attrs.get("build_only")
    _wheels_everywhere(monkeypatch)
    sets = {"t:replay-1": '[["cartopy", "0.23.0", false]]', "python:3.11-slim": "[]"}

    debs = "libpq-dev=15.8\nbuild-essential=12.9\nlibgeos-dev=3.11.1-1\nlibeccodes0=2.28.0-1\n"
    engine = _DebsEngine(dict(sets), debs)
    out = vlock.lock_environment(engine, repo, g, replay_tag="t:replay-1", output_dir=".devcontainer")
    assert out.status == "locked" and len(engine.builds) == 1
    built = engine.builds[0]
    assert not any(h in built for h in headers), built
    assert "libeccodes0" in built and "libpq-dev" in built
    assert all(out.graph.nodes[f"systemlib:{n}"].action is None for n in headers)
    assert "libeccodes-dev, libgeos-dev, libproj-dev, proj-bin left out" in " ".join(out.notes), out.notes
    header = (repo / ".devcontainer" / "requirements.lock").read_text()
    assert "libgeos-dev" not in header and "libeccodes0=2.28.0-1" in header

    (repo / ".devcontainer" / "requirements.lock").unlink()
    engine = _DebsEngine(dict(sets), debs, needs=("libgeos-dev", "fatal error: geos_c.h: No such file or directory"))
    out = vlock.lock_environment(engine, repo, plan(repo).graph, replay_tag="t:replay-1", output_dir=".devcontainer")
    assert out.status == "locked" and len(engine.builds) == 2 and all(h in engine.builds[1] for h in headers)
    assert any("libgeos-dev" in n and "kept" in n for n in out.notes), out.notes

    # the repository's CI installs the PROJ headers itself: they stay, the others go
    wf = repo / ".github" / "workflows"
    for f in wf.iterdir():
        f.write_text(f.read_text().replace("libpq-dev gettext", "libpq-dev gettext libproj-dev"))
    (repo / ".devcontainer" / "requirements.lock").unlink()
    g = plan(repo).graph
    assert not g.nodes["systemlib:libproj-dev"].attrs.get("build_only")
    engine = _DebsEngine(dict(sets), debs)
    out = vlock.lock_environment(engine, repo, g, replay_tag="t:replay-1", output_dir=".devcontainer")
    assert "libproj-dev" in engine.builds[0] and "libgeos-dev" not in engine.builds[0]
    # a repair that installs a header package makes it needed
    g = plan(repo).graph
    g.apply_atom(Atom("apt_install", {"packages": ["libgeos-dev"]}), "test")
    assert not g.nodes["systemlib:libgeos-dev"].attrs.get("build_only")


def test_the_compiler_stays_when_the_project_or_a_pin_compiles(tmp_path, monkeypatch):
    sets = {"t:replay-1": '[["psycopg2", "2.9.9", false]]', "python:3.11-slim": "[]"}
    repo = tmp_path / "r"
    shutil.copytree(REPOS / "plan-setup-py-only", repo)  # Extension(...) in setup.py
    _wheels_everywhere(monkeypatch)
    engine = _PickyEngine(dict(sets), needs_compiler=False)
    out = vlock.lock_environment(engine, repo, plan(repo).graph, replay_tag="t:replay-1", output_dir=".devcontainer")
    assert out.status == "locked" and "build-essential" in engine.builds[0]
    repo2 = tmp_path / "r2"
    shutil.copytree(REPOS / "plan-ci-services", repo2)
    _wheels_everywhere(monkeypatch, wheels=False)
    engine = _PickyEngine(dict(sets), needs_compiler=False)
    out = vlock.lock_environment(engine, repo2, plan(repo2).graph, replay_tag="t:replay-1", output_dir=".devcontainer")
    assert out.status == "locked" and "build-essential" in engine.builds[0]


def test_a_pure_python_pin_with_only_an_sdist_does_not_keep_the_compiler(tmp_path, monkeypatch):
    """flufl.flake8 has no wheel on the index, but the replay installed it from a pure-Python
    wheel it built: building that sdist needs no compiler, so the locked image is tried without
    build-essential. The wheel check runs over the other pins only."""
    repo = tmp_path / "r"
    shutil.copytree(REPOS / "plan-ci-services", repo)
    g = plan(repo).graph
    monkeypatch.setattr(
        vlock, "fetch_hashes", lambda pins, py, **kw: ([LockEntry(n, v, [H1]) for n, v in sorted(pins.items())], [])
    )
    asked: list[set] = []

    def wheel_less(pins, *a, **k):
        asked.append(set(pins))
        return ["flufl-flake8"] if "flufl-flake8" in pins else []

    monkeypatch.setattr(vlock, "wheel_less", wheel_less)
    sets = {
        "t:replay-1": '[["psycopg", "3.2.1", false, false], ["flufl.flake8", "0.10", false, true]]',
        "python:3.11-slim": "[]",
    }
    engine = _PickyEngine(dict(sets), needs_compiler=False)
    out = vlock.lock_environment(engine, repo, g, replay_tag="t:replay-1", output_dir=".devcontainer")
    assert out.status == "locked" and len(engine.builds) == 1
    assert "build-essential" not in engine.builds[0]
    assert asked == [{"psycopg"}]
    assert any("build-essential left out" in n and "pure Python" in n for n in out.notes), out.notes
    # a pin that is not pure and has only an sdist still needs it: in a builder stage
    (repo / ".devcontainer" / "requirements.lock").unlink()
    sets["t:replay-1"] = '[["psycopg", "3.2.1", false, false], ["flufl.flake8", "0.10", false, false]]'
    engine = _PickyEngine(dict(sets), needs_compiler=False)
    out = vlock.lock_environment(engine, repo, plan(repo).graph, replay_tag="t:replay-1", output_dir=".devcontainer")
    assert out.status == "locked" and "build-essential" in engine.builds[0]
    assert "AS wheels" in engine.builds[0] and out.lock.built == ["flufl-flake8"]


def test_the_freeze_program_reads_purelib_from_the_wheel_file(tmp_path):
    """The freeze program, run here on a made-up site-packages: a distribution whose WHEEL says
    Root-Is-Purelib: true is pure; one with false is not. A legacy `setup.py install` (an
    .egg-info, no WHEEL file) is pure when its file list names no extension module and no
    native source, and not when it names one or lists no file at all."""
    import subprocess
    import sys

    site = tmp_path / "site"
    for name, wheel in (("purepkg", "Root-Is-Purelib: true\n"), ("cpkg", "Root-Is-Purelib: false\n"), ("eggpkg", None)):
        info = site / f"{name}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        if wheel is not None:
            (info / "WHEEL").write_text("Wheel-Version: 1.0\n" + wheel)
    legacy = {
        # flufl.flake8 0.10 as pip 23's `setup.py install` leaves it: SOURCES.txt only
        "flufl.flake8": ("SOURCES.txt", "setup.py\nflufl/flake8/__init__.py\nflufl/flake8/imports.py\n"),
        "ceggpkg": ("SOURCES.txt", "setup.py\nceggpkg/__init__.py\nsrc/_speedups.c\n"),
        "soeggpkg": (
            "installed-files.txt",
            "../soeggpkg/__init__.py\n../soeggpkg/_native.cpython-311-x86_64-linux-gnu.so\n",
        ),
    }
    for name, (listing, text) in legacy.items():
        info = site / f"{name}-1.0-py3.11.egg-info"
        info.mkdir(parents=True)
        (info / "PKG-INFO").write_text(f"Metadata-Version: 1.1\nName: {name}\nVersion: 1.0\n")
        (info / listing).write_text(text)
    # only the made-up folder and the standard library (no site-packages of this interpreter)
    script = (
        "import sys; sys.path[:] = [sys.argv[1]] + [p for p in sys.path if 'packages' not in p]\n" + vlock.FREEZE_SCRIPT
    )
    r = subprocess.run([sys.executable, "-I", "-c", script, str(site)], capture_output=True, text=True, timeout=60)
    found = vlock.parse_freeze_output(r.stdout)
    assert found.ok, r.stderr
    assert found.dists == {
        "purepkg": "1.0",
        "cpkg": "1.0",
        "eggpkg": "1.0",
        "flufl-flake8": "1.0",
        "ceggpkg": "1.0",
        "soeggpkg": "1.0",
    }
    assert found.pure == {"purepkg", "flufl-flake8"}


def test_the_freeze_program_leaves_debian_s_own_python_packages_to_apt(tmp_path):
    """Debian's interpreter (a stand-in image) sees /usr/lib/python3/dist-packages, where an
    apt line's python3-mako put Mako 1.2.4.dev0, a version no index has: the freeze leaves it
    out, so the lock does not ask the index for it, and keeps what pip put beside it."""
    import subprocess
    import sys

    debian, site = tmp_path / "usr/lib/python3/dist-packages", tmp_path / "usr/local/lib/python3.11/dist-packages"
    for where, name, version in ((debian, "Mako", "1.2.4.dev0"), (site, "Jinja2", "3.1.4")):
        info = where / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "WHEEL").write_text("Wheel-Version: 1.0\nRoot-Is-Purelib: true\n")
    script = "import sys; sys.path[:] = sys.argv[1:] + [p for p in sys.path if 'packages' not in p]\n" + (
        vlock.FREEZE_SCRIPT.replace(repr(vlock.DEBIAN_DIST_PACKAGES), repr(str(debian)))
    )
    r = subprocess.run(
        [sys.executable, "-I", "-c", script, str(site), str(debian)], capture_output=True, text=True, timeout=60
    )
    found = vlock.parse_freeze_output(r.stdout)
    assert found.ok, r.stderr
    assert found.dists == {"jinja2": "3.1.4"}
    # the real folder, unreplaced, is Debian's
    assert "'/usr/lib/python3/dist-packages'" in vlock.FREEZE_SCRIPT


def test_a_failed_build_is_quoted_by_what_failed_not_by_the_engines_own_lines():
    """The legacy builder ends a failed step with its container removed and the whole command
    again, over several lines when the command has them: the report quotes the compiler's
    error instead."""
    log = (
        "Step 7/12 : RUN sh -c 'printf \"%s\\n\" \"$@\" > /tmp/built.txt' built 'python-pkcs11==0.7.0 --hash=sha256:97'\n"
        " ---> Running in 801d8ddebe9b\n"
        "\x1b[91m      src/pkcs11/_pkcs11.c:4:10: fatal error: pkcs11.h: No such file or directory\n"
        "      error: command '/usr/bin/gcc' failed with exit code 1\n"
        "\x1b[0m\x1b[91m  ERROR: Failed building wheel for python-pkcs11\n"
        "\x1b[0mRemoving intermediate container 801d8ddebe9b\n"
        "The command '/bin/sh -c sh -c 'printf \"%s\\n\" \"$@\" > /tmp/built.txt' built 'python-pkcs11==0.7.0\n"
        "    && pip wheel --no-deps -r /tmp/built.txt' returned a non-zero code: 1\n"
    )
    tail = vlock._log_tail(log, 2, 300)
    assert (
        tail == "error: command '/usr/bin/gcc' failed with exit code 1 ERROR: Failed building wheel for python-pkcs11"
    )
    assert "fatal error: pkcs11.h" in vlock._log_tail(log, 3, 300)
    # BuildKit's ending, and a log of nothing but the engine's lines
    kit = '#9 12.3 error: subprocess-exited-with-error\n#9 ERROR: process "/bin/sh -c pip wheel x" did not complete\n'
    assert vlock._log_tail(kit, 1, 300) == "#9 12.3 error: subprocess-exited-with-error"
    assert vlock._log_tail("Removing intermediate container 1\n", 1, 300) == "Removing intermediate container 1"


def test_no_lock_from_the_plan_when_the_project_computes_its_dependencies(write_tree):
    """The plan's lock installs the project with --no-deps, so it may stand only when every
    dependency was read: setup(install_requires=read_reqs()) or [project] dynamic dependencies
    that no file gives leave some unknown, and the first image installs the project with them.
    A dict literal that setup() unpacks (umap) is read, and its lock may be drafted. (One
    folder, each case writing over the last.)"""
    from bot.compile.plan import make_plan
    from bot.graph.mapping import Registry

    def refusal(files):
        plan = make_plan(
            write_tree(files), None, available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False)
        )
        plan.graph.meta["resolution"] = {"ok": True, "pins": {"attrs": "23.2.0"}}
        return vlock.plan_lock_refusal(plan.graph)

    computed = "from setuptools import setup\nsetup(name='c', install_requires=open('deps').read().split())\n"
    assert "computed by its build" in refusal({"setup.py": computed, "c/__init__.py": ""})
    unpacked = "from setuptools import setup\nsetup(**make_config())\n"
    assert "computed by its build" in refusal({"setup.py": unpacked, "c/__init__.py": ""})
    literal = "from setuptools import setup\nconf = {'name': 'c', 'install_requires': ['attrs']}\nsetup(**conf)\n"
    assert "computed" not in refusal({"setup.py": literal, "c/__init__.py": ""})
    dynamic = '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
    dynamic += '[project]\nname = "c"\nversion = "1"\ndynamic = ["dependencies"]\n'
    assert "computed by its build" in refusal({"pyproject.toml": dynamic, "setup.py": "", "c/__init__.py": ""})
    from_file = dynamic + '[tool.setuptools.dynamic]\ndependencies = {file = ["requirements.txt"]}\n'
    assert "computed" not in refusal({"pyproject.toml": from_file, "requirements.txt": "attrs\n", "setup.py": ""})
