"""S12: every host subprocess gets the allow-listed environment (bot.hostenv)."""

from __future__ import annotations

import ast
from pathlib import Path

from bot.hostenv import host_env

BOT = Path(__file__).resolve().parents[2] / "bot"


def test_only_allow_listed_variables_pass():
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "HTTPS_PROXY": "http://proxy:3128",
        "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
        "UV_INDEX_URL": "https://mirror/simple",
        "PIP_INDEX_URL": "https://mirror/simple",
        "DOCKER_HOST": "unix:///run/docker.sock",
        "GITHUB_TOKEN": "ghp_x",
        "GH_TOKEN": "ghp_x",
        "SETUPBOT_LLM_API_KEY": "sk-x",
        "OPENAI_API_KEY": "sk-x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "ACTIONS_RUNTIME_TOKEN": "x",
        "PYTHONPATH": "/evil",
        "LD_PRELOAD": "/evil.so",
        "PIP_FIND_LINKS": "https://evil/",
        "UV_FIND_LINKS": "https://evil/",
    }
    env = host_env(environ=environ)
    assert set(env) == {"PATH", "HOME", "HTTPS_PROXY", "SSL_CERT_FILE", "UV_INDEX_URL", "PIP_INDEX_URL", "DOCKER_HOST"}
    assert host_env({"DOCKER_BUILDKIT": "0"}, environ={})["DOCKER_BUILDKIT"] == "0"
    assert host_env(environ={})["PATH"]


def test_every_subprocess_call_in_bot_passes_an_explicit_environment():
    """A new subprocess call without env= would inherit the token: this catches it."""
    missing = []
    for path in sorted(BOT.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f"{getattr(f.value, 'id', '')}.{f.attr}" if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in (
                "subprocess.run",
                "subprocess.Popen",
                "subprocess.call",
                "subprocess.check_call",
                "subprocess.check_output",
                "os.system",
                "os.popen",
            ) or name.startswith(("os.exec", "os.spawn")):
                if not any(k.arg == "env" for k in node.keywords):
                    missing.append(f"{path.relative_to(BOT.parent)}:{node.lineno} {name}")
    assert not missing, missing
