"""DepGraph built from the fixtures: nodes, edges, states, runtime choice, JSON, repairs."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from bot.atoms import ATOM_KINDS, Atom, AtomError
from bot.compile.plan import make_plan
from bot.evidence.model import PythonConstraint, Source
from bot.graph import DepGraph
from bot.graph.mapping import Registry, import_table
from bot.graph.runtime import choose_python

REPOS = Path(__file__).parents[1] / "fixtures" / "repos"
PYS = ["3.9", "3.10", "3.11", "3.12", "3.13"]


def plan(name, pythons=PYS, **kw):
    return make_plan(
        REPOS / name, None, available_pythons=pythons, resolve=False, registry=Registry(enabled=False), **kw
    )


def test_import_table_has_200_names_that_differ():
    differ = {k for k, v in import_table().items() if canonicalize_name(k) != canonicalize_name(v)}
    assert len(differ) >= 200
    assert import_table()["yaml"] == "PyYAML" and import_table()["sklearn"] == "scikit-learn"


def test_imports_only_repo_maps_imports_to_distributions():
    g = plan("plan-imports-only").graph
    assert ("import:yaml", "package:pyyaml", "mapping") in g.edges
    assert ("import:sklearn", "package:scikit-learn", "mapping") in g.edges
    assert g.nodes["package:pyyaml"].action == "pip" and g.nodes["import:yaml"].state == "SATISFIED"
    assert "import:helpers" not in g.nodes and "import:os" not in g.nodes  # local and stdlib
    assert g.nodes["import:cv2"].attrs["optional"] is True
    assert g.nodes["package:opencv-python-headless"].action is None  # optional import: not installed
    ev = g.nodes["import:yaml"].evidence[0]
    assert ev[0] == "app.py" and ev[1] == 3


def test_manifest_wins_over_table_and_prerequisites_point_at_runtime():
    g = plan("plan-ci-services").graph
    assert ("package:psycopg", "runtime:python", "prerequisite") in g.edges
    assert ("package:@project", "package:psycopg", "prerequisite") in g.edges
    assert ("import:psycopg", "package:psycopg", "mapping") in g.edges
    assert g.nodes["service:postgres"].attrs["image"] == "postgres:15"
    assert ("target:tests", "service:postgres", "prerequisite") in g.edges
    assert g.nodes["systemlib:libpq-dev"].action == "apt"
    assert g.nodes["package:@project"].attrs["extras"] == ["test"]


def test_runtime_choice_prefers_tested_and_reports_unsatisfiable_floor():
    p = plan("plan-ci-services")
    assert p.python == "3.11"  # newest the CI matrix tests, not 3.13
    p = plan("plan-floor-312", ["3.9", "3.10", "3.11"])
    assert p.graph.runtime.state == "MISSING"
    assert any("satisfies >=3.12" in w.message for w in p.warnings)
    assert plan("plan-floor-312", ["3.11", "3.13"]).python == "3.13"
    assert plan("plan-pipfile").python == "3.11"  # Pipfile python_version pin
    assert plan("plan-pin-conda").python == "3.10"  # .python-version


def test_runtime_choice_unit():
    s = Source("pyproject.toml", 3)
    c = [PythonConstraint("requires", ">=3.9,<3.12", s), PythonConstraint("tested", "3.10", s)]
    assert choose_python(c, PYS).version == "3.10"
    assert choose_python([PythonConstraint("requires", ">=3.9", s)], PYS).version == "3.13"
    assert choose_python([PythonConstraint("requires", ">=3.9", s)], PYS, [("3.12", "imports imp")]).version == "3.11"
    assert not choose_python([PythonConstraint("requires", "<3.8", s)], PYS).satisfied
    # CI tests 3.8-3.10 only and the images offer 3.11 and 3.13: the nearer one
    old = [PythonConstraint("tested", v, s) for v in ("3.8", "3.9", "3.10")]
    assert choose_python(old, ["3.11", "3.13"]).version == "3.11"


def test_lock_pins_and_scm_config():
    g = plan("plan-poetry-only").graph
    # the lock is installed natively: poetry pins requests itself
    assert g.nodes["config:lock"].action == "native-lock" and "requests" in g.nodes["config:lock"].attrs["covers"]
    assert "pinned" not in g.nodes["package:requests"].attrs
    assert g.nodes["package:pyyaml"].action is None  # optional extra, not a test extra
    g = plan("plan-uv-groups").graph
    assert g.nodes["config:env:SETUPTOOLS_SCM_PRETEND_VERSION"].action == "env"
    assert ("package:@project", "config:env:SETUPTOOLS_SCM_PRETEND_VERSION", "prerequisite") in g.edges


def test_pytest_plugins_become_tools():
    g = plan("plan-scm-plugins").graph
    tools = {n.name for n in g.of_type("TOOL") if n.action == "tool"}
    assert {"pytest-cov", "pytest-xdist", "pytest-timeout", "pytest-asyncio"} <= tools
    # the test extra already installs pytest with its own pin
    assert g.nodes["tool:pytest"].action is None and g.nodes["package:pytest"].action == "pip"
    assert g.nodes["tool:pytest-cov"].evidence[0][0] == "pyproject.toml"


def test_test_command_from_tox_when_pytest_is_not_the_runner():
    p = plan("plan-tox-unittest")
    assert p.test_command == ["python", "-m", "unittest", "discover", "-s", "tests"]
    assert p.collect_command == ["python", "-m", "pytest", "--collect-only", "-q"]
    assert plan("plan-nox-readme").test_command == ["python", "-m", "pytest"]


def test_plan_env_and_services_follow_the_contract():
    p = plan("plan-ci-services")
    assert p.env["DATABASE_URL"].startswith("postgresql://") and "API_TOKEN" not in p.env
    svc = {s.kind: s for s in p.services}
    assert svc["redis"].image == "redis:7-alpine" and svc["redis"].evidence[0].file.endswith("ci.yml")


def test_json_round_trip_and_text():
    g = plan("plan-ci-services").graph
    data = g.to_json()
    g2 = DepGraph.from_json(data)
    assert g2.to_json() == data
    assert DepGraph.from_json(g.dumps()).to_json() == data
    text = g.render_text()
    assert "SERVICE (2)" in text and "from .github/workflows/ci.yml" in text


def test_apply_atom_covers_every_kind():
    p = plan("plan-setup-py-only")
    g = p.graph
    atoms = {
        "apt_install": Atom("apt_install", {"packages": ["libyaml-dev"]}),
        "pip_install": Atom("pip_install", {"packages": ["pyasyncore"]}),
        "pip_constraint": Atom("pip_constraint", {"constraints": ["numpy<2"]}),
        "switch_python": Atom("switch_python", {"version": "3.12"}),
        "set_env": Atom("set_env", {"name": "DJANGO_SETTINGS_MODULE", "value": "tests.settings"}),
        "start_service": Atom("start_service", {"service": "postgres"}),
        "use_tool": Atom("use_tool", {"tool": "poetry"}),
        "run": Atom("run", {"command": ["python", "-m", "nltk.downloader", "punkt"]}),
        "install_extras": Atom("install_extras", {"extras": ["docs"]}),
        "test_command": Atom("test_command", {"command": ["python", "-m", "pytest", "tests/unit"]}),
        "git_init": Atom("git_init", {}),
        "install_deps_only": Atom("install_deps_only", {}),
        "drop_package": Atom("drop_package", {"manager": "pip", "packages": ["requests"]}),
        "build_without_isolation": Atom("build_without_isolation", {"module": "Cython"}),
        "compile_in_place": Atom("compile_in_place", {"sources": ["pkg/fast.pyx"]}),
    }
    assert set(atoms) | {"install_project"} == set(ATOM_KINDS)  # it undoes install_deps_only: last
    for kind, atom in atoms.items():
        changed = g.apply_atom(atom, [("log", 12, "ModuleNotFoundError")])
        assert changed, kind
    assert g.nodes["systemlib:libyaml-dev"].evidence[0] == ("log", 12, "ModuleNotFoundError")
    assert g.nodes["package:pyasyncore"].action == "repair-pip"
    assert g.nodes["config:constraint:numpy<2"].attrs["spec"] == "numpy<2"
    assert p.python == "3.12" and p.base_image == "python:3.12-slim"
    assert p.env["DJANGO_SETTINGS_MODULE"] == "tests.settings"
    assert any(s.kind == "postgres" for s in p.services)
    assert g.nodes["package:@project"].attrs["install_with"] == "poetry"
    assert "docs" in g.nodes["package:@project"].attrs["extras"]
    assert p.test_command[-1] == "tests/unit"
    assert g.nodes["config:env:SETUPTOOLS_SCM_PRETEND_VERSION"].attrs["value"]
    text = p.dockerfile.text
    assert "FROM python:3.12-slim" in text and "libyaml-dev" in text and "PIP_CONSTRAINT" in text
    assert "nltk.downloader" in text and "poetry install --no-interaction --all-groups --no-root" in text
    # an application: no project install, the checkout on the path; the dropped one is gone
    assert "-e ." not in text and "ENV PYTHONPATH=/workspace" in text
    assert g.nodes["package:requests"].action is None
    assert not any(line.strip().startswith("requests") for line in text.splitlines())
    with pytest.raises(AtomError, match="not a Debian package name"):
        g.apply_atom(Atom("apt_install", {"packages": ["x; rm -rf /"]}))
    assert g.apply_atom(Atom("install_project", {"name": g.nodes["package:@project"].name}), "log")
    assert "ENV PYTHONPATH=/workspace" not in p.dockerfile.text


class _PyPI(http.server.BaseHTTPRequestHandler):
    """A simple API with one project, under a root whose path has braces in it."""

    def do_GET(self):  # noqa: N802
        code = 200 if self.path == "/simple-{mirror}/somedist/" else 404
        self.send_response(code)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *a):
        pass


def test_registry_checks_a_local_index_and_caches(tmp_path: Path):
    server = http.server.HTTPServer(("127.0.0.1", 0), _PyPI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        # an index URL is not a template: its braces are sent as they are
        url = f"http://127.0.0.1:{server.server_port}/simple-{{mirror}}"
        reg = Registry(cache_dir=tmp_path, index_url=url)
        assert reg.exists("SomeDist") is True  # asked for by its normalised name
        assert reg.exists("nosuchdist") is False
        assert (tmp_path / "somedist.json").is_file()
    finally:
        server.shutdown()
    reg2 = Registry(cache_dir=tmp_path, index_url=url)
    assert reg2.exists("somedist") is True  # from the cache, server gone
    offline = Registry(cache_dir=tmp_path / "x", index_url="http://127.0.0.1:9/simple", timeout=0.5)
    assert offline.exists("anything") is None


def test_unknown_import_offline_is_unknown_not_a_crash(tmp_path: Path):
    (tmp_path / "t.py").write_text("import zzqqxx_unknown_mod\n")
    p = make_plan(
        tmp_path,
        None,
        available_pythons=PYS,
        resolve=False,
        registry=Registry(cache_dir=tmp_path / "c", index_url="http://127.0.0.1:9/simple", timeout=0.5),
    )
    n = p.graph.nodes["import:zzqqxx_unknown_mod"]
    assert n.state == "UNKNOWN" and "package:zzqqxx-unknown-mod" not in p.graph.nodes


def test_with_nothing_stated_the_python_is_the_newest_that_existed_when_the_code_was_written(tmp_path):
    s = Source("pyproject.toml", 1)
    floor = [PythonConstraint("requires", ">=3.9", s)]
    era = ("2024-03-12T10:00:00Z", "the commit date of HEAD")
    got = choose_python(floor, PYS, era=era)
    assert got.version == "3.12"  # 3.13 came out on 2024-10-07
    assert got.reason == (
        "newest offered that existed when the code was written (2024-03-12, the commit date of HEAD; "
        "3.13 came out 2024-10-07), satisfying >=3.9"
    )
    assert choose_python(floor, PYS, era=("2024-10-07T23:59:59Z", "target.as_of")).version == "3.13"  # its day
    # older than everything offered: the oldest offered, and said
    old = choose_python([], PYS, era=("2015-01-01T00:00:00Z", "target.as_of"))
    assert old.version == "3.9" and old.reason.startswith("oldest offered: every offered Python came out after")
    # what the project states still decides: tested versions, pins, and no date at all
    assert choose_python([PythonConstraint("tested", "3.13", s)], PYS, era=era).version == "3.13"
    assert choose_python([PythonConstraint("pin", "3.13", s)], PYS, era=era).version == "3.13"
    assert choose_python(floor, PYS).version == "3.13"


def test_the_plan_takes_the_era_from_the_commit_date(tmp_path):
    import os
    import subprocess

    (tmp_path / "requirements.txt").write_text("six\n")
    env = {
        **os.environ,
        "GIT_COMMITTER_DATE": "2023-05-01T12:00:00+00:00",
        "GIT_AUTHOR_DATE": "2023-05-01T12:00:00+00:00",
    }
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True, env=env)
    p = make_plan(tmp_path, None, available_pythons=PYS, resolve=False, registry=Registry(enabled=False))
    assert p.graph.runtime.attrs["version"] == "3.11"  # 3.12 came out on 2023-10-02
    assert "2023-05-01, the commit date of HEAD" in p.graph.runtime.attrs["reason"]


def test_a_declared_fork_under_a_numbered_or_binary_name_provides_the_originals_module():
    """python-constraint2 provides `constraint`: the import maps to it, and the original's
    distribution (constraint, a Python 2 sdist that no longer builds) is never guessed."""
    from bot.graph.mapping import declared_for

    assert declared_for("constraint", {"python-constraint2": "python-constraint2>=2", "numpy": "numpy"}) == (
        "python-constraint2"
    )
    assert declared_for("psycopg2", {"psycopg2-binary": "psycopg2-binary"}) == "psycopg2-binary"
    assert declared_for("foo", {"bar2": "bar2"}) is None
    assert declared_for("jinja2", {"jinja2": "jinja2", "jinja2-time": "x"}) == "jinja2"
