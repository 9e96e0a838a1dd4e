"""Deterministic repair rules and candidate merging."""

from __future__ import annotations

from types import SimpleNamespace

from bot.atoms import Atom
from bot.loop.diagnose import Signature, diagnose
from bot.loop.repair import (
    Candidate,
    knowledge_candidates,
    merge_candidates,
    next_python,
    rule_candidates,
)


def rules(output, tmp_path, python="3.11", available=("3.11", "3.13")):
    sig = diagnose(output)[0]
    return [c.describe() for c in rule_candidates(sig, repo=tmp_path, python=python, available_pythons=list(available))]


def test_rules(tmp_path):
    assert rules("error: unrecognized arguments: --cov=pkg", tmp_path) == ["pip_install pytest-cov"]
    assert rules("fixture 'mocker' not found", tmp_path) == ["pip_install pytest-mock"]
    assert rules("E   ModuleNotFoundError: No module named 'yaml'", tmp_path) == [
        "pip_install PyYAML",
        "pip_install yaml",
    ]
    assert rules("fatal error: ffi.h: No such file or directory", tmp_path) == ["apt_install libffi-dev gcc libc6-dev"]
    assert rules("requires a different Python: 3.11.2 not in '>=3.12'", tmp_path) == ["switch_python version=3.13"]
    assert rules("requires a different Python: 3.11.2 not in '>=3.14'", tmp_path) == []
    assert rules("LookupError: setuptools-scm was unable to detect version for /w", tmp_path) == [
        "set_env SETUPTOOLS_SCM_PRETEND_VERSION=0.0.0"
    ]
    assert rules(
        'psycopg2.OperationalError: connection to server at "localhost", port 5432 failed: Connection refused', tmp_path
    ) == ["start_service service=postgres"]


def test_django_settings_and_test_dirs(tmp_path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "settings.py").write_text("")
    (tmp_path / "proj" / "settings_test.py").write_text("")
    out = "You must either define the environment variable DJANGO_SETTINGS_MODULE or call settings.configure()"
    assert rules(out, tmp_path)[0] == "pip_install pytest-django; set_env DJANGO_SETTINGS_MODULE=proj.settings_test"
    # pytest without pytest-django: Django was never set up
    assert (
        rules("E   django.core.exceptions.AppRegistryNotReady: Apps aren't loaded yet.", tmp_path)[0]
        == "pip_install pytest-django; set_env DJANGO_SETTINGS_MODULE=proj.settings_test"
    )
    # the module manage.py names comes before any guess; a named module that does not exist does not
    (tmp_path / "manage.py").write_text(
        'os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj.settings")\n'
        'os.environ["DJANGO_SETTINGS_MODULE"] = "proj.nowhere"\n'
    )
    assert rules(out, tmp_path)[:2] == [
        "pip_install pytest-django; set_env DJANGO_SETTINGS_MODULE=proj.settings",
        "pip_install pytest-django; set_env DJANGO_SETTINGS_MODULE=proj.settings_test",
    ]
    (tmp_path / "tests").mkdir()
    assert rules("ERROR: file or directory not found: test/", tmp_path) == ["test_command python -m pytest tests"]


def test_next_python():
    assert next_python(">=3.12", ["3.11", "3.13"], "3.11") == "3.13"
    assert next_python("3.12", ["3.11", "3.13"], "3.11") == "3.13"
    assert next_python("<3.12", ["3.11", "3.13"], "3.13") == "3.11"
    assert next_python("not a spec", ["3.11"], "3.11") is None
    # a version stands for its minor series, as in the planner's choice
    assert next_python(">=3.12.1", ["3.11", "3.12", "3.13"], "3.11") == "3.12"


def test_knowledge_first_and_deduplicated():
    atom = Atom("pip_install", {"packages": ["PyYAML"]})
    retriever = SimpleNamespace(
        retrieve=lambda text, context: [
            SimpleNamespace(unit=SimpleNamespace(id="u1", advice="yaml"), score=2.0, atoms=(atom,)),
            SimpleNamespace(
                unit=SimpleNamespace(id="u2", advice="bad"),
                score=1.0,
                atoms=({"kind": "apt_install", "packages": ["bad;rm -rf /"]},),
            ),
        ]
    )
    from_store = knowledge_candidates(retriever, "log", {"python": "3.11"}, 10)
    assert [c.unit_id for c in from_store] == ["u1"]  # the invalid atom is dropped
    merged = merge_candidates(from_store, [Candidate([atom], "rule")])
    assert [c.source for c in merged] == ["knowledge"]


