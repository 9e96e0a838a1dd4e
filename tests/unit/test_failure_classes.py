"""Failure classes from repositories the rules were not tuned on: each one's diagnosis (from
the tools' real output) and the repair candidates the loop offers for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.atoms import Atom, AtomError
from bot.compile import compile_dockerfile
from bot.loop.diagnose import diagnose
from bot.loop.repair import rule_candidates

REPOS = Path(__file__).resolve().parents[1] / "fixtures" / "repos"


def cands(sig, repo: Path, python="3.11", available=("3.11", "3.13")):
    return [c.describe() for c in rule_candidates(sig, repo=repo, python=python, available_pythons=available)]


# --- class 1: applications that are not installable packages ----------------------------------

FLAT = """\
      File "/tmp/pip-build-env-x/overlay/lib/python3.13/site-packages/setuptools/discovery.py", line 414, in _analyse_flat_layout
          raise PackageDiscoveryError(msg)
      setuptools.errors.PackageDiscoveryError: Multiple top-level packages discovered in a flat-layout: ['core', 'web'].
      [end of output]
  note: This error originates from a subprocess, and is likely not a problem with pip.
ERROR: Failed to build 'file:///workspace' when getting requirements to build editable
"""
POETRY = """\
  ValueError
  No file/folder found for package my-service
  at /tmp/pip-build-env/site-packages/poetry/core/masonry/utils/package_include.py:66 in check_elements
error: subprocess-exited-with-error
"""


@pytest.mark.parametrize("log", [FLAT, POETRY])
def test_application_layout_is_classified_and_installs_dependencies_only(log, tmp_path):
    sigs = diagnose(log)
    assert [s.kind for s in sigs] == ["not_a_package"]
    assert cands(sigs[0], tmp_path) == ["install_deps_only"]


def test_package_mode_false_is_not_installable(tmp_path):
    from bot.compile.plan import make_plan
    from bot.graph.mapping import Registry

    (tmp_path / "pyproject.toml").write_text(
        '[tool.poetry]\nname = "internal tool"\npackage-mode = false\n\n'
        '[tool.poetry.dependencies]\npython = "^3.10"\nsix = "^1.16"\n\n'
        '[build-system]\nrequires = ["poetry-core"]\nbuild-backend = "poetry.core.masonry.api"\n'
    )
    plan = make_plan(
        tmp_path, None, available_pythons=["3.11", "3.13"], resolve=False, registry=Registry(enabled=False)
    )
    text = plan.dockerfile.text
    assert "-e ." not in text and "six" in text
    assert "package:@project" not in plan.graph.nodes


def _django_repo(tmp_path: Path, pytest_django: bool = False) -> Path:
    (tmp_path / "manage.py").write_text(
        "import os, sys\nos.environ.setdefault('DJANGO_SETTINGS_MODULE', 'site.settings')\n"
        "from django.core.management import execute_from_command_line\nexecute_from_command_line(sys.argv)\n"
    )
    (tmp_path / "requirements.txt").write_text("django\n" + ("pytest-django\n" if pytest_django else ""))
    return tmp_path


def test_django_project_without_pytest_django_uses_manage_py_test(tmp_path):
    repo = _django_repo(tmp_path)
    no_tests = diagnose("\nno tests ran in 0.01s\n")[0]
    assert cands(no_tests, repo)[0] == "test_command python manage.py test"
    settings = diagnose(
        "E   django.core.exceptions.ImproperlyConfigured: Requested setting INSTALLED_APPS, "
        "but settings are not configured."
    )[0]
    assert settings.kind == "django_settings"
    assert cands(settings, repo)[0] == "test_command python manage.py test"


def test_django_project_with_pytest_django_keeps_pytest_first(tmp_path):
    repo = _django_repo(tmp_path, pytest_django=True)
    settings = diagnose("Requested setting INSTALLED_APPS, but settings are not configured.")[0]
    assert "test_command python manage.py test" not in cands(settings, repo)


# --- class 7: mutually exclusive system packages ------------------------------------------------

APT2 = """\
Some packages could not be installed. This may mean that you have
requested an impossible situation.
The following packages have unmet dependencies:
 libcurl4-gnutls-dev : Conflicts: libcurl4-openssl-dev but 8.14.1-2 is to be installed
 libcurl4-openssl-dev : Conflicts: libcurl4-gnutls-dev but 8.14.1-2 is to be installed
E: Unable to correct problems, you have held broken packages.
"""
APT3 = """\
Solving dependencies... Error!
Unsatisfied dependencies:
 libjack-jackd2-dev:amd64=1.9.22~dfsg-4 Conflicts libjack-dev
