"""Sibling repository settings: validation with clear messages, wiring, probes; and the
`setupbot verify` command's input checks."""

from __future__ import annotations

import pytest

from bot.cli import main
from bot.errors import ConfigError
from bot.verify.siblings import SiblingSpec, probe_argv, specs_from_settings


def test_sibling_from_setting_and_default_wiring():
    spec = SiblingSpec.from_setting(
        {
            "name": "API",
            "path": "../api",
            "port": 8000,
            "probe": "http:/health",
            "env": {"MODE": "test"},
            "command": "python serve.py",
        }
    )
    assert spec.name == "api" and spec.command == ("python", "serve.py") and spec.env == {"MODE": "test"}
    assert spec.wiring() == {"API_HOST": "api", "API_PORT": "8000", "API_URL": "http://api:8000"}
    custom = SiblingSpec.from_setting(
        {
            "name": "server",
            "url": "https://example.org/x.git",
            "ref": "v1.2",
            "port": 80,
            "wire": {"SERVER_URL": "http://server"},
        }
    )
    assert custom.wiring() == {"SERVER_URL": "http://server"} and custom.probe == "tcp"


@pytest.mark.parametrize(
    "entry,message",
    [
        ({"name": "x", "path": "a", "url": "b"}, "exactly one"),
        ({"name": "x"}, "exactly one"),
        ({"name": "Bad Name!", "path": "a"}, "not a usable name"),
        ({"name": "x", "path": "a", "ref": "--upload-pack=evil"}, "not a git ref"),
        ({"name": "x", "path": "a", "port": 1, "probe": "ftp"}, "probe must be"),
        ({"name": "x", "path": "a", "colour": "red"}, "unknown key"),
    ],
)
def test_bad_sibling_settings_are_clear(entry, message):
    with pytest.raises(ConfigError, match=message):
        SiblingSpec.from_setting(entry)


def test_bad_entries_become_warnings_and_the_rest_go_on():
    specs, warnings = specs_from_settings([{"name": "ok", "path": "."}, {"name": "x"}])
    assert [s.name for s in specs] == ["ok"] and warnings and "siblings[1]" in warnings[0]


def test_probes():
    http = probe_argv(SiblingSpec.from_setting({"name": "s", "path": ".", "port": 8000, "probe": "http:/health"}))
    assert http[0][0] == "python3" and http[0][-2:] == ["8000", "/health"]
    tcp = probe_argv(SiblingSpec.from_setting({"name": "s", "path": ".", "port": 9000}))
    assert tcp[0][-1] == "9000"
    assert probe_argv(SiblingSpec.from_setting({"name": "s", "path": "."})) == []


def test_verify_command_rejects_a_missing_path(tmp_path, capsys):
    code = main(["verify", str(tmp_path / "nope"), "--image", "x:1"])
    assert code == 3 and "is not a directory" in capsys.readouterr().err


def test_sibling_from_a_git_url_is_cloned_at_its_ref(tmp_path):
    import subprocess

    from bot.verify.siblings import SiblingManager

    origin = tmp_path / "origin"
    origin.mkdir()
    git = ["git", "-C", str(origin), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(origin)], check=True)
    (origin / "Dockerfile").write_text("FROM python:3.11-slim\n")
    subprocess.run([*git, "add", "Dockerfile"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    subprocess.run([*git, "tag", "v1"], check=True)
    (origin / "Dockerfile").write_text("FROM python:3.13-slim\n")
    subprocess.run([*git, "commit", "-q", "-am", "two"], check=True)

    manager = SiblingManager(engine=None, network="n", host_repo=tmp_path)
    spec = SiblingSpec.from_setting({"name": "srv", "url": f"file://{origin}", "ref": "v1", "port": 80})
    source = manager.source_dir(spec)
    assert manager.dockerfile_text(spec, source) == "FROM python:3.11-slim\n"
    bad = SiblingSpec.from_setting({"name": "srv", "url": f"file://{tmp_path}/missing", "port": 80})
    with pytest.raises(ConfigError, match="cannot clone"):
        manager.source_dir(bad)
    escape = SiblingSpec.from_setting({"name": "srv", "path": str(origin), "dockerfile": "../../etc/passwd"})
    with pytest.raises(ConfigError, match="no Dockerfile"):
        manager.dockerfile_text(escape, origin)
    manager.stop()
    assert not source.exists()
