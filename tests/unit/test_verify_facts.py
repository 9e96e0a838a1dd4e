"""Reading what the prosecutor checks against from a repository."""

from __future__ import annotations

import textwrap

from bot.verify.facts import RepoFacts


def test_facts_from_pyproject_readme_and_source(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent("""
        [project]
        name = "demo"
        dependencies = ["requests>=2", "tomli; python_version < '3.11'", "not a requirement !!"]
        [project.optional-dependencies]
        plot = ["matplotlib", "requests[socks]"]
        [project.scripts]
        demo-cli = "demo.cli:main"
    """)
    )
    (tmp_path / "src" / "demo").mkdir(parents=True)
    (tmp_path / "src" / "demo" / "__init__.py").write_text(
        "try:\n    import orjson\nexcept ImportError:\n    orjson = None\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("try:\n    import hidden\nexcept ImportError:\n    pass\n")
    (tmp_path / "README.md").write_text(
        textwrap.dedent("""
        ```bash
        $ pip install demo
        $ demo-cli run --fast
        python -m demo.tool serve
        rm -rf /
        ```
    """)
    )
    facts = RepoFacts.from_repo(tmp_path)
    assert facts.project_name == "demo"
    assert [(c.name, c.marker) for c in facts.core] == [("requests", ""), ("tomli", 'python_version < "3.11"')]
    assert facts.optional == {"matplotlib"}  # requests is core, even if an extra names it too
    assert facts.console_scripts == {"demo-cli": "demo.cli:main"}
    assert facts.own_modules == ["demo"]
    assert "orjson" in facts.guarded_imports and "hidden" not in facts.guarded_imports
    assert facts.readme_commands == [["demo-cli"], ["python", "-m", "demo.tool"]]
    assert any("cannot parse" in w for w in facts.warnings)


def test_facts_from_setup_cfg_and_requirements(tmp_path):
    (tmp_path / "setup.cfg").write_text(
        textwrap.dedent("""
        [metadata]
        name = old
        [options]
        install_requires =
            click
        [options.extras_require]
        dev = pytest
        [options.entry_points]
        console_scripts =
            old = old.main:run
    """)
    )
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "__init__.py").write_text("")
    facts = RepoFacts.from_repo(tmp_path)
    assert [c.name for c in facts.core] == ["click"] and facts.optional == {"pytest"}
    assert facts.console_scripts == {"old": "old.main:run"} and facts.own_modules == ["old"]
    other = tmp_path / "reqs"
    other.mkdir()
    (other / "requirements.txt").write_text("numpy==1.26  # pinned\n-r more.txt\n")
    assert [c.name for c in RepoFacts.from_repo(other).core] == ["numpy"]