Error: Unable to satisfy dependencies.
"""


def test_apt_conflict_keeps_one_side_the_preferred_first(tmp_path):
    sigs = diagnose(APT2)
    assert [(s.kind, s.key) for s in sigs] == [("apt_conflict", "libcurl4-gnutls-dev|libcurl4-openssl-dev")]
    # openssl is the preferred libcurl flavour: keeping it (dropping gnutls) is tried first
    assert cands(sigs[0], tmp_path) == ["drop_package apt libcurl4-gnutls-dev", "drop_package apt libcurl4-openssl-dev"]


def test_apt3_solver_conflict_line(tmp_path):
    sigs = [s for s in diagnose(APT3) if s.kind == "apt_conflict"]
    assert sigs and sigs[0].key == "libjack-jackd2-dev|libjack-dev"
    assert cands(sigs[0], tmp_path)[0] == "drop_package apt libjack-dev"


def test_plan_keeps_one_of_two_alternatives(tmp_path):
    from bot.compile.plan import make_plan
    from bot.graph.mapping import Registry

    (tmp_path / "requirements.txt").write_text("pycurl\n")
    wf = tmp_path / ".github" / "workflows"
    wf.mkdir(parents=True)
    wf.joinpath("ci.yml").write_text(
        "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: sudo apt-get install -y libcurl4-gnutls-dev\n      - run: pytest\n"
    )
    plan = make_plan(
        tmp_path, None, available_pythons=["3.11", "3.13"], resolve=False, registry=Registry(enabled=False)
    )
    text = plan.dockerfile.text
    # the repository's own choice (its CI) wins over the table's preference
    assert "libcurl4-gnutls-dev" in text and "libcurl4-openssl-dev" not in text
    assert any("cannot be installed together" in str(w) for w in plan.warnings)


def test_drop_package_atom_is_validated():
    Atom("drop_package", {"manager": "apt", "packages": ["libcurl4-gnutls-dev"]}).validate()
    with pytest.raises(AtomError):
        Atom("drop_package", {"manager": "apt", "packages": ["x; rm -rf /"]}).validate()
    with pytest.raises(AtomError):
        Atom("drop_package", {"manager": "brew", "packages": ["x"]}).validate()


# --- class 3: pins that no offered Python can install --------------------------------------------

PIN = """\
ERROR: Ignored the following versions that require a different python version: 1.10.0 Requires-Python <3.12,>=3.8; 1.7.3 Requires-Python >=3.7,<3.11
ERROR: Could not find a version that satisfies the requirement scipy==1.7.3 (from versions: 1.11.2, 1.11.3)
ERROR: No matching distribution found for scipy==1.7.3
"""


def test_pin_for_another_python_names_the_range_and_switches_when_offered(tmp_path):
    sigs = diagnose(PIN)
    assert [(s.kind, s.key) for s in sigs] == [("python_pin", ">=3.7,<3.11")]
    assert "scipy==1.7.3 needs Python >=3.7,<3.11" in sigs[0].message
    assert cands(sigs[0], tmp_path, python="3.13", available=("3.10", "3.11", "3.13")) == ["switch_python version=3.10"]
    assert cands(sigs[0], tmp_path, python="3.13") == []


def test_pin_without_python_information_tries_older_offered_pythons(tmp_path):
    sig = diagnose("ERROR: No matching distribution found for oldlib==0.3\n")[0]
    assert sig.kind == "no_matching_distribution"
    assert cands(sig, tmp_path, python="3.13", available=("3.9", "3.11", "3.13")) == [
        "switch_python version=3.11",
        "switch_python version=3.9",
    ]


# --- class 2: a compiled dependency built without an optional system library --------------------

SUBMODULE = """\
tests/test_fast.py:1: in <module>
    from yaml.cyaml import CSafeLoader
/usr/local/lib/python3.11/site-packages/yaml/cyaml.py:7: in <module>
    from yaml._yaml import CParser, CEmitter
