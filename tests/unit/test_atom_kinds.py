"""The atom-kind registry defines each kind of repair once (bot.atoms.ATOM_KINDS): its schema,
how it reads, how it is trialled, how it changes the graph (bot.graph.apply.APPLY) and what the
compiled outputs make of it. Every kind is held to all of it here, on a real planned graph."""

from __future__ import annotations

import pytest

from bot.atoms import ATOM_KINDS, Atom, AtomError
from bot.compile import compile_dockerfile
from bot.compile.plan import make_plan
from bot.graph.apply import APPLY

EXAMPLES = {
    "apt_install": {"packages": ["libyaml-dev"]},
    "pip_install": {"packages": ["PyYAML"]},
    "pip_constraint": {"constraints": ["numpy<2"]},
    "switch_python": {"version": "3.13"},
    "set_env": {"name": "APP_ENV", "value": "test"},
    "start_service": {"service": "redis"},
    "use_tool": {"tool": "uv"},
    "run": {"command": ["python", "-c", "print(1)"]},
    "install_extras": {"extras": ["docs"]},
    "test_command": {"command": ["python", "-m", "pytest", "tests"]},
    "git_init": {},
    "install_deps_only": {},
    "install_project": {"name": "x"},
    "drop_package": {"manager": "pip", "packages": ["requests"]},
    "build_without_isolation": {"module": "numpy"},
    "compile_in_place": {"sources": ["x/fast/kernel.pyx"]},
}


@pytest.fixture()
def plan(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\nversion = "0"\ndependencies = ["requests"]\n'
        '[project.optional-dependencies]\ntest = ["pytest"]\ndocs = ["sphinx"]\n'
    )
    return make_plan(tmp_path, None, available_pythons=["3.11"], resolve=False)


# what a kind undoes must be there first
BEFORE = {"install_project": Atom("install_deps_only", {})}


def test_every_kind_is_defined_once_everywhere():
    assert set(EXAMPLES) == set(ATOM_KINDS) == set(APPLY)


@pytest.mark.parametrize("kind", sorted(ATOM_KINDS))
def test_a_kind_validates_reads_and_trials_as_its_entry_says(kind):
    spec = ATOM_KINDS[kind]
    atom = Atom.from_json({"kind": kind, **EXAMPLES[kind]})
    assert atom.describe().startswith(kind)
    for req in spec.required:
        with pytest.raises(AtomError, match=req):
            Atom(kind, {k: v for k, v in EXAMPLES[kind].items() if k != req}).validate()
    trial = atom.trial_commands()
    assert all(isinstance(argv, list) and all(isinstance(a, str) for a in argv) for argv in trial)
    if trial:
        assert spec.in_container  # a kind with commands to run is trialled in the runner


@pytest.mark.parametrize("kind", sorted(ATOM_KINDS))
def test_a_kind_changes_the_graph_and_compiles_as_its_entry_says(kind, plan):
    graph = plan.graph
    if kind in BEFORE:
        graph.apply_atom(BEFORE[kind], "test")
    before_graph, before_docker = graph.dumps(), compile_dockerfile(graph).text
    changed = graph.apply_atom(Atom(kind, EXAMPLES[kind]), "test")
    assert changed and graph.dumps() != before_graph
    after_docker = compile_dockerfile(graph).text
    assert (after_docker != before_docker) == ATOM_KINDS[kind].in_dockerfile, ATOM_KINDS[kind].compiles


def test_install_project_undoes_dependencies_only_for_the_projects_own_name_only(plan):
    graph = plan.graph
    graph.apply_atom(Atom("install_deps_only", {}), "test")
    assert graph.apply_atom(Atom("install_project", {"name": "requests"}), "test") == []  # a dependency
    assert graph.nodes["package:@project"].attrs.get("deps_only")
    assert graph.apply_atom(Atom("install_project", {"name": "X"}), "test") == ["package:@project"]
    assert not graph.nodes["package:@project"].attrs.get("deps_only")
    text = compile_dockerfile(graph).text
    assert "pip install --no-cache-dir -e '.[test]'" in text and "run from the checkout" not in text
    with pytest.raises(AtomError, match="not a distribution name"):
        Atom("install_project", {"name": "x; rm -rf /"}).validate()


