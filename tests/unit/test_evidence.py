"""Evidence scanners over the plan-* fixture repositories and hostile inputs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from bot.evidence import scan_repository
from bot.evidence.reqparse import poetry_constraint

REPOS = Path(__file__).parents[1] / "fixtures" / "repos"


def names(ev, group=None):
    return {r.name for r in ev.requirements if group is None or r.group == group}


def test_poetry_dependencies_groups_extras_and_lock():
    ev = scan_repository(REPOS / "plan-poetry-only")
    assert "requests" in names(ev, "main")
    assert {"pytest", "pytest-mock"} <= names(ev, "test")
    assert "pyyaml" in names(ev, "extra:yaml")
    req = next(r for r in ev.requirements if r.name == "requests")
    assert Requirement(req.spec).specifier == SpecifierSet(">=2.31,<3")  # poetry's ^2.31
    assert req.source.file == "pyproject.toml" and req.source.line == 9
    assert ev.locks[0].kind == "poetry" and ev.locks[0].pins["requests"] == "2.31.0"
    assert any(c.kind == "requires" and c.value.startswith(">=3.9") for c in ev.python)


def test_poetry_constraint_translation():
    assert poetry_constraint("^1.2.3") == ">=1.2.3,<2"
    assert poetry_constraint("^0.2") == ">=0.2,<0.3"
    assert poetry_constraint("~1.4") == ">=1.4,<1.5"
    assert poetry_constraint("*") == ""
    assert poetry_constraint("1.0") == "==1.0"


def test_requirements_includes_hashes_markers_and_bad_lines():
    ev = scan_repository(REPOS / "plan-requirements-includes")
    assert {"click", "numpy", "six", "attrs"} <= names(ev, "main")
    assert {"pytest", "requests-mock"} <= names(ev, "test")
    numpy = next(r for r in ev.requirements if r.name == "numpy")
    assert numpy.spec == "numpy==1.26.4" and "hash" not in numpy.spec
    click = next(r for r in ev.requirements if r.name == "click")
    assert 'python_version >= "3.8"' in click.spec
    msgs = [str(w) for w in ev.warnings]
    assert any("requirements-test.txt:3" in m and "cannot parse" in m for m in msgs)
    assert any("--index-url" in m for m in msgs)


def test_setup_py_is_read_statically():
    ev = scan_repository(REPOS / "plan-setup-py-only")
    assert {"requests", "psycopg2", "lxml"} <= names(ev, "main")
    assert "pytest" in names(ev, "extra:test")
    assert ev.project.name == "setup-demo"
    assert ev.project.c_extensions is not None and ev.project.c_extensions.file == "setup.py"
    assert ("test", ev.test_extras[0][1]) == ev.test_extras[0]
    assert {c.value for c in ev.python if c.kind == "tested"} == {"3.10", "3.11"}


def test_workflow_services_env_matrix_and_apt():
    ev = scan_repository(REPOS / "plan-ci-services")
    kinds = {s.kind: s for s in ev.services}
    assert kinds["postgres"].image == "postgres:15" and kinds["postgres"].env["POSTGRES_DB"] == "test"
    assert kinds["postgres"].ports == ["5432:5432"]
    assert kinds["redis"].evidence[0].file == ".github/workflows/ci.yml"
    assert "DATABASE_URL" in ev.env and "API_TOKEN" not in ev.env  # secrets are never copied
    assert {c.value for c in ev.python if c.kind == "tested"} >= {"3.9", "3.10", "3.11"}
    assert {"libpq-dev", "gettext"} <= {p for p, _ in ev.apt_packages}
    assert any(c.argv[0] == "pytest" and c.ci for c in ev.test_commands)


def test_compose_services_skip_the_application_and_expressions():
    ev = scan_repository(REPOS / "plan-compose")
    kinds = {s.kind: s for s in ev.services}
    assert set(kinds) == {"mongodb", "rabbitmq"}
    assert "RABBITMQ_DEFAULT_PASS" not in kinds["rabbitmq"].env
    assert kinds["rabbitmq"].env["RABBITMQ_DEFAULT_USER"] == "guest"


def test_malformed_files_are_warnings_and_the_rest_is_read():
    ev = scan_repository(REPOS / "plan-malformed-pyproject")
    w = [x for x in ev.warnings if x.file == "pyproject.toml"]
    assert w and w[0].line == 4 and "malformed TOML" in w[0].message
    assert {"requests", "rich"} <= names(ev, "main")
    ev = scan_repository(REPOS / "plan-malformed-workflow")
    w = [x for x in ev.warnings if x.file.endswith("broken.yml")]
    assert w and w[0].line == 5 and "malformed YAML" in w[0].message
    assert "3.10" in {c.value for c in ev.python if c.kind == "tested"}  # the good workflow still counts


def test_pytest_addopts_name_plugins_and_scm_is_detected():
    ev = scan_repository(REPOS / "plan-scm-plugins")
    plugins = {d for d, _ in ev.pytest_plugins}
    assert {"pytest-cov", "pytest-xdist", "pytest-timeout", "pytest-asyncio"} <= plugins
    assert ev.project.scm_tool == "setuptools-scm"


def test_imports_optional_local_and_tests():
    ev = scan_repository(REPOS / "plan-imports-only")
    mods = {u.module: u for u in ev.imports}
    assert mods["cv2"].optional and not mods["yaml"].optional
    assert "helpers" in ev.local_modules and "app" in ev.local_modules
    assert mods["pytest"].in_tests


def test_tox_nox_readme_and_lock_evidence():
    ev = scan_repository(REPOS / "plan-tox-unittest")
    assert ev.test_commands[0].argv[:3] == ["python", "-m", "unittest"]
    assert {c.value for c in ev.python if c.kind == "tested"} == {"3.9", "3.10", "3.11"}
    ev = scan_repository(REPOS / "plan-nox-readme")
    assert "tests" in {e for e, _ in ev.test_extras}
    assert "pytest-xdist" in names(ev, "test")
    assert any(c.docs and c.source.detail.startswith("docs") for c in ev.test_commands)
    ev = scan_repository(REPOS / "plan-uv-groups")
    assert {"pytest", "mypy"} <= names(ev, "test")  # include-group followed
    assert ev.project.scm_tool == "hatch-vcs"
    assert ev.locks[0].pins == {"mypy": "1.10.0", "pydantic": "2.7.1", "pytest": "8.2.0"}


def test_a_tox_factors_pin_is_not_the_projects_requirement(tmp_path: Path):
    """regions' tox.ini pins numpy per factor (numpy123: numpy==1.23.*) and asks for nightlies
    (devdeps: astropy>=0.0.dev0): neither is what the project requires. A factor's dependency
    that the project does not declare is still installed (dj50: Django>=5.0,<5.1)."""
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\nversion = "1"\ndependencies = ["numpy>=1.23", "astropy>=5.1"]\n'
    )
    (tmp_path / "tox.ini").write_text(
        "[tox]\nenvlist = py311-test\n[testenv]\ndeps =\n"
        "    numpy123: numpy==1.23.*\n    devdeps: numpy>=0.0.dev0\n    devdeps: astropy>=0.0.dev0\n"
        "    devdeps: pyerfa>=0.0.dev0\n    dj42: Django>=4.2,<4.3\n    dj50: Django>=5.0,<5.1\n"
        "commands = pytest\n"
    )
    ev = scan_repository(tmp_path)
    specs = {r.name: r.spec for r in ev.requirements}
    assert specs["numpy"] == "numpy>=1.23" and specs["astropy"] == "astropy>=5.1"
    assert [r.source.file for r in ev.requirements if r.name in ("numpy", "astropy")] == ["pyproject.toml"] * 2
    assert "pyerfa" not in specs  # only a nightly environment asks for it
    assert specs["django"] == "Django<5.1,>=5.0"


def test_pipfile_and_conda():
    ev = scan_repository(REPOS / "plan-pipfile")
    assert {"flask", "sqlalchemy"} <= names(ev, "main") and "pytest" in names(ev, "test")
    assert any(c.kind == "pin" and c.value == "3.11" for c in ev.python)
    ev = scan_repository(REPOS / "plan-pin-conda")
    assert "tqdm" in names(ev, "main") and "numpy" in names(ev, "conda")
    assert ev.python[0].kind == "pin" and ev.python[0].value == "3.10"


def test_hostile_files_are_skipped_with_warnings(tmp_path: Path):
    repo = tmp_path / "repo"
    repo.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("requests\n")
    os.symlink(outside, repo / "requirements.txt")
    (repo / "requirements-dev.txt").write_bytes(b"pytest\n\xff\xfe caf\xe9\n")
    (repo / "setup.py").write_text(
        "from setuptools import setup\nsetup(install_requires=['x' + 'y'], name=open('n').read())\n"
        + "import os; os.system('touch "
        + str(tmp_path / "pwned")
        + "')\n"
    )
    (repo / "big.py").write_text("import numpy\n" + "#" * (3 * 1024 * 1024))
    (repo / "junk.py").write_bytes(b"import os\x00\x01\x02")
    (repo / "pyproject.toml").write_text("[project]\nname = 'hostile'\n")
    ev = scan_repository(repo)
    msgs = [str(w) for w in ev.warnings]
    assert any("requirements.txt" in m and "outside the repository" in m for m in msgs)
    assert any("requirements-dev.txt:2" in m and "UTF-8" in m for m in msgs)
    assert any("big.py" in m and "larger than" in m for m in msgs)
    assert any("junk.py" in m and "binary" in m for m in msgs)
    assert not (tmp_path / "pwned").exists()  # setup.py is parsed, never run
    assert "requests" not in names(ev)


def test_not_a_directory_is_an_input_error(tmp_path: Path):
    from bot.errors import InputError

    with pytest.raises(InputError):
        scan_repository(tmp_path / "missing")


def test_justfile_recipe_behind_ci_and_tabs_in_workflows(tmp_path: Path):
    (tmp_path / "justfile").write_text(
        "test *ARGS:\n    python -m coverage run --source=app -m manage test --noinput {{ ARGS }}\n"
        "lint:\n    ruff check .\n"
    )
    wf = tmp_path / ".github" / "workflows"
    wf.mkdir(parents=True)
    (wf / "ci.yml").write_text(
        "jobs:\n  t:\n    runs-on: x\n    steps:\n      - run: |\n          just test\n\t\t  echo done\n"
    )
    ev = scan_repository(tmp_path)
    assert (["python", "-m", "manage", "test", "--noinput"], "justfile") in [
        (c.argv, c.source.file) for c in ev.test_commands
    ]
    assert any("tab characters" in str(w) for w in ev.warnings) or any("malformed YAML" in str(w) for w in ev.warnings)


def test_setuptools_dynamic_dependencies_from_files(tmp_path):
    # [tool.setuptools.dynamic] dependencies = {file = [...]}: the named requirement files are
    # read (this path once raised NameError and lost the whole pyproject).
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\n'
        '[project]\nname = "dyn"\ndynamic = ["dependencies", "optional-dependencies"]\n'
        '[tool.setuptools.dynamic]\ndependencies = {file = ["deps/runtime.in"]}\n'
        'optional-dependencies.test = {file = ["deps/testing.in"]}\n'
    )
    (tmp_path / "deps").mkdir()
    (tmp_path / "deps" / "runtime.in").write_text("attrs>=22\n")
    (tmp_path / "deps" / "testing.in").write_text("pytest-mock\n")
    from bot.evidence import scan_repository

    ev = scan_repository(tmp_path)
    names = {r.name for r in ev.requirements}
    assert {"attrs", "pytest-mock"} <= names, names
    assert not [w for w in ev.warnings if "pyproject" in w.file]


def test_a_package_imported_along_a_path_the_repository_holds_is_local(tmp_path, write_tree):
    """``from src.utils.llm import ask`` with ``service/reasoning/src/utils/llm.py``: the code puts
    that folder on sys.path, so ``src`` is the repository's, not a distribution to guess; a
    top-level import whose path the repository does not hold stays a guess."""
    files = {
        "service/__init__.py": "",
        "service/reasoning/__init__.py": "",
        "service/reasoning/src/__init__.py": "",
        "service/reasoning/src/utils/__init__.py": "",
        "service/reasoning/src/utils/llm.py": "def ask():\n    return 1\n",
        "service/reasoning/search.py": "import sys\nfrom src.utils.llm import ask\nimport yaml.constructor\n",
        "yamlish/constructor.txt": "not Python\n",
    }
    write_tree(files)
    ev = scan_repository(tmp_path)
    assert "src" in ev.local_modules
    assert "yaml" not in ev.local_modules


def test_a_test_helper_imported_by_bare_name_from_a_package_folder_is_local_and_on_the_path(tmp_path, write_tree):
    """tests/ and suite/ are packages; their tests import a helper beside them by bare name. The
    helper is the repository's (no distribution guessed) and each folder goes on the test path,
    except one that holds a module named like the standard library. Code outside the tests
    that does the same means a top-level module (Python 3), and stays a guess."""
    files = {
        "app/__init__.py": "",
        "app/yaml.py": "",
        "app/config.py": "import yaml\n",
        "tests/__init__.py": "",
        "tests/utils.py": "",
        "tests/test_a.py": "from utils import Timer\nimport numpy\n",
        "suite/__init__.py": "",
        "suite/helpers/__init__.py": "",
        "suite/logging.py": "",
        "suite/test_b.py": "import helpers\n",
        "plain/helper2.py": "",
        "plain/test_c.py": "import helper2\n",
        "odd:$dir/__init__.py": "",
        "odd:$dir/helper3.py": "",
        "odd:$dir/test_d.py": "import helper3\n",
    }
    write_tree(files)
    ev = scan_repository(tmp_path)
    assert {"utils", "helpers", "helper2", "helper3"} <= ev.local_modules
    assert "yaml" not in ev.local_modules and "numpy" not in ev.local_modules
    assert {folder: (src.file, src.line) for folder, src in ev.test_paths.items()} == {"tests": ("tests/test_a.py", 1)}
    assert any(w.file == "suite" and "logging" in w.message for w in ev.warnings)


def test_a_conda_environment_file_by_another_name_is_read_and_a_variant_is_not(tmp_path):
    """conda_environment.yaml is the repository's environment when none of the usual names is
    there; the macOS variant beside it, and a YAML file without dependencies, are not."""
    (tmp_path / "conda_environment.yaml").write_text(
        "name: x\ndependencies:\n  - python=3.9\n  - numpy=1.24\n  - pip:\n    - ray==2.8.0\n"
    )
    (tmp_path / "conda_environment_macos.yaml").write_text("dependencies:\n  - pyobjc=9.0\n")
    (tmp_path / "env.yaml").write_text("DEBUG: 1\n")
    ev = scan_repository(tmp_path)
    assert "numpy" in names(ev, "conda") and "ray" in names(ev, "main") and "pyobjc" not in names(ev, "conda")
    assert [c.value for c in ev.python if c.kind == "pin"] == ["3.9"]
    assert not any("no dependency manifest" in w.message for w in ev.warnings)
    # with the usual name present, only the usual files are read
    (tmp_path / "environment.yml").write_text("dependencies:\n  - scipy=1.11\n")
    again = scan_repository(tmp_path)
    assert "scipy" in names(again, "conda") and "numpy" not in names(again, "conda")


def test_c_extensions_declared_in_setuptools_own_table_compile(write_tree):
    """[tool.setuptools] ext-modules (setuptools 74 on) is a compiled project like setup.py's
    ext_modules; a [tool.setuptools] that is not a table is passed over, not a crash."""
    root = write_tree(
        {
            "pyproject.toml": '[build-system]\nrequires = ["setuptools>=74"]\nbuild-backend = "setuptools.build_meta"\n'
            '[project]\nname = "f"\nversion = "0"\n[tool.setuptools]\npackages = ["f"]\n'
            'ext-modules = [{name = "f._s", sources = ["f/_s.c"]}]\n',
        }
    )
    src = scan_repository(root).project.c_extensions
    assert src is not None and (src.file, src.line) == ("pyproject.toml", 9)
    write_tree({"pyproject.toml": 'tool = {setuptools = "oops"}\n[project]\nname = "f"\nversion = "0"\n'})
    assert scan_repository(root).project.c_extensions is None


def test_travis_services_and_plain_environment_are_read_like_a_workflows(write_tree):
    """.travis.yml's services become catalogue services (postgresql -> postgres, redis-server ->
    redis) and its env's plain assignments the tests' environment; secure entries, values that
    expand a variable and services setupbot cannot start are left out, the last with a warning."""
    root = write_tree(
        {
            ".travis.yml": "language: python\nservices:\n- postgresql\n- redis-server\n- xvfb\nenv:\n  global:\n"
            "  - DB_NAME=testdb DB_USER=postgres\n  - 'GREETING=\"hello world\"'\n  - DATA=${TRAVIS_BUILD_DIR}/data\n"
            "  - secure: AbCdEf==\n",
            "tests/test_x.py": "def test_x():\n    pass\n",
        }
    )
    ev = scan_repository(root)
    assert [(s.name, s.kind, s.image, s.evidence[0].line) for s in ev.services] == [
        ("postgresql", "postgres", "postgres:17", 3),
        ("redis-server", "redis", ev.services[1].image, 4),
    ]
    assert {k: v for k, (v, _) in ev.env.items()} == {
        "DB_NAME": "testdb",
        "DB_USER": "postgres",
        "GREETING": "hello world",
    }
    assert any(w.file == ".travis.yml" and "xvfb" in w.message for w in ev.warnings)
    write_tree({".travis.yml": "- just\n- a list\n"})
    again = scan_repository(root)
    assert again.services == [] and any("not a mapping" in w.message for w in again.warnings)


def test_setup_py_keywords_from_a_dict_it_unpacks_are_read(write_tree):
    """setup(**configuration) with a module-level dict literal (umap's setup.py) declares what
    the dict holds; an explicit keyword in the call wins over the dict's, and a dict built by
    a call (unknown keys) is passed over."""
    setup_py = (
        "from setuptools import setup\n"
        "def readme():\n    return open('README').read()\n"
        "configuration = {\n"
        '    "name": "umap-like",\n'
        '    "long_description": readme(),\n'
        '    "install_requires": ["numpy >= 1.17", "tqdm"],\n'
        '    "extras_require": {"plot": ["pandas"]},\n'
        '    "python_requires": ">=3.9",\n'
        "}\n"
        "setup(name='explicit', **configuration)\n"
    )
    ev = scan_repository(write_tree({"setup.py": setup_py}))
    assert {"numpy", "tqdm"} <= names(ev, "main")
    assert "pandas" in names(ev, "extra:plot")
    assert ev.project.name == "explicit"
    tqdm = next(r for r in ev.requirements if r.name == "tqdm")
    assert (tqdm.source.file, tqdm.source.line) == ("setup.py", 7)
    assert any(c.value == ">=3.9" for c in ev.python if c.kind == "requires")
    built = "from setuptools import setup\nsetup(**dict(install_requires=['attrs']))\nsetup(**make())\n"
    assert "attrs" in names(scan_repository(write_tree({"setup.py": built})), "main")


def test_the_docs_apt_packages_are_installed_only_for_a_project_that_compiles(write_tree):
    """keyring's README installs gnome-keyring and libdbus-glib-1-dev to use it on a desktop:
    a pure-Python project's image goes without them (and without the compiler a -dev package
    would bring), with a warning; a project that compiles gets what its docs name for the build."""
    from bot.compile.plan import make_plan
    from bot.graph.mapping import Registry

    readme = "Install\n=======\n\n::\n\n  $ sudo apt install gnome-keyring libdbus-glib-1-dev\n  $ pip install kr\n"
    pure = "[project]\nname = 'kr'\nversion = '1'\n[build-system]\nrequires = ['setuptools']\n"
    root = write_tree({"README.rst": readme, "pyproject.toml": pure, "kr/__init__.py": ""})
    ev = scan_repository(root)
    assert [p for p, _ in ev.docs_apt_packages] == ["gnome-keyring", "libdbus-glib-1-dev"] and not ev.apt_packages
    plan = make_plan(root, None, available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False))
    text = plan.dockerfile.text
    assert "gnome-keyring" not in text and "build-essential" not in text
    assert any("gnome-keyring is installed by the documentation" in w.message for w in plan.warnings)
    write_tree(
        {"setup.py": "from setuptools import setup, Extension\nsetup(ext_modules=[Extension('kr._c', ['c.c'])])\n"}
    )
    plan = make_plan(root, None, available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False))
    assert "libdbus-glib-1-dev" in plan.dockerfile.text and "README.rst:6" in plan.dockerfile.text


def test_an_extra_the_tests_need_keeps_the_projects_range_but_not_an_exact_pin(write_tree):
    """The tests import matplotlib, which the project declares only in its plot extra
    (astropy/regions: matplotlib>=3.5): the image installs it with that range, not a bare name.
    An exact pin in an extra that is not installed ("oldest": numpy==1.21) is one environment's,
    so numpy goes by its name."""
    from bot.compile.plan import make_plan
    from bot.graph.mapping import Registry

    root = write_tree(
        {
            "pyproject.toml": "[project]\nname = 'r'\nversion = '1'\n"
            "[project.optional-dependencies]\nplot = ['matplotlib>=3.5']\noldest = ['numpy==1.21']\n"
            "[build-system]\nrequires = ['setuptools']\n",
            "r/__init__.py": "",
            "tests/test_r.py": "import matplotlib\nimport numpy\n\ndef test_r():\n    pass\n",
        }
    )
    plan = make_plan(root, None, available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False))
    text = plan.dockerfile.text
    assert "'matplotlib>=3.5'" in text
    assert "numpy==1.21" not in text and "        numpy" in text