E   ModuleNotFoundError: No module named 'yaml._yaml'
"""


def test_missing_native_submodule_rebuilds_from_source_with_the_dev_package(tmp_path):
    sigs = diagnose(SUBMODULE)
    assert [(s.kind, s.key) for s in sigs] == [("missing_native_submodule", "yaml")]
    first = rule_candidates(sigs[0], repo=tmp_path, python="3.11", available_pythons=["3.11"])[0]
    assert first.atoms[0].args["packages"][:1] == ["libyaml-dev"] and "gcc" in first.atoms[0].args["packages"]
    assert first.atoms[1].args["command"][-3:] == ["--no-binary", "PyYAML", "PyYAML"]
    assert "--force-reinstall" in first.atoms[1].args["command"]


def test_a_missing_top_level_module_is_still_an_install(tmp_path):
    sigs = diagnose("E   ModuleNotFoundError: No module named 'yaml.foo'\n")
    assert [s.kind for s in sigs] == ["missing_module"]


# --- class 6: every service image a workflow or compose file names maps to a kind -----------------


@pytest.mark.parametrize(
    "image,kind",
    [
        ("mysql:8.0", "mysql"),
        ("mysql:5.7", "mysql"),
        ("mariadb:10.11", "mysql"),
        ("postgres:15-alpine", "postgres"),
        ("postgis/postgis:16-3.4", "postgres"),
        ("pgvector/pgvector:pg16", "postgres"),
        ("redis:7-alpine", "redis"),
        ("valkey/valkey:8", "redis"),
        ("rabbitmq:3-management", "rabbitmq"),
        ("mongo:7", "mongodb"),
        ("memcached:1.6", "memcached"),
        ("bitnami/mongodb:6.0", "mongodb"),
        ("docker.io/library/postgres:16", "postgres"),
    ],
)
def test_catalogue_knows_every_common_service_image(image, kind):
    from bot.catalogue import kind_of
    from bot.evidence.services import service_kind
    from bot.services import ServiceSpec

    assert kind_of(image=image) == kind
    # the evidence's kind reaches the same catalogue kind (the plan's requirement -> a spec)
    assert ServiceSpec.from_any({"name": "svc", "kind": service_kind(image), "image": image}).kind == kind


def test_a_service_without_a_stand_in_is_named_in_the_report():
    from bot.catalogue import resolve_image

    choice = resolve_image("mongodb", "mongo:7", lambda tag: False)
    assert choice.image is None and "mongo" in choice.note and "stand-in" in choice.note
    served = resolve_image("mysql", "mysql:8.0", lambda tag: tag == "mariadb:11")
    assert served.image == "mariadb:11" and served.substituted and "MariaDB" in served.note


def test_the_loop_reports_services_it_could_not_start(tmp_path):
    from types import SimpleNamespace

    from bot.loop.workspace import start_services

    outcomes = [
        SimpleNamespace(
            name="db",
            requested_image="mongo:7",
            kind="mongodb",
            healthy=False,
            note="mongo:7: no mongodb stand-in image is present",
            to_json=lambda: {"name": "db"},
        ),
        SimpleNamespace(
            name="cache",
            requested_image="redis:7",
            kind="redis",
            healthy=True,
            note="",
            to_json=lambda: {"name": "cache"},
        ),
    ]
    manager = SimpleNamespace(start=lambda reqs, ci_env: SimpleNamespace(outcomes=outcomes, env={}, all_healthy=False))
    steps, warnings = [], []
    traj = SimpleNamespace(record=lambda action, **kw: steps.append((action, kw["outcome"])))
    start_services(manager, [], {}, traj, warnings)
    assert warnings == ["service db (mongo:7) was not started: mongo:7: no mongodb stand-in image is present"]
    assert steps == [("services", "unhealthy")]


def test_forwarder_listens_on_both_loopbacks():
    from bot.services import FORWARDER

    assert '"127.0.0.1", "::1"' in FORWARDER and "EADDRINUSE" in FORWARDER
    compile(FORWARDER, "forwarder", "exec")


# --- class 4: two distributions providing one import name ---------------------------------------


def test_an_installed_declared_provider_is_preferred_over_the_same_named_distribution(tmp_path):

    from bot.compile.plan import Plan
    from bot.graph.model import DepGraph, Node
    from bot.loop.orchestrator import SetupLoop
    from bot.loop.repair import Candidate

    loop = SetupLoop.__new__(SetupLoop)
    g = DepGraph()
    g.add(
        Node("package:awesome-slugify", "PACKAGE", "awesome-slugify", "UNKNOWN", action="pip", attrs={"group": "main"})
    )
    g.add(
        Node(
            "package:python-slugify",
            "PACKAGE",
            "python-slugify",
            "UNKNOWN",
            action="pip",
            attrs={"group": "test", "source": "import"},
        )
    )
    loop.plan = Plan(tmp_path, g)  # the loop holds its graph through the plan (a view)
    loop.providers = {"slugify": ["awesome-slugify", "python-slugify"]}
    sig = diagnose(
        "E   ImportError: cannot import name 'Slugify' from 'slugify' "
        "(/usr/local/lib/python3.11/site-packages/slugify/__init__.py)"
    )[0]
    same_named = Candidate([Atom("pip_install", {"packages": ["python-slugify"]})], "rule")
    out = [c.describe() for c in loop._prefer_installed(sig, [same_named])]
    assert out == ["drop_package pip python-slugify"]
    # nothing declared provides it: the candidates stay as they were
    loop.providers = {"slugify": ["python-slugify"]}
    other = Candidate([Atom("pip_install", {"packages": ["awesome-slugify"]})], "rule")
    assert [c.describe() for c in loop._prefer_installed(sig, [other])] == ["pip_install awesome-slugify"]


def test_a_bare_reinstall_of_the_installed_provider_is_not_tried(tmp_path):
    """faststream.broker is missing from the faststream installed (a release that dropped it):
    pip install faststream answers "already satisfied", and its trial only ran the suite again
    (19 s on dishka) before the era pin came up. A version, an extra or another distribution
    can change the environment and stays."""
    from bot.compile.plan import Plan
    from bot.graph.model import DepGraph
    from bot.loop.orchestrator import SetupLoop
    from bot.loop.repair import Candidate

    loop = SetupLoop.__new__(SetupLoop)
    loop.plan = Plan(tmp_path, DepGraph())
    loop.providers = {"faststream": ["faststream"]}
    sig = diagnose("E   ModuleNotFoundError: No module named 'faststream.broker'")[0]

    def pip(*packages: str) -> Candidate:
        return Candidate([Atom("pip_install", {"packages": list(packages)})], "knowledge")

    era = Candidate([Atom("pip_constraint", {"constraints": ["faststream==0.5.33"]})], "rule")
    cands = [pip("faststream"), pip("FastStream"), era, pip("faststream[nats]"), pip("faststream>=0.5"), pip("other")]
    out = [c.describe() for c in loop._prefer_installed(sig, cands)]
    assert out == [
        "pip_constraint faststream==0.5.33",
        "pip_install faststream[nats]",
        "pip_install faststream>=0.5",
        "pip_install other",
    ]
    # not installed: installing it is the repair
    loop.providers = {"faststream": []}
    assert [c.describe() for c in loop._prefer_installed(sig, cands[:1])] == ["pip_install faststream"]


def test_a_project_that_compiles_its_extension_is_not_offered_a_checkout_run_for_similar_text(tmp_path):
    """A failed Rust build of the project reads like a packaging failure (setuptools, package),
    so the application-layout unit comes back as a lexical neighbour; the compiled module the
    tests import would then never exist. A unit whose pattern matched still stands."""
    from bot.compile.plan import Plan
    from bot.graph.model import DepGraph, Node
    from bot.loop.orchestrator import SetupLoop
    from bot.loop.repair import Candidate

    loop = SetupLoop.__new__(SetupLoop)
    g = DepGraph()
    g.add(Node("package:@project", "PACKAGE", "@project", "SATISFIED", action="project"))
    loop.plan = Plan(tmp_path, g)
    deps_only = Candidate([Atom("install_deps_only", {})], "knowledge", unit_id="install-application-layout")
    pip = Candidate([Atom("pip_install", {"packages": ["setuptools-rust"]})], "knowledge", unit_id="u2")
    assert loop._fit_for_the_project([deps_only, pip]) == [deps_only, pip]
    g.meta["rust_toolchain"] = {"builder": "setuptools-rust"}
    assert loop._fit_for_the_project([deps_only, pip]) == [pip]
    del g.meta["rust_toolchain"]
    g.nodes["package:@project"].attrs["compiles"] = True
    assert loop._fit_for_the_project([deps_only, pip]) == [pip]


def test_missing_project_metadata_installs_the_project_and_a_dependencys_installs_it(tmp_path):
    """`PackageNotFoundError` for the project's own name: install the project; for another name
    the install_project candidate (rule or unit) is dropped and the distribution installed."""
    from bot.compile.plan import Plan
    from bot.graph.model import DepGraph, Node
    from bot.loop.orchestrator import SetupLoop
    from bot.loop.repair import rule_candidates

    loop = SetupLoop.__new__(SetupLoop)
    g = DepGraph()
    g.add(Node("package:@project", "PACKAGE", "shopcart", "SATISFIED", action="project", attrs={"deps_only": True}))
    loop.plan = Plan(tmp_path, g)

    def offered(log):
        sig = diagnose(log)[0]
        assert sig.kind == "missing_distribution"
        rules = rule_candidates(sig, repo=tmp_path, python="3.11", available_pythons=["3.11"])
        return [c.describe() for c in loop._own_name_only(rules, sig)]

    own = "E   importlib.metadata.PackageNotFoundError: No package metadata was found for shopcart"
    assert offered(own) == ["install_project shopcart"]  # never a published namesake
    other = "pkg_resources.DistributionNotFound: The 'sentinel-dist' distribution was not found and is required"
    assert offered(other) == ["pip_install sentinel-dist"]


def test_a_missing_submodule_of_the_checkouts_own_package_gets_no_namesake_from_the_index(tmp_path):
    """NESCL's after-run (9049bdc): recbole.util.cython.random_choice is a Cython module of the
    checkout that nothing compiled; the generic repair would install the index's recbole, which
    replaces the checkout's own install. For a module the checkout holds no namesake is offered
    (rule or unit); for any other module the rule's distribution stays."""
    from bot.compile.plan import Plan
    from bot.graph.model import DepGraph
    from bot.loop.orchestrator import SetupLoop
    from bot.loop.repair import Candidate, rule_candidates

    loop = SetupLoop.__new__(SetupLoop)
    g = DepGraph()
    g.meta["checkout_modules"] = ["recbole"]
    loop.plan = Plan(tmp_path, g)
    unit = Candidate([Atom("pip_install", {"packages": ["recbole"]})], "knowledge", unit_id="install-module-generic")

    def offered(line):
        sig = diagnose(line)[0]
        assert sig.kind == "missing_module"
        rules = rule_candidates(sig, repo=tmp_path, python="3.9", available_pythons=["3.9"])
        return [c.describe() for c in loop._own_name_only([*rules, unit], sig)]

    assert offered("E   ModuleNotFoundError: No module named 'recbole.util.cython.random_choice'") == []
    # the same log read for another of its signatures ("no tests collected"): the unit that
    # matched the missing module's line is still not offered
    log = "E   ModuleNotFoundError: No module named 'recbole.util.cython.random_choice'\nno tests collected, 1 error"
    sigs = diagnose(log)
    no_tests = next(s for s in sigs if s.kind == "no_tests_collected")
    assert loop._own_name_only([unit], no_tests, sigs) == []
    assert loop._own_name_only([unit], no_tests) == [unit]
    # another module: everything offered stays (the rule's distributions, and the unit)
    assert offered("E   ModuleNotFoundError: No module named 'yaml'") == [
        "pip_install PyYAML",
        "pip_install yaml",
        "pip_install recbole",
    ]