def test_building_without_isolation_installs_the_module_first_or_puts_the_checkout_on_the_path(plan):
    graph = plan.graph
    # a distribution: its PACKAGE node is added (the import table names it) and the build sees it
    changed = graph.apply_atom(Atom("build_without_isolation", {"module": "yaml"}), "test")
    assert changed == ["package:@project", "package:pyyaml"]
    assert graph.nodes["package:@project"].attrs["build_imports"] == ["yaml"]
    text = compile_dockerfile(graph).text
    assert "--no-build-isolation -e '.[test]'" in text and "PYTHONPATH=/workspace" not in text
    assert text.index("PyYAML") < text.index("--no-build-isolation")
    # one the plan installs already is not added twice
    assert graph.apply_atom(Atom("build_without_isolation", {"module": "requests"}), "test") == ["package:@project"]
    assert graph.nodes["package:@project"].attrs["build_imports"] == ["yaml", "requests"]
    # a module the checkout holds (here the project's own name): the checkout goes on the path
    graph.apply_atom(Atom("build_without_isolation", {"module": "x.sub"}), "test")
    assert graph.nodes["package:@project"].attrs["self_import"] is True and "package:x" not in graph.nodes
    assert "env PYTHONPATH=/workspace python -m pip install" in compile_dockerfile(graph).text
    with pytest.raises(AtomError, match="not a module name"):
        Atom("build_without_isolation", {"module": "x; rm -rf /"}).validate()


def test_an_application_keeps_the_test_folders_already_on_the_path(tmp_path, write_tree):
    # the tests import a helper beside them from a package folder (tests/ on PYTHONPATH); the
    # application's own ENV PYTHONPATH, which comes later, must keep that folder
    files = {
        "pyproject.toml": '[project]\nname = "x"\nversion = "0"\n',
        "x/__init__.py": "",
        "tests/__init__.py": "",
        "tests/utils.py": "",
        "tests/test_x.py": "from utils import y\n",
    }
    write_tree(files)
    graph = make_plan(tmp_path, None, available_pythons=["3.11"], resolve=False).graph
    assert "ENV PYTHONPATH=/workspace/tests" in compile_dockerfile(graph).text
    graph.apply_atom(Atom("install_deps_only", {}), "test")
    envs = [line for line in compile_dockerfile(graph).text.splitlines() if line.startswith("ENV PYTHONPATH=")]
    assert envs == ["ENV PYTHONPATH=/workspace/tests", "ENV PYTHONPATH=/workspace:/workspace/tests"]


def test_code_that_imports_pkg_resources_keeps_a_setuptools_that_ships_it(tmp_path, write_tree):
    """setuptools 81 dropped pkg_resources: a test importing it gets setuptools<81 as a pin every
    install honours, with the import as its evidence; not when the project's build asks for a
    setuptools that new, and not when nothing imports it."""
    write_tree(
        {"requirements.txt": "requests\n", "tests/test_v.py": "import pkg_resources\n\ndef test_v():\n    pass\n"}
    )
    plan = make_plan(tmp_path, None, available_pythons=["3.11"], resolve=False)
    node = plan.graph.nodes["config:constraint:setuptools<81"]
    assert node.evidence[0][:2] == ("tests/test_v.py", 1)
    assert "'setuptools<81'" in plan.dockerfile.text and "PIP_CONSTRAINT" in plan.dockerfile.text
    write_tree(
        {"pyproject.toml": '[build-system]\nrequires = ["setuptools>=81"]\nbuild-backend = "setuptools.build_meta"\n'}
    )
    plan = make_plan(tmp_path, None, available_pythons=["3.11"], resolve=False)
    assert "config:constraint:setuptools<81" not in plan.graph.nodes
    (tmp_path / "pyproject.toml").unlink()
    (tmp_path / "tests" / "test_v.py").write_text("import importlib.metadata\n")
    plan = make_plan(tmp_path, None, available_pythons=["3.11"], resolve=False)
    assert "config:constraint:setuptools<81" not in plan.graph.nodes


def test_only_a_trial_s_pip_install_goes_to_uv():
    from bot.atoms import PIP_INSTALL
    from bot.loop.trials import UV_IN_RUNNER, uv_argv

    uv = uv_argv([*PIP_INSTALL, "attrs==23.2.0", "jaraco.develop >= 7.23"])
    assert uv is not None and uv[:2] == ["sh", "-c"]
    assert uv[3:] == [
        UV_IN_RUNNER,
        "pip",
        "install",
        "--system",
        "--quiet",
        "--no-cache",
        "attrs==23.2.0",
        "jaraco.develop >= 7.23",
    ]
    assert uv_argv(["apt-get", "install", "-y", "git"]) is None
    assert uv_argv(["python", "-m", "pip", "install", "--upgrade", "pip"]) is None
