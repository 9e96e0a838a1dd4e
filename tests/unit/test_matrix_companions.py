"""A tox version matrix installs one requirements file per factor (dishka: ``sanic-latest: -r
requirements/sanic-latest.txt``). The plan installs none of those files whole; a package in them
that the tests import is promoted by name. What is listed beside it in those files comes with it:
the repository runs those tests with it, and what nothing imports there is what the tests need
beside it (sanic's test client loads sanic-testing). Before, each such companion cost a repair:
a second build and a second run of the suite."""

from __future__ import annotations

from bot.compile.plan import make_plan

TOX = (
    "[tox]\nenv_list = unit, sanic-latest\n\n"
    "[testenv]\ndeps =\n    pytest\n"
    "    sanic-latest: -r requirements/sanic-latest.txt\n"
    "    sanic-2312: -r {toxinidir}/requirements/sanic-2312.txt\n"
    "commands = pytest tests\n"
)
FILES = {
    "pyproject.toml": "[project]\nname = 'di'\nversion = '1'\ndependencies = []\n",
    "tox.ini": TOX,
    "requirements/sanic-latest.txt": "sanic\nsanic-testing\n",
    "requirements/sanic-2312.txt": "sanic==23.12.1\nsanic-testing==23.12.0\n",
    # a benchmark's comparison set that no test environment installs
    "requirements/compare.txt": "orjson\ntorch\n",
    "requirements/docs.txt": "sanic\nsphinx\n",
    "di/__init__.py": "",
    "tests/test_sanic.py": "import sanic\nimport orjson\n\ndef test_app():\n    assert sanic\n",
}


def _pip(plan) -> dict[str, str]:
    return {n.name: str(n.attrs.get("spec")) for n in plan.graph.of_type("PACKAGE") if n.action == "pip"}


def test_what_a_matrix_cell_lists_beside_an_imported_package_is_installed_with_it(write_tree):
    plan = make_plan(write_tree(FILES), available_pythons=["3.12"], resolve=False)
    pip = _pip(plan)
    # by name: one cell's pin is that cell's, as for the imported package itself
    assert pip["sanic"] == "sanic" and pip["sanic-testing"] == "sanic-testing"
    node = plan.graph.nodes["package:sanic-testing"]
    assert node.attrs["promoted"] == "listed beside sanic, which the tests import"
    assert {e[0] for e in node.evidence} >= {"requirements/sanic-latest.txt", "requirements/sanic-2312.txt"}
    assert "        sanic-testing" in plan.dockerfile.text


def test_a_file_no_test_environment_installs_brings_nothing_beside_an_import(write_tree):
    plan = make_plan(write_tree(FILES), available_pythons=["3.12"], resolve=False)
    pip = _pip(plan)
    assert "orjson" in pip  # the tests import it
    assert "torch" not in pip and "sphinx" not in pip


def test_a_documentation_file_a_factor_names_brings_nothing(write_tree):
    tox = TOX.replace("    pytest\n", "    pytest\n    docs: -r requirements/docs.txt\n")
    files = dict(FILES, **{"tox.ini": tox, "requirements/sanic-latest.txt": "", "requirements/sanic-2312.txt": ""})
    plan = make_plan(write_tree(files), available_pythons=["3.12"], resolve=False)
    pip = _pip(plan)
    assert "sanic" in pip and "sphinx" not in pip


def test_the_tox_scan_records_each_factor_s_requirement_file(write_tree):
    from bot.evidence import scan_repository

    ev = scan_repository(write_tree(FILES))
    assert [path for path, _src in ev.matrix_files] == ["requirements/sanic-latest.txt", "requirements/sanic-2312.txt"]
    assert all(src.file == "tox.ini" and src.line for _path, src in ev.matrix_files)