def test_a_debian_package_this_release_has_not_is_replaced_or_left_out(tmp_path):
    """apt on trixie has no candidate for libgl1-mesa-glx (a repository's Dockerfile for an older
    Debian named it): install what took its place, else leave it out; a runtime library of the
    time_t transition gets its t64 name; an unknown name is only left out."""
    from bot.compile.plan import make_plan
    from bot.graph.mapping import Registry
    from bot.loop.repair import rule_candidates

    def offered(log):
        sigs = [s for s in diagnose(log) if s.kind == "unknown_apt_package"]
        return [
            c.describe() for c in rule_candidates(sigs[0], repo=tmp_path, python="3.13", available_pythons=["3.13"])
        ]

    assert offered("E: Package 'libgl1-mesa-glx' has no installation candidate") == [
        "drop_package apt libgl1-mesa-glx; apt_install libgl1 libglx-mesa0",
        "drop_package apt libgl1-mesa-glx",
    ]
    assert offered("E: Package 'libasound2' has no installation candidate")[0] == (
        "drop_package apt libasound2; apt_install libasound2t64"
    )
    assert offered("E: Unable to locate package notadebianpackage") == ["drop_package apt notadebianpackage"]

    # the candidate applies to a plan that names the package (from the repository's Dockerfile)
    (tmp_path / "Dockerfile").write_text(
        "FROM python:3.12-slim\nRUN apt-get update && apt-get install -y libgl1-mesa-glx\n"
    )
    (tmp_path / "requirements.txt").write_text("opencv-python\n")
    plan = make_plan(tmp_path, None, available_pythons=["3.13"], resolve=False, registry=Registry(enabled=False))
    assert plan.graph.nodes["systemlib:libgl1-mesa-glx"].action == "apt"
    sig = diagnose("E: Package 'libgl1-mesa-glx' has no installation candidate")[0]
    for atom in rule_candidates(sig, repo=tmp_path, python="3.13", available_pythons=["3.13"])[0].atoms:
        plan.graph.apply_atom(atom)
    run = next(line for line in compile_dockerfile(plan.graph).text.split("\nRUN ") if "apt-get install" in line)
    assert "libgl1-mesa-glx" not in run and "libglx-mesa0" in run and "libgl1 " in run + " "