def test_trial_commands_are_argv():
    cmds = Atom("apt_install", {"packages": ["libyaml-dev"]}).trial_commands()
    assert cmds[-1][-1] == "libyaml-dev" and all(isinstance(c, list) for c in cmds)
    assert Atom("set_env", {"name": "A", "value": "b"}).trial_commands() == []


def test_meson_and_typelib_rules(tmp_path):
    assert rules('../meson.build:31:12: ERROR: Dependency "cairo" not found, tried pkgconfig and cmake', tmp_path) == [
        "apt_install libcairo2-dev pkg-config"
    ]
    assert rules("Dependency lookup for girepository-2.0 with method 'pkgconfig' failed: x", tmp_path) == [
        "apt_install libgirepository-2.0-dev pkg-config"
    ]
    assert rules("ValueError: Namespace Gst not available", tmp_path) == [
        "apt_install gir1.2-gstreamer-1.0 gstreamer1.0-plugins-base"
    ]
    assert rules("ValueError: Namespace NoSuchThing not available", tmp_path) == []


def test_meson_without_python_headers(tmp_path):
    assert rules("../cairo/meson.build:51:15: ERROR: Python dependency not found", tmp_path) == [
        "apt_install python3-dev gcc libc6-dev"
    ]


def test_ctypes_loaded_libraries(tmp_path):
    assert rules("    raise ImportError('fontconfig not found')\nImportError: fontconfig not found", tmp_path) == [
        "apt_install libfontconfig1"
    ]
    assert rules("OSError: cannot load library 'libcairo.so.2': error 0x7e", tmp_path) == ["apt_install libcairo2"]


def test_meson_required_dependency_quoted(tmp_path):
    assert rules("../meson.build:35:9: ERROR: Dependency 'girepository-2.0' is required but not found.", tmp_path) == [
        "apt_install libgirepository-2.0-dev pkg-config"
    ]


def test_a_dependency_that_compiles_rust_gets_debians_newest_toolchain(tmp_path):
    """A crates.io dependency's sdist: the -web pair (bookworm 1.85/1.96, trixie 1.96), not the
    plain rustc that is 1.63 on bookworm."""
    assert rules("      error: can't find Rust compiler", tmp_path) == ["apt_install rustc-web cargo-web"]


def test_a_crate_that_needs_a_newer_rustc_gets_the_web_pair_in_place_of_the_plain_one(tmp_path):
    """cargo's MSRV refusal and an edition the old cargo does not know: the plain pair (1.63 on
    bookworm) makes way for the -web pair, which conflicts with it; applied to a graph, the plain
    nodes leave the image and the -web ones join."""
    from bot.graph.apply import apply_atom
    from bot.graph.model import DepGraph, Node

    msrv = (
        "error: package `pyo3 v0.29.2` cannot be built because it requires rustc 1.74 or newer, "
        "while the currently active rustc version is 1.63.0"
    )
    edition = (
        "this version of Cargo is older than the `2024` edition, and only supports `2015`, `2018`, and `2021` editions."
    )
    assert [(s.kind, s.key) for s in diagnose(msrv)] == [("rust_too_old", "1.74")]
    assert [(s.kind, s.key) for s in diagnose("      error: Failed building wheel for x\n" + edition)] == [
        ("rust_too_old", "1.85")
    ]  # the precise cause, not the generic wheel failure
    want = ["drop_package apt rustc cargo; apt_install rustc-web cargo-web"]
    assert rules(msrv, tmp_path) == want and rules(edition, tmp_path) == want

    g = DepGraph()
    for name in ("rustc", "cargo", "git"):
        g.add(Node(f"systemlib:{name}", "SYSTEMLIB", name, "SATISFIED", action="apt"))
    sig = diagnose(msrv)[0]
    cand = rule_candidates(sig, repo=tmp_path, python="3.11", available_pythons=["3.11"])[0]
    for atom in cand.atoms:
        apply_atom(g, atom, "repair")
    installed = sorted(n.name for n in g.of_type("SYSTEMLIB") if n.action == "apt")
    assert installed == ["cargo-web", "git", "rustc-web"]


