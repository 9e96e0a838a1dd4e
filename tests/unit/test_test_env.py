"""A variable a repair set for the tests alone sits after the install steps, so a change to it
rebuilds no install, and an image that differs only there is the same image to the replay."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from bot.atoms import Atom
from bot.compile import compile_dockerfile
from bot.compile.dockerfile import builds_same_image, without_dev_stage
from bot.compile.plan import make_plan
from bot.graph.apply import apply_atom
from bot.graph.mapping import Registry
from bot.loop.repair import Candidate
from bot.loop.trials import TrialsMixin

REPOS = Path(__file__).parents[1] / "fixtures" / "repos"
ADDOPTS = Atom("set_env", {"name": "PYTEST_ADDOPTS", "value": "-p no:cacheprovider"})


def _graph():
    return make_plan(
        REPOS / "plan-ci-services", None, available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False)
    ).graph


def _trialled_in_container(graph, cand: Candidate) -> None:
    """What trial_in_container does to the graph before it evaluates the candidate."""
    for atom in cand.atoms:
        apply_atom(graph, atom, "a repair")
    TrialsMixin._for_tests_alone(SimpleNamespace(graph=graph), cand)  # type: ignore[arg-type]


def test_a_variable_tried_for_the_tests_alone_goes_after_every_install():
    g = _graph()
    before = compile_dockerfile(g).text
    _trialled_in_container(g, Candidate([ADDOPTS], "rule"))
    text = compile_dockerfile(g).text
    env = text.index("ENV PYTEST_ADDOPTS=")
    assert text.index('COPY [".", "/workspace"]') < env < text.index("CMD [")
    tested = without_dev_stage(text)
    assert all(tested.index(line) < env for line in tested.splitlines() if line.startswith("RUN "))
    # every layer is the one the first image built: the replay may run on that image
    assert builds_same_image(before, text)


@pytest.mark.parametrize(
    "atoms",
    [
        [ADDOPTS, Atom("pip_install", {"packages": ["pytest-xdist"]})],  # the install ran with it
        [ADDOPTS],  # tried by a rebuild (no runner yet): the build ran with it
    ],
    ids=["with-an-install", "by-rebuild"],
)
def test_a_variable_an_install_or_a_build_ran_with_stays_before_the_installs(atoms):
    g = _graph()
    before = compile_dockerfile(g).text
    cand = Candidate(atoms, "rule")
    if len(atoms) > 1:
        _trialled_in_container(g, cand)
    else:
        apply_atom(g, atoms[0], "a repair")
    text = compile_dockerfile(g).text
    assert text.index("ENV PYTEST_ADDOPTS=") < text.index("WORKDIR /workspace")
    assert not builds_same_image(before, text)


def test_setting_it_again_by_a_rebuild_moves_it_back_before_the_installs():
    g = _graph()
    _trialled_in_container(g, Candidate([ADDOPTS], "rule"))
    apply_atom(g, Atom("set_env", {"name": "PYTEST_ADDOPTS", "value": "-x"}), "a rebuild trial")
    text = compile_dockerfile(g).text
    assert text.index("ENV PYTEST_ADDOPTS=-x") < text.index("WORKDIR /workspace")


def test_same_image_ignores_comments_cmd_and_trailing_env_only():
    base = 'FROM python:3.11-slim\nRUN pip install a\nCOPY [".", "/w"]\n'
    assert builds_same_image(base + 'CMD ["pytest"]\n', "# why\n" + base + 'ENV A=1 \\\n    B=2\nCMD ["tox"]\n')
    # an ENV that a later step builds with, or another step, is another image
    assert not builds_same_image(base, base.replace("RUN", "ENV A=1\nRUN"))
    assert not builds_same_image(base, base + "RUN true\n")
    assert not builds_same_image(base + "ENV A=1\nRUN true\n", base + "RUN true\n")