# --- generic strategies -------------------------------------------------------------------------


def test_generic_strategies_follow_ci_then_leave_out_guesses(tmp_path):
    from bot.compile.plan import make_plan
    from bot.graph.mapping import Registry
    from bot.loop.repair import ci_install_specs, generic_candidates

    wf = tmp_path / ".github" / "workflows"
    wf.mkdir(parents=True)
    wf.joinpath("ci.yml").write_text(
        "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: |\n          python -m pip install -U pip\n          pip install cowsay 'freezegun<2' -r extra.txt $(cat x)\n"
        "      - run: pytest\n"
    )
    (tmp_path / "tox.ini").write_text("[testenv]\ndeps =\n    pytest-sugar\n    py311: tomli\ncommands = pytest\n")
    (tmp_path / "noxfile.py").write_text(
        "import nox\n@nox.session\ndef t(session):\n    session.install('hypothesis', '.')\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("import yaml\n")
    assert ci_install_specs(tmp_path) == ["cowsay", "freezegun<2", "pytest-sugar", "tomli", "hypothesis"]
    plan = make_plan(tmp_path, None, available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False))
    named = [(n, c.describe()) for n, c in generic_candidates(tmp_path, plan.graph)]
    # tox's deps are in the plan already; what only the CI and nox install is offered
    assert named[0] == ("follow the CI's install commands", "pip_install cowsay freezegun<2 hypothesis")
    assert ("leave out the distributions guessed from imports", "drop_package pip pyyaml") in named


