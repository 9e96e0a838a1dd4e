"""The host's package index settings reach resolution, runner commands and builds, and never a
generated file."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from bot.config import load_settings
from bot.engine import dockerfile
from bot.indexes import IndexConfig, host_index_config

SECRET_INDEX = "https://build:s3cret@pypi.internal.example/simple"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "repos"


def test_pip_variables_and_uv_variables(tmp_path):
    env = {
        "HOME": str(tmp_path),
        "PIP_INDEX_URL": "https://a.example/simple",
        "PIP_EXTRA_INDEX_URL": "https://b.example/simple https://c.example/simple",
    }
    cfg = host_index_config(env)
    assert cfg == IndexConfig("https://a.example/simple", ("https://b.example/simple", "https://c.example/simple"))
    assert cfg.uv_args() == [
        "--index-url",
        "https://a.example/simple",
        "--extra-index-url",
        "https://b.example/simple",
        "--extra-index-url",
        "https://c.example/simple",
    ]
    assert cfg.env()["UV_INDEX_URL"] == cfg.env()["PIP_INDEX_URL"] == "https://a.example/simple"
    uv = host_index_config(
        {**env, "UV_INDEX_URL": "https://uv.example/simple", "UV_INDEX": "x=https://d.example/simple"}
    )
    assert uv.index_url == "https://uv.example/simple" and uv.extra_index_urls == ("https://d.example/simple",)


def test_pip_conf_is_read_and_variables_win(tmp_path):
    conf = tmp_path / "pip.conf"
    conf.write_text(
        "[global]\nindex-url = https://conf.example/simple\nextra-index-url =\n  https://x.example/simple\n"
    )
    env = {"HOME": str(tmp_path), "PIP_CONFIG_FILE": str(conf)}
    assert host_index_config(env) == IndexConfig("https://conf.example/simple", ("https://x.example/simple",))
    assert (
        host_index_config({**env, "PIP_INDEX_URL": "https://env.example/simple"}).index_url
        == "https://env.example/simple"
    )
    assert not host_index_config({"HOME": str(tmp_path), "PIP_CONFIG_FILE": os.devnull})


def test_declare_args_after_every_from_only_in_the_copy():
    text = "FROM python:3.13-slim AS a\nRUN pip install x\nFROM a\nRUN pip install y\n"
    out = dockerfile.declare_args(text, ["PIP_INDEX_URL"])
    assert out.splitlines() == [
        "FROM python:3.13-slim AS a",
        "ARG PIP_INDEX_URL",
        "RUN pip install x",
        "FROM a",
        "ARG PIP_INDEX_URL",
        "RUN pip install y",
    ]


@pytest.fixture
def fake_docker(tmp_path, monkeypatch):
    """An engine binary that records its argv and the Dockerfile a build gets."""
    record = tmp_path / "calls.jsonl"
    script = tmp_path / "bin" / "fake-engine"
    script.parent.mkdir()
    script.write_text(f"""#!{os.sys.executable}
import json, sys
argv = sys.argv[1:]
entry = {{"argv": argv}}
if argv and argv[0] == "build":
    entry["dockerfile"] = open(argv[argv.index("-f") + 1]).read()
with open({str(record)!r}, "a") as f:
    f.write(json.dumps(entry) + "\\n")
if argv[:2] == ["image", "inspect"]:
    print("sha256:1"); sys.exit(0)
sys.exit(0)
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    from bot.engine import core

    monkeypatch.setattr(core.shutil, "which", lambda name: str(script))
    return record


def test_build_gets_the_index_as_build_args_and_the_generated_file_stays_clean(tmp_path, fake_docker):
    from bot.compile.plan import make_plan
    from bot.engine.core import Engine

    settings = load_settings(None, environ={}, overrides={"ca": {"file": ""}})
    engine = Engine(settings, run_id="t1", environ={"HOME": str(tmp_path), "PIP_INDEX_URL": SECRET_INDEX})
    plan = make_plan(FIXTURES / "plan-setup-py-only", settings, available_pythons=["3.13"], resolve=False)
    generated = plan.dockerfile.text
    assert SECRET_INDEX not in generated and "ARG PIP_INDEX_URL" not in generated
    result = engine.build(tmp_path, generated, "setupbot-test:1")
    assert result.ok
    builds = [json.loads(line) for line in fake_docker.read_text().splitlines()]
    build = next(b for b in builds if b["argv"][0] == "build")
    assert f"PIP_INDEX_URL={SECRET_INDEX}" in build["argv"]
    assert "ARG PIP_INDEX_URL" in build["dockerfile"] and SECRET_INDEX not in build["dockerfile"]
    assert engine.index_env["UV_INDEX_URL"] == SECRET_INDEX


def test_resolution_passes_the_host_index_to_uv(monkeypatch, tmp_path):
    import subprocess

    from bot.graph import resolve

    seen: list[list[str]] = []

    def fake_run(argv, **kwargs):
        seen.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, "six==1.16.0\n", "")

    monkeypatch.setattr(resolve.shutil, "which", lambda name: "/usr/bin/uv")
    monkeypatch.setattr(resolve.subprocess, "run", fake_run)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple")
    res = resolve.uv_compile(["six"], "3.13")
    assert res.ok and res.pins == {"six": "1.16.0"}
    assert seen[0][seen[0].index("--index-url") + 1] == "https://mirror.example/simple"