def test_a_plugin_with_a_hook_pytest_does_not_know_gets_its_newest_release(tmp_path):
    log = (
        "pluggy._manager.PluginValidationError: unknown hook 'pytest_warning_captured' in plugin "
        "<module 'pytest_sugarless.plugin' from '/usr/local/lib/python3.11/site-packages/pytest_sugarless/plugin.py'>"
    )
    assert [(s.kind, s.key) for s in diagnose(log)] == [("plugin_hook_mismatch", "pytest_sugarless")]
    assert rules(log, tmp_path) == ["pip_install pytest-sugarless"]


def test_the_repository_context_names_django_only_where_manage_py_runs_it(tmp_path):
    from bot.loop.repair import repo_context

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_views.py").write_text("")
    assert repo_context(tmp_path) == {}
    (tmp_path / "manage.py").write_text("import os\nfrom django.core.management import execute_from_command_line\n")
    assert repo_context(tmp_path) == {"framework": "django"}


def test_an_unset_service_variable_starts_the_service_whose_wiring_sets_it(tmp_path):
    """os.getenv("DATABASE_URL") was None: with a PostgreSQL client in the plan, the postgres
    service (whose wiring sets DATABASE_URL) comes before a placeholder value; without a client
    library only the placeholder is offered, and a variable no wiring sets gets no service."""
    sig = Signature("missing_env", "configuration", "DATABASE_URL", "DATABASE_URL is None")
    with_driver = rule_candidates(
        sig, repo=tmp_path, python="3.13", available_pythons=["3.13"], specs={"psycopg2-binary": "", "fastapi": ""}
    )
    assert [c.describe() for c in with_driver] == ["start_service service=postgres", "set_env DATABASE_URL=test"]
    assert "psycopg2" in with_driver[0].why
    plain = rule_candidates(sig, repo=tmp_path, python="3.13", available_pythons=["3.13"], specs={"fastapi": ""})
    assert [c.describe() for c in plain] == ["set_env DATABASE_URL=test"]
    redis = Signature("missing_env", "configuration", "REDIS_URL", "")
    got = rule_candidates(redis, repo=tmp_path, python="3.13", available_pythons=["3.13"], specs={"redis": ""})
    assert [c.describe() for c in got][0] == "start_service service=redis"
    other = Signature("missing_env", "configuration", "API_TOKEN", "")
    got = rule_candidates(other, repo=tmp_path, python="3.13", available_pythons=["3.13"], specs={"redis": ""})
    assert [c.describe() for c in got] == ["set_env API_TOKEN=test"]


def test_the_database_context_names_the_one_sql_server_the_code_talks_to(tmp_path):
    from bot.compile.plan import make_plan
    from bot.loop.candidates import CandidatesMixin

    class Loop(CandidatesMixin):
        def __init__(self, graph):
            self.plan = SimpleNamespace(graph=graph)

    (tmp_path / "app.py").write_text("import os\nimport psycopg2\nimport redis\n")
    graph = make_plan(tmp_path, None, available_pythons=["3.13"], resolve=False).graph
    assert Loop(graph)._database_context() == {"database": "postgres"}  # redis is no SQL server
    (tmp_path / "legacy.py").write_text("import pymysql\n")
    graph = make_plan(tmp_path, None, available_pythons=["3.13"], resolve=False).graph
    assert Loop(graph)._database_context() == {}  # two: neither is guessed
    assert Loop(None)._database_context() == {}


def test_pytest_that_refuses_both_config_tables_is_held_below_9(tmp_path):
    sig = Signature("pytest_config_tables", "version", "pytest", "")
    got = rule_candidates(sig, repo=tmp_path, python="3.13", available_pythons=["3.13"])
    assert [c.describe() for c in got] == ["pip_constraint pytest<9"]