def test_a_failed_install_of_the_project_itself_is_tried_as_an_application_first(tmp_path):
    """The project's own install step fails with no classified cause (setuptools refuses its
    pyproject: `project.license` is neither SPDX nor a table): the first generic strategy
    installs its dependencies only and runs it from the checkout; a failure in any other step
    does not offer it, nor does a project already run from the checkout."""
    from bot.compile.plan import make_plan
    from bot.graph.mapping import Registry
    from bot.loop.repair import generic_candidates, project_install_failed

    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "node"\nversion = "1"\nlicense = "LICENSE"\ndependencies = ["requests"]\n'
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("import requests\n")
    classic = (
        "      ValueError: invalid pyproject.toml config: `project.license`.\n"
        "The command '/bin/sh -c python -m pip install --no-cache-dir -e '.[test]'' returned a non-zero code: 1"
    )
    buildkit = (
        "[stage-0 5/7] RUN python -m pip install --no-cache-dir requests\nDONE 2.0s\n"
        "[stage-0 7/7] RUN python -m pip install --no-cache-dir -e .\n"
        "ValueError: invalid pyproject.toml config: `project.license`.\n"
    )
    other_step = "The command '/bin/sh -c python -m pip install --no-cache-dir requests' returned a non-zero code: 1"
    assert project_install_failed(classic) and project_install_failed(buildkit)
    assert not project_install_failed(other_step) and not project_install_failed("")
    assert not project_install_failed("The command '/bin/sh -c pip install ./vendor/x.whl' returned a non-zero code: 1")

    plan = make_plan(tmp_path, None, available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False))
    named = [(n, c.describe()) for n, c in generic_candidates(tmp_path, plan.graph, classic)]
    assert named[0] == ("install the dependencies only and run from the checkout", "install_deps_only")
    assert all(n != named[0][0] for n, _ in generic_candidates(tmp_path, plan.graph, other_step))
    plan.graph.apply_atom(Atom("install_deps_only", {}))
    assert all(n != named[0][0] for n, _ in generic_candidates(tmp_path, plan.graph, classic))


# --- class 5 in the devcontainer: the same relay, on both loopbacks -------------------------------


def test_devcontainer_compose_relays_localhost_to_each_service():
    import yaml

    from bot.compile.compose import render_compose
    from bot.services import FORWARDER

    app = yaml.safe_load(
        render_compose(services=[{"name": "postgres", "image": "postgres:16"}, {"name": "cache", "image": "redis:7"}])
    )["services"]["app"]
    assert app["command"][:2] == ["sh", "-c"] and "$$0" in app["command"][2]
    assert app["command"][3].strip() == FORWARDER.strip()
    assert app["command"][4:] == ["5432:postgres:5432", "6379:cache:6379"]
    assert app["sysctls"] == {"net.ipv6.conf.lo.disable_ipv6": 0}
    alone = yaml.safe_load(render_compose(services=[]))["services"]["app"]
    assert alone["command"] == ["sleep", "infinity"] and "sysctls" not in alone


def test_the_statement_that_no_offered_python_fits_names_the_stand_in_that_would():
    """Offline, 3.11 and 3.13 offered: scipy==1.7.3 needs <3.11, and bullseye's 3.9 would serve;
    a pin with no Python information gets the newest older stand-in named."""
    from bot.loop.replay import ReplayMixin

    class Loop(ReplayMixin):
        available = ["3.11", "3.13"]

    pin = diagnose(PIN)[0]
    note = Loop()._no_python_note(pin)
    assert "none of the offered Pythons (3.11, 3.13) satisfies >=3.7,<3.11" in note
    assert "`setupbot images bootstrap --python 3.9`" in note
    old = diagnose("ERROR: No matching distribution found for oldlib==0.3\n")[0]
    assert "`setupbot images bootstrap --python 3.9`" in Loop()._no_python_note(old)
    # 3.9 offered already: nothing older to build, only the statement
    Loop.available = ["3.9", "3.11"]
    assert "bootstrap" not in Loop()._no_python_note(old) and "no offered Python (3.9, 3.11)" in Loop()._no_python_note(
        old
    )


BACKTRACK = """\
Collecting sympy
  Downloading sympy-1.13.3-py3-none-any.whl (6.2 MB)
INFO: pip is looking at multiple versions of sympy to determine which version is compatible with other requirements. This could take a while.
  Downloading sympy-1.13.2-py3-none-any.whl (6.2 MB)
INFO: This is taking longer than usual. You might need to provide the dependency resolver with stricter constraints to reduce runtime. See https://pip.pypa.io/warnings/backtracking for guidance. If you want to abort this run, press Ctrl + C.
INFO: pip is looking at multiple versions of mpmath to determine which version is compatible with other requirements. This could take a while.
  Downloading sympy-1.7-py3-none-any.whl (5.9 MB)

[setupbot] build stopped: pip's resolver was still backtracking 300s after it said it was taking longer than usual
"""


