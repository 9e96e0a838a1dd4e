"""The repository's own lock installed natively, a stale lock reported with its refresh
command (issue 16), and requirement files with hashes installed as they are."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bot.compile import compile_dockerfile
from bot.compile.plan import make_plan
from bot.graph import native_lock as native_lock_mod
from bot.graph.mapping import Registry
from bot.loop.orchestrator import SetupLoop
from bot.loop.records import RunRecord

REPOS = Path(__file__).parents[1] / "fixtures" / "repos"


def plan(repo: Path):
    return make_plan(repo, None, available_pythons=["3.11", "3.12"], resolve=False, registry=Registry(enabled=False))


def copy(name: str, tmp_path: Path) -> Path:
    repo = tmp_path / name
    shutil.copytree(REPOS / name, repo)
    return repo


# the source COPY (JSON form), before which only the lock and its manifests are copied
SOURCE = 'COPY [".", "/workspace"]'


def before_source(text: str) -> str:
    assert SOURCE in text
    return text.split(SOURCE)[0]


def test_uv_lock_is_synced_frozen_before_the_source_and_the_project_after():
    p = plan(REPOS / "plan-uv-groups")
    text = p.dockerfile.text
    assert 'COPY ["pyproject.toml", "uv.lock", "./"]' in before_source(text)
    assert "uv sync --frozen --inexact --all-groups --no-install-project" in before_source(text)
    after = text.split(SOURCE)[1]
    assert "uv sync --frozen --inexact --all-groups" in after and "--no-install-project" not in after
    # the locked dependencies are not installed again with pip, nor inlined
    assert "pydantic" not in text and "mypy" not in text and "PIP_CONSTRAINT" not in text
    assert not any("stale" in w.message for w in p.warnings)


def test_uv_sync_uses_the_images_python_whatever_python_version_says(tmp_path):
    # modelcontextprotocol/python-sdk pins 3.10 in .python-version; on a 3.11 image the sync
    # after the source (which brings that file) asked uv for a managed 3.10 and failed offline
    repo = copy("plan-uv-groups", tmp_path)
    (repo / ".python-version").write_text("3.10\n")
    text = plan(repo).dockerfile.text
    syncs = [line for line in text.splitlines() if "uv sync" in line]
    assert len(syncs) == 2 and all("UV_PYTHON=/usr/local/bin/python" in line for line in syncs)


def test_poetry_lock_is_installed_by_poetry():
    text = plan(REPOS / "plan-poetry-only").dockerfile.text
    assert "requests" not in before_source(text) and "pytest" not in before_source(text)
    # every group, the optional ones too: aisuite's pytest is in an optional test group, and
    # a plain `poetry install` left it out (its after-run row: 'No module named pytest')
    assert "env POETRY_VIRTUALENVS_CREATE=false poetry install --no-interaction --all-groups" in text
    # poetry runs from a virtual environment of its own: its dependencies stay out of the
    # project's environment (they clashed with the project's pins under pip check)
    assert "python -m venv /opt/poetry" in text and "/opt/poetry/bin/pip install --no-cache-dir poetry" in text
    assert "pip install --no-cache-dir poetry" not in text.replace("/opt/poetry/bin/pip", "")


def test_stale_poetry_lock_is_a_finding_with_the_refresh_command(tmp_path):
    repo = copy("plan-poetry-only", tmp_path)
    manifest = repo / "pyproject.toml"
    manifest.write_text(manifest.read_text().replace('requests = "^2.31"', 'requests = "^3.0"'))
    p = plan(repo)
    finding = next(w for w in p.warnings if "stale" in w.message)
    assert finding.file == "poetry.lock" and "`poetry lock`" in finding.message
    assert "requests" in finding.message and "2.31.0" in finding.message
    # it falls back to resolving the ranges: the ranges are installed, not the lock
    text = p.dockerfile.text
    assert "'requests<4,>=3.0'" in text and "poetry install" not in text
    assert p.graph.nodes["config:lock"].action is None


def test_stale_pdm_lock_falls_back_and_a_fresh_one_is_exported_by_pdm(tmp_path):
    p = plan(REPOS / "plan-pdm-only")  # its lock lacks attrs, which the manifest declares
    assert any(
        "pdm.lock is stale: attrs is declared but not in the lock" in w.message and "`pdm lock`" in w.message
        for w in p.warnings
    )
    assert "pdm export" not in p.dockerfile.text and "attrs" in p.dockerfile.text
    repo = copy("plan-pdm-only", tmp_path)
    lock = repo / "pdm.lock"
    for name, version in (("attrs", "23.2.0"), ("pytest", "8.2.0"), ("respx", "0.21.1")):
        lock.write_text(lock.read_text() + f'\n[[package]]\nname = "{name}"\nversion = "{version}"\n')
    text = plan(repo).dockerfile.text
    assert "pdm export" in text and "attrs" not in text and "respx" not in text


def _pipfile_lock(repo: Path, sqlalchemy: str) -> None:
    (repo / "Pipfile.lock").write_text(
        json.dumps(
            {
                "_meta": {"hash": {"sha256": "0"}},
                "default": {"flask": {"version": "==3.0.3"}, "sqlalchemy": {"version": f"=={sqlalchemy}"}},
                "develop": {"pytest": {"version": "==8.2.0"}},
            }
        )
    )


def test_pipfile_lock_is_installed_with_pipenv_deploy(tmp_path):
    repo = copy("plan-pipfile", tmp_path)
    _pipfile_lock(repo, "2.0.30")
    text = plan(repo).dockerfile.text
    after = text.split(SOURCE)[1]
    assert "pipenv install --system --deploy --dev" in after
    assert "flask" not in text.lower().replace("pipfile", "") and "sqlalchemy" not in text
    _pipfile_lock(repo, "1.4.52")
    p = plan(repo)
    assert any(
        "Pipfile.lock is stale: sqlalchemy>=2.0 is declared but the lock has 1.4.52" in w.message
        and "`pipenv lock`" in w.message
        for w in p.warnings
    )
    assert "pipenv" not in p.dockerfile.text and "'sqlalchemy>=2.0'" in p.dockerfile.text


def test_a_requirements_file_with_hashes_is_installed_as_it_is_in_its_own_step(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    (repo / "requirements.txt").write_text("six==1.16.0 \\\n    --hash=sha256:" + "1" * 64 + "\n")
    (repo / "requirements-test.txt").write_text("pytest\n")
    text = plan(repo).dockerfile.text
    runs = [block for block in text.split("\n\n") if "RUN python -m pip install" in block and " -r " in block]
    hashed = next(b for b in runs if "requirements.txt" in b and "requirements-test.txt" not in b)
    assert "pinned with hashes by requirements.txt, as they are" in hashed
    assert any("-r requirements-test.txt" in b and "-r requirements.txt" not in b for b in runs)


def test_report_and_replay_lock_step_name_the_native_lock(tmp_path):
    from bot.loop.lock import lock_environment
    from bot.report.model import from_pipeline
    from bot.report.render import render_report

    g = plan(REPOS / "plan-poetry-only").graph
    text = render_report(from_pipeline({"graph": g.to_json()}, None, None, repository="x"))
    assert "the repository's own `poetry.lock` (5 distributions), installed with poetry as it is" in text
    out = lock_environment(object(), tmp_path, g, replay_tag="t:1", output_dir=".devcontainer")
    assert out.status == "native" and not (tmp_path / ".devcontainer").exists()


def test_what_a_noxfile_installs_is_not_the_locks_business(tmp_path):
    # a noxfile session installs coverage, which pyproject.toml does not declare: the uv lock
    # locks pyproject.toml only, so it is not stale and is synced as it is
    repo = copy("plan-uv-groups", tmp_path)
    (repo / "noxfile.py").write_text(
        "import nox\n\n\n@nox.session\ndef tests(session):\n"
        '    session.install("coverage[toml]", "pytest")\n    session.run("coverage", "run", "-m", "pytest")\n'
    )
    p = plan(repo)
    assert not any("stale" in w.message for w in p.warnings), [w.message for w in p.warnings]
    assert "uv sync --frozen" in p.dockerfile.text
    # a declared requirement the lock lacks still makes it stale
    manifest = repo / "pyproject.toml"
    manifest.write_text(manifest.read_text().replace("dependencies = [", 'dependencies = [\n    "attrs>=23",', 1))
    assert any("uv.lock is stale: attrs is declared but not in the lock" in w.message for w in plan(repo).warnings)


POETRY_REFUSED = (
    "\x1b[0mInstalling dependencies from lock file\n\x1b[91mpyproject.toml changed significantly since "
    "poetry.lock was last generated. Run `poetry lock` to fix the lock file.\n"
)


def test_a_lock_its_own_tool_refuses_as_out_of_date_is_told_apart():
    assert native_lock_mod.refused_as_stale(POETRY_REFUSED).startswith("pyproject.toml changed significantly")
    assert native_lock_mod.refused_as_stale("Your Pipfile.lock (a1b2c3) is out of date. Expected: (d4e5f6).")
    assert native_lock_mod.refused_as_stale(
        "error: The lockfile at `uv.lock` needs to be updated, but `--locked` was provided."
    )
    assert not native_lock_mod.refused_as_stale("ERROR: No matching distribution found for requests==9")


def test_a_poetry_lock_poetry_refuses_falls_back_to_the_ranges_with_a_finding(tmp_path):
    """The lock satisfies every declared range (the static check passes), yet Poetry refuses
    it: its content hash says pyproject.toml changed since (proselint at 94a1eea). The run
    installs the ranges instead and says how to refresh the lock."""
    p = plan(copy("plan-poetry-only", tmp_path))
    assert native_lock_mod.native_lock(p.graph) is not None
    finding = native_lock_mod.drop_stale_lock(p.graph, "its tool refused it")
    assert finding is not None and finding.file == "poetry.lock" and "`poetry lock`" in finding.message
    text = compile_dockerfile(p.graph).text
    assert "poetry install" not in text and "'requests<3,>=2.31'" in text
    assert native_lock_mod.native_lock(p.graph) is None


def test_the_loop_drops_a_lock_its_tool_refused_and_says_so(tmp_path):
    p = plan(copy("plan-poetry-only", tmp_path))
    lp = SetupLoop.__new__(SetupLoop)
    lp.plan, lp.record = p, RunRecord(repo="r", run_id="x")
    lp.traj = lp.record.trajectory
    assert not lp._drop_refused_lock("E: Unable to locate package libfoo")
    assert native_lock_mod.native_lock(p.graph) is not None
    assert lp._drop_refused_lock(POETRY_REFUSED)
    assert native_lock_mod.native_lock(p.graph) is None
    assert any("poetry.lock is stale" in w and "`poetry lock`" in w for w in lp.record.warnings), lp.record.warnings
    assert not lp._drop_refused_lock(POETRY_REFUSED)  # once: the lock is no longer installed
