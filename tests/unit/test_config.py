"""Settings chain: defaults -> repository file -> SETUPBOT_* environment -> command line."""

from __future__ import annotations

import pytest

from bot.config import load_settings
from bot.errors import ConfigError


def test_packaged_defaults_resolve():
    s = load_settings(None, environ={})
    assert s.engine.kind == "docker"
    assert s.engine.pids_limit == 1024
    assert s.ca.file == "auto"
    assert s.images.suites == ("bookworm", "trixie")


def test_unknown_key_names_the_closest_one(tmp_path):
    cfg = tmp_path / "setupbot.yml"
    cfg.write_text("engine:\n  memroy: 2g\n")
    with pytest.raises(ConfigError) as err:
        load_settings(None, environ={}, config_file=cfg)
    assert "engine.memroy" in err.value.what
    assert "Did you mean 'memory'?" in err.value.what


def test_unknown_section_names_the_closest_one(tmp_path):
    cfg = tmp_path / "setupbot.yml"
    cfg.write_text("engin:\n  kind: docker\n")
    with pytest.raises(ConfigError) as err:
        load_settings(None, environ={}, config_file=cfg)
    assert "Did you mean 'engine'?" in err.value.what


def test_repository_file_then_environment_then_command_line(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".github").mkdir(parents=True)
    (repo / ".github" / "setupbot.yml").write_text("target:\n  as_of: '2024-01-01'\n  test_command: [pytest, -x]\n")
    s = load_settings(repo, environ={})
    assert (s.target.as_of, s.target.test_command) == ("2024-01-01", ("pytest", "-x"))
    s = load_settings(repo, environ={"SETUPBOT_TARGET_AS_OF": "2023-05-05"})
    assert s.target.as_of == "2023-05-05" and s.target.test_command == ("pytest", "-x")
    s = load_settings(
        repo,
        environ={"SETUPBOT_TARGET_AS_OF": "2023-05-05"},
        overrides={"target": {"as_of": "2022-02-02", "test_command": None}},
    )
    assert s.target.as_of == "2022-02-02" and s.target.test_command == ("pytest", "-x")


def test_operator_file_sets_sandbox_keys(tmp_path):
    """SETUPBOT_CONFIG / --config name the operator's file: every key is allowed there."""
    op = tmp_path / "operator.yml"
    op.write_text("engine:\n  pids_limit: 300\n  memory: 1g\nca:\n  file: ''\n")
    s = load_settings(None, environ={"SETUPBOT_CONFIG": str(op)})
    assert (s.engine.pids_limit, s.engine.memory, s.ca.file, s.refused) == (300, "1g", "", ())
    s = load_settings(None, environ={"SETUPBOT_CONFIG": str(op), "SETUPBOT_ENGINE_PIDS_LIMIT": "200"})
    assert s.engine.pids_limit == 200 and s.engine.memory == "1g"


def test_environment_values_are_coerced_and_checked():
    s = load_settings(None, environ={"SETUPBOT_ENGINE_KEEP_CONTAINERS": "yes", "SETUPBOT_ENGINE_CPUS": "1.5"})
    assert s.engine.keep_containers is True and s.engine.cpus == 1.5
    with pytest.raises(ConfigError) as err:
        load_settings(None, environ={"SETUPBOT_ENGINE_PIDS_LIMIT": "many"})
    assert "pids_limit" in err.value.what


def test_unknown_key_of_a_known_section_in_the_environment_is_rejected():
    with pytest.raises(ConfigError) as err:
        load_settings(None, environ={"SETUPBOT_ENGINE_KIDN": "docker"})
    assert "SETUPBOT_ENGINE_KIDN" in err.value.what and "Did you mean 'kind'?" in err.value.what


def test_variables_of_no_section_are_ignored():
    # SETUPBOT_VERSION (a CI's own variable) or a section typo is not read, and not an abort
    s = load_settings(None, environ={"SETUPBOT_VERSION": "1.2", "SETUPBOT_ENGNE_KIND": "lxc"})
    assert s.engine.kind == "docker"


def test_engine_kind_is_checked():
    with pytest.raises(ConfigError):
        load_settings(None, environ={"SETUPBOT_ENGINE_KIND": "lxc"})
    assert load_settings(None, environ={"SETUPBOT_ENGINE_KIND": "podman"}).engine.kind == "podman"