def test_a_resolver_that_backtracks_until_stopped_is_constrained_to_the_hosts_resolution(tmp_path):
    """pip backtracked over sympy until the engine stopped the build; the plan's uv resolution
    for the same Python gives every version as a constraint (the project's own name and a local
    version label left out). A plain 'taking longer' that finished is no failure."""
    from types import SimpleNamespace

    from bot.compile.plan import make_plan
    from bot.loop.candidates import CandidatesMixin

    sigs = diagnose(BACKTRACK)
    assert [(s.kind, s.key) for s in sigs] == [("resolver_backtracking", "mpmath,sympy")]
    assert diagnose(BACKTRACK.replace("[setupbot] build stopped", "Successfully installed")) == []

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "mdm"\nversion = "0"\ndependencies = ["torch"]\n')
    graph = make_plan(tmp_path, None, available_pythons=["3.11"], resolve=False).graph
    graph.meta["resolution"] = {
        "ok": True,
        "python": "3.11",
        "pins": {"mdm": "0", "sympy": "1.13.1", "torch": "2.2.2", "triton": "2.2.0+local"},
    }

    class Loop(CandidatesMixin):
        python = "3.11"

        def __init__(self):
            self.plan = SimpleNamespace(graph=graph)

    (cand,) = Loop()._resolution_candidates(sigs[0])
    assert cand.describe() == "pip_constraint sympy==1.13.1 torch==2.2.2"
    assert "over mpmath, sympy" in cand.why
    Loop.python = "3.13"  # another Python than the one resolved for: nothing to give
    assert Loop()._resolution_candidates(sigs[0]) == []


CONSTRAINT_CONFLICT = """\
INFO: pip is looking at multiple versions of httpx to determine which version is compatible with other requirements. This could take a while.
ERROR: Cannot install img2dataset==1.47.0 because these package versions have conflicting dependencies.

The conflict is caused by:
    img2dataset 1.47.0 depends on dataclasses<1.0.0 and >=0.6
    The user requested (constraint) dataclasses==0.8

To fix this you could try to:
1. loosen the range of package versions you've specified
2. remove package versions to allow pip attempt to solve the dependency conflict

ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/#dealing-with-dependency-conflicts
"""


def test_a_constraint_pip_cannot_meet_gives_way_to_a_range_without_that_release(tmp_path):
    """ml-mdm's after-run (9049bdc): the loop constrained pip to uv's resolution for Python 3.11,
    which took dataclasses==0.8 (Requires-Python <3.7, a bound uv ignores); pip refused it. The
    signature names the pin, the rule asks for dataclasses!=0.8, and applied to the graph that
    range replaces the exact pin, so the constraint file no longer holds 0.8."""
    from bot.compile.plan import make_plan
    from bot.graph.apply import apply_atom
    from bot.loop.repair import RULES, RuleContext

    sigs = diagnose(CONSTRAINT_CONFLICT)
    assert [(s.kind, s.key) for s in sigs] == [("constraint_conflict", "dataclasses==0.8")]
    # without pip naming a constraint it stays the generic conflict, which no rule repairs
    generic = diagnose(CONSTRAINT_CONFLICT.replace("The user requested (constraint) dataclasses==0.8", ""))
    assert [s.kind for s in generic] == ["dependency_conflict"]

    ctx = RuleContext(repo=tmp_path, python="3.11", available_pythons=["3.11"], repo_env={}, specs={})
    (cand,) = RULES["constraint_conflict"](sigs[0], ctx)
    assert cand.describe() == "pip_constraint dataclasses!=0.8"
    assert "Requires-Python excludes Python 3.11" in cand.why

    (tmp_path / "requirements.txt").write_text("img2dataset\n")
    graph = make_plan(tmp_path, None, available_pythons=["3.11"], resolve=False).graph
    apply_atom(graph, Atom("pip_constraint", {"constraints": ["dataclasses==0.8", "httpx==0.24.1"]}))
    apply_atom(graph, cand.atoms[0])
    specs = sorted(n.attrs["spec"] for n in graph.of_type("CONFIG") if n.attrs.get("kind") == "pip_constraint")
    assert "dataclasses==0.8" not in specs and "dataclasses!=0.8" in specs and "httpx==0.24.1" in specs


def test_a_cython_module_of_the_checkout_that_nothing_compiles_is_compiled_in_place(tmp_path):
    """NESCL's class: a submodule the checkout keeps only as a .pyx, which neither the project's
    build nor its CI compiles. The rule installs the compiler its directive asks for and Cython,
    and compiles the source in place; the devcontainer compiles it again under its mount."""
    from bot.compile.plan import make_plan
    from bot.graph.apply import apply_atom
    from bot.graph.mapping import Registry

    repo = REPOS / "loop-cython-in-place"
    line = "E   ModuleNotFoundError: No module named 'sampling.fast.pick'"
    [sig] = [s for s in diagnose(line) if s.kind == "missing_module"]
    [cand] = rule_candidates(sig, repo=repo, python="3.11", available_pythons=["3.11"])
    assert cand.describe() == (
        "apt_install g++; pip_install Cython setuptools; compile_in_place sampling/fast/pick.pyx"
    )
    # the plan's range for Cython, when it has one, is kept
    [pinned] = rule_candidates(sig, repo=repo, python="3.11", available_pythons=["3.11"], specs={"cython": ">=3,<4"})
    assert pinned.atoms[1].args["packages"] == ["Cython>=3,<4", "setuptools"]

    # a C source (no C++ directive) gets gcc; a src/ layout is found too
    (tmp_path / "src" / "pkg" / "ext").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "ext" / "k.pyx").write_text("def f():\n    return 1\n")
    [sig_c] = diagnose("ModuleNotFoundError: No module named 'pkg.ext.k'")
    assert (
        cands(sig_c, tmp_path)[0]
        == "apt_install gcc; pip_install Cython setuptools; compile_in_place src/pkg/ext/k.pyx"
    )
    # a top-level module, or a dotted one with no .pyx, keeps the distribution repair
    assert cands(diagnose("ModuleNotFoundError: No module named 'pkg.ext.other'")[0], tmp_path) == ["pip_install pkg"]
    # a .pyx reached through a link out of the checkout is not the checkout's
    outside = tmp_path.parent / f"{tmp_path.name}-outside.pyx"
    outside.write_text("def f():\n    return 1\n")
    (tmp_path / "src" / "pkg" / "ext" / "leak.pyx").symlink_to(outside)
    assert cands(diagnose("ModuleNotFoundError: No module named 'pkg.ext.leak'")[0], tmp_path) == ["pip_install pkg"]

    # the kept repair compiles after the source in the Dockerfile, and again in the devcontainer
    plan = make_plan(repo, None, available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False))
    assert plan.post_create_command is None
    for atom in cand.atoms:
        apply_atom(plan.graph, atom, "the tests could not import sampling.fast.pick")
    text = compile_dockerfile(plan.graph).text
    run = "RUN python -m Cython.Build.Cythonize -i sampling/fast/pick.pyx"
    assert run in text and text.index("# the source") < text.index(run)
    assert "# built in place (the devcontainer builds it again)\n" + run in text
    assert "g++" in text and "Cython" in text
    assert plan.post_create_command == [
        "python",
        "-m",
        "Cython.Build.Cythonize",
        "-i",
        "sampling/fast/pick.pyx",
    ]


