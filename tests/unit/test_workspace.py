"""Workspaces and monorepos: members found, installed editable in dependency order from their
folders (never looked up on an index), tests run per member, results split per member."""

from __future__ import annotations

from pathlib import Path

from bot.compile.plan import make_plan
from bot.evidence import scan_repository
from bot.graph.build import PROJECT
from bot.graph.specs import install_specs
from bot.junit import TestResults
from bot.loop.records import member_results
from bot.report.model import from_pipeline

REPOS = Path(__file__).parents[1] / "fixtures" / "repos"
PYTHONS = ["3.11", "3.13"]


def test_uv_workspace_members_in_dependency_order_with_ci():
    ev = scan_repository(REPOS / "mono-uv-workspace")
    assert ev.workspace == "uv workspace"
    assert [m.name for m in ev.members] == ["core-lib", "app-lib"]
    app = ev.members[1]
    assert app.requires == ["core-lib"] and app.tests == "packages/app-lib/tests"
    assert all(m.ci is not None and m.ci.file == ".github/workflows/ci.yml" for m in ev.members)
    # the virtual root is not a package; a dependency on a member is local
    assert not ev.project.installable
    assert all(r.local for r in ev.requirements if r.name in ("core-lib", "app-lib"))
    assert any(r.name == "attrs" and r.source.file == "packages/app-lib/pyproject.toml" for r in ev.requirements)


def test_uv_workspace_plan():
    plan = make_plan(REPOS / "mono-uv-workspace", None, available_pythons=PYTHONS, resolve=False)
    g = plan.graph
    assert PROJECT not in g.nodes
    specs = install_specs(g)
    assert not any(s.startswith(("core-lib", "app-lib")) for s in specs), specs
    assert any(s.startswith("attrs") for s in specs)
    text = plan.dockerfile.text
    assert "-e 'packages/core-lib[test]' -e 'packages/app-lib[test]'" in text
    assert "pip install --no-cache-dir ." not in text and "-e ." not in text
    assert plan.test_command == [
        "python",
        "-m",
        "pytest",
        "--import-mode=importlib",
        "packages/core-lib/tests",
        "packages/app-lib/tests",
    ]
    assert plan.collect_command[:5] == plan.test_command[:5] and "--collect-only" in plan.collect_command


def test_libs_monorepo_with_tooling_only_root():
    ev = scan_repository(REPOS / "mono-libs")
    assert ev.workspace == "member folders"
    assert [m.path for m in ev.members] == ["libs/alpha", "libs/beta"]
    assert ev.members[1].requires == ["alpha-lib"]
    assert all(m.ci is None for m in ev.members)
    plan = make_plan(REPOS / "mono-libs", None, available_pythons=PYTHONS, resolve=False)
    assert "-e 'libs/alpha[test]' -e 'libs/beta[test]'" in plan.dockerfile.text
    assert not any(s.startswith("alpha-lib") for s in install_specs(plan.graph))
    assert plan.test_command[-2:] == ["libs/alpha/tests", "libs/beta/tests"]


def test_ci_names_a_subset_of_members(tmp_path):
    import shutil

    repo = tmp_path / "mono"
    shutil.copytree(REPOS / "mono-libs", repo)
    wf = repo / ".github" / "workflows"
    wf.mkdir(parents=True)
    (wf / "test.yml").write_text(
        "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: pip install -e .[test] && pytest\n        working-directory: libs/beta\n"
    )
    plan = make_plan(repo, None, available_pythons=PYTHONS, resolve=False)
    # both are installed (beta needs alpha), only the member CI tests is the target
    assert "-e 'libs/alpha[test]' -e 'libs/beta[test]'" in plan.dockerfile.text
    assert plan.test_command[-1] == "libs/beta/tests" and "libs/alpha/tests" not in plan.test_command
    assert (".github/workflows/test.yml", 7, "CI tests libs/beta") in plan.graph.target.evidence


def test_poetry_path_dependencies_are_members(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.poetry]\nname = "mono"\nversion = "0"\n\n[tool.poetry.dependencies]\npython = "^3.10"\n'
        'shared = {path = "components/shared", develop = true}\n'
    )
    (tmp_path / "components" / "shared").mkdir(parents=True)
    (tmp_path / "components" / "shared" / "pyproject.toml").write_text(
        '[project]\nname = "shared"\nversion = "1"\ndependencies = ["requests>=2"]\n'
    )
    ev = scan_repository(tmp_path)
    assert ev.workspace == "path dependencies"
    assert [m.path for m in ev.members] == ["components/shared"]
    assert any(r.name == "requests" for r in ev.requirements)


def test_plain_repository_has_no_members():
    ev = scan_repository(REPOS / "plan-uv-groups")
    assert ev.members == [] and ev.project.installable


def test_results_and_report_per_member():
    plan = make_plan(REPOS / "mono-uv-workspace", None, available_pythons=PYTHONS, resolve=False)
    results = TestResults(
        {
            "packages.core-lib.tests.test_basic::test_slug": "passed",
            "packages.app-lib.tests.test_basic::test_page_path": "passed",
            "packages.app-lib.tests.test_basic::test_page_title": "failed",
        }
    )
    members = member_results(plan.graph, results)
    assert [(m["name"], m["tests"]["passed"], m["tests"]["failed"]) for m in members] == [
        ("core-lib", 1, 0),
        ("app-lib", 1, 1),
    ]
    report = from_pipeline(plan, {"members": members, "replay": {"ok": True}})
    claims = [p.claim for p in report.proven]
    assert "member core-lib (packages/core-lib): 1 passed, 0 failed, 0 errors, 0 skipped" in claims
    # a member whose folder holds no test says so, instead of a row of zeros
    idle = [{**members[0], "tests": {"passed": 0, "failed": 0, "error": 0, "skipped": 0}}]
    item = from_pipeline(plan, {"members": idle, "replay": {"ok": True}}).proven[-1]
    assert item.claim == "member core-lib (packages/core-lib): installed; no test was collected from it"
    assert not item.proven and item.reason == "tested by CI"