@pytest.mark.parametrize("source", ["../x.pyx", "/etc/x.pyx", "a/../../x.pyx", "a/b.py", "a b.pyx", "-i.pyx"])
def test_compile_in_place_takes_only_relative_pyx_paths_of_identifiers(source):
    with pytest.raises(AtomError):
        Atom("compile_in_place", {"sources": [source]}).validate()
    Atom("compile_in_place", {"sources": ["a/b_c/d.pyx"]}).validate()


SPOTPY_COLLECTION = """\
==================================== ERRORS ====================================
__ ERROR collecting tests/test_list_and_constant_parameters_with_samplers.py ___
tests/test_list_and_constant_parameters_with_samplers.py:63: in <module>
    class RosenbrockWithList(Rosenbrock):
tests/test_list_and_constant_parameters_with_samplers.py:70: in RosenbrockWithList
    l = parameter.List(np.arange(0, 10), repeat=True, doc="list parameter for testing")
src/spotpy/parameter.py:310: in __init__
    super(List, self).__init__(None, "List", *args, **kwargs)
src/spotpy/parameter.py:195: in __init__
    self.name = arghelper.name()
src/spotpy/parameter.py:51: in name
    if self.args and (str(self.args[0]) == self.args[0]):
E   ValueError: The truth value of an array with more than one element is ambiguous. Use a.any() or a.all()
=========================== short test summary info ============================
ERROR tests/test_list_and_constant_parameters_with_samplers.py - ValueError: ...
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
232 tests collected, 1 error in 1.37s
"""


def test_code_that_tests_an_array_string_comparison_gets_numpy_before_its_change(tmp_path):
    """spotpy's after-run (9049bdc): `str(arr) == arr` in an `if` raises since NumPy 1.25, which
    made the comparison elementwise (the era's NumPy 1.26 did not help). The rule pins NumPy 1.24,
    on the image's Python when it is 3.11 or older, else with the newest offered Python that old."""
    from bot.loop.diagnose import collection_signatures

    [sig] = collection_signatures(SPOTPY_COLLECTION)
    assert (sig.kind, sig.category, sig.key) == ("numpy_string_comparison", "version", "numpy")
    assert cands(sig, tmp_path, python="3.9", available=("3.9", "3.11", "3.13")) == ["pip_constraint numpy<1.25"]
    assert cands(sig, tmp_path, python="3.13", available=("3.9", "3.11", "3.13")) == [
        "switch_python version=3.11; pip_constraint numpy<1.25"
    ]
    assert cands(sig, tmp_path, python="3.13", available=("3.13",)) == []
    # a literal on either side, in a plain traceback
    plain = '  File "/w/plot.py", line 12, in hist\n    if "auto" != bins:\nValueError: The truth value of an array with more than one element is ambiguous.'
    assert [s.kind for s in diagnose(plain)] == ["numpy_string_comparison"]
    # Python 3.13's traceback marks the expression with carets
    marked = (
        'binning/__init__.py:8: in edges\n    if bins == "auto":\n       ^^^^^^^^^^^^^^\n'
        "E   ValueError: The truth value of an array with more than one element is ambiguous. Use a.any() or a.all()"
    )
    assert [s.kind for s in diagnose(marked)] == ["numpy_string_comparison"]
    # two arrays compared: that raises in every NumPy, and is not this class
    arrays = "    if a == b:\nValueError: The truth value of an array with more than one element is ambiguous."
    assert diagnose(arrays) == []