def test_pdm_and_hatch_path_dependency_lines(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "mono"\nversion = "0"\ndependencies = ["alpha @ {root:uri}/libs/alpha"]\n\n'
        '[tool.pdm.dev-dependencies]\ndev = ["-e file:///${PROJECT_ROOT}/packages/beta", "pytest>=8"]\n\n'
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
    )
    for folder, name in (("libs/alpha", "alpha"), ("packages/beta", "beta")):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "1"\n')
    ev = scan_repository(tmp_path)
    assert ev.workspace == "path dependencies"
    assert sorted(m.path for m in ev.members) == ["libs/alpha", "packages/beta"]
    # the root builds (it has a build system): it stays a package beside its members
    assert ev.project.installable
    assert all(r.local for r in ev.requirements if r.name in ("alpha", "beta"))


def test_wrong_types_in_a_workspace_are_ignored_not_a_crash(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "w"\noptional-dependencies = ["x"]\ndependencies = "y"\n'
        'dependency-groups = 3\n\n[tool.uv]\nworkspace = {members = "libs/*", exclude = 7}\n'
        'sources = ["a"]\n\n[tool.poetry]\ngroup = []\ndependencies = "z"\n'
    )
    (tmp_path / "libs" / "a").mkdir(parents=True)
    (tmp_path / "libs" / "a" / "pyproject.toml").write_text(
        '[project]\nname = "a"\ndependencies = {x = 1}\noptional-dependencies = {test = "pytest"}\n[tool]\npoetry = 5\n'
    )
    ev = scan_repository(tmp_path)
    assert not any("workspace scanner failed" in w.message for w in ev.warnings), ev.warnings


def test_a_package_root_with_members_runs_its_own_tests_first(tmp_path):
    # modelcontextprotocol/python-sdk: the SDK is the root package (tests/), its example servers
    # are uv workspace members; only the members' folders were tested, and the SDK's 100 tests not
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "sdk"\nversion = "1"\nrequires-python = ">=3.10"\n\n'
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n'
        '[tool.uv.workspace]\nmembers = ["examples/servers/*"]\n'
    )
    (tmp_path / "src" / "sdk").mkdir(parents=True)
    (tmp_path / "src" / "sdk" / "__init__.py").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_sdk.py").write_text("def test_it():\n    pass\n")
    server = tmp_path / "examples" / "servers" / "echo"
    server.mkdir(parents=True)
    (server / "pyproject.toml").write_text('[project]\nname = "echo-server"\nversion = "0"\ndependencies = ["sdk"]\n')
    ev = scan_repository(tmp_path)
    assert ev.project.installable and ev.root_tests is not None
    # a member with no test of its own adds no folder (nonebot2's envs/test holds test
    # dependencies only): the root's configured run stays as it is
    assert make_plan(tmp_path, None, available_pythons=PYTHONS, resolve=False).test_command == [
        "python",
        "-m",
        "pytest",
    ]
    (server / "test_echo.py").write_text("def test_echo():\n    pass\n")
    plan = make_plan(tmp_path, None, available_pythons=PYTHONS, resolve=False)
    assert plan.test_command[3:] == ["--import-mode=importlib", "tests", "examples/servers/echo"]
    assert ("tests/", None, "the root package's tests") in plan.graph.target.evidence
    # a virtual root has no tests of its own to add
    assert scan_repository(REPOS / "mono-uv-workspace").root_tests is None


def test_a_uv_locked_workspace_installs_its_members_from_the_lock_not_with_pip(tmp_path):
    # pip resolving the members' dependencies anew moved five locked releases, and the uv sync
    # after it failed reinstalling them (modelcontextprotocol/python-sdk)
    import shutil

    repo = tmp_path / "ws"
    shutil.copytree(REPOS / "mono-uv-workspace", repo)
    (repo / "uv.lock").write_text(
        'version = 1\nrequires-python = ">=3.10"\n\n'
        '[[package]]\nname = "attrs"\nversion = "23.2.0"\nsource = { registry = "https://pypi.org/simple" }\n\n'
        '[[package]]\nname = "pytest"\nversion = "8.2.0"\nsource = { registry = "https://pypi.org/simple" }\n\n'
        '[[package]]\nname = "core-lib"\nversion = "0.1"\nsource = { editable = "packages/core-lib" }\n\n'
        '[[package]]\nname = "app-lib"\nversion = "0.1"\nsource = { editable = "packages/app-lib" }\n'
    )
    text = make_plan(repo, None, available_pythons=PYTHONS, resolve=False).dockerfile.text
    before, after = text.split('COPY [".", "/workspace"]')
    assert "uv sync --frozen --inexact --all-groups --all-packages --no-install-workspace" in before
    assert "--no-install-project" not in text and " -e packages/" not in text and "-e 'packages/" not in text
    assert "uv sync --frozen --inexact --all-groups --all-packages" in after
