"""The composite action end to end, run the way a GitHub runner runs it, on a fresh engine whose
images come only from a real local registry.

- A second Docker daemon (tests/doubles/engines.py, the `runner_world` fixture) plays the fresh
  runner: its store holds no image. A real registry (Debian's docker-registry) on 127.0.0.1 holds the Python stand-ins
  under their official names; ``images.registry`` points at it and ``images.source: registry``
  forbids any other source. The shared engine's own tags are never touched.
- action.yml's steps run as a runner runs a composite action: inputs (defaults, then the
  caller's ``with:``) are evaluated into each step's ``env:`` and exported as INPUT_*; every
  step gets its own GITHUB_OUTPUT file; GITHUB_STEP_SUMMARY, GITHUB_EVENT_PATH (a push payload),
  GITHUB_WORKSPACE and GITHUB_ACTION_PATH are set; GITHUB_API_URL points at the REST double over
  real HTTP. ``uses:`` steps are the runner's own (setup-python): the host's Python stands in.
- The install step runs as written, in a virtual environment made for the test, so the
  machine's own setupbot install is left alone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from doubles.github_api import GitHubDouble

# A second Docker daemon each: one worker runs them one after the other (and the action run and
# the Dev Containers client share the session's `runner_world` there).
pytestmark = pytest.mark.xdist_group("second-dockerd")
ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "tests" / "fixtures" / "events"
HELLO = ROOT / "examples" / "hello-app"
TOKEN = "ghs_runner_test_sentinel_token"


def expand(value: str, inputs: dict[str, str], steps: dict[str, dict[str, str]]) -> str:
    """The few expressions action.yml uses: inputs.X, github.token, steps.ID.outputs.X."""

    def one(m: re.Match[str]) -> str:
        expr = m.group(1).strip()
        if expr.startswith("inputs."):
            return inputs.get(expr[len("inputs.") :], "")
        if expr == "github.token":
            return TOKEN
        sm = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr)
        if sm:
            return steps.get(sm.group(1), {}).get(sm.group(2), "")
        raise AssertionError(f"expression the runner emulation does not know: {expr}")

    return re.sub(r"\$\{\{(.*?)\}\}", one, str(value))


def read_outputs(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT's two forms: name=value and name<<DELIMITER ... DELIMITER."""
    out: dict[str, str] = {}
    lines = path.read_text().splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            body = []
            i += 1
            while lines[i] != delim:
                body.append(lines[i])
                i += 1
            out[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
        i += 1
    return out


def run_composite(action_dir: Path, with_inputs: dict[str, str], env: dict[str, str], work: Path) -> dict[str, str]:
    action = yaml.safe_load((action_dir / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    inputs = {name: expand(spec.get("default", ""), {}, {}) for name, spec in action["inputs"].items()}
    inputs.update(with_inputs)
    steps: dict[str, dict[str, str]] = {}
    for n, step in enumerate(action["runs"]["steps"]):
        if "uses" in step:
            # The runner's own actions: setup-python is the host's Python here.
            assert step["uses"].startswith("actions/setup-python@"), step["uses"]
            continue
        output = work / f"output-{n}.txt"
        output.touch()
        step_env = {
            **env,
            "GITHUB_OUTPUT": str(output),
            **{f"INPUT_{k.upper().replace(' ', '_')}": v for k, v in inputs.items()},
            **{k: expand(v, inputs, steps) for k, v in (step.get("env") or {}).items()},
        }
        script = work / f"step-{n}.sh"
        script.write_text(expand(step["run"], inputs, steps))
        assert step.get("shell") == "bash"
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=env["GITHUB_WORKSPACE"],
            env=step_env,
            capture_output=True,
            text=True,
            timeout=2400,
        )
        (work / f"step-{n}.log").write_text(proc.stdout + proc.stderr)
        assert proc.returncode == 0, f"step {step.get('name')} failed:\n{(proc.stdout + proc.stderr)[-6000:]}"
        if step.get("id"):
            steps[step["id"]] = read_outputs(output)
    return {name: expand(spec["value"], inputs, steps) for name, spec in action["outputs"].items()}


@pytest.mark.timeout(2700)  # the action's own bound is 2400 s
@pytest.mark.slow
def test_the_action_on_a_fresh_runner_opens_one_pr_from_registry_images(runner_world, tmp_path):
    registry, digests, engine_env = runner_world
    engine_shell = {**os.environ, **engine_env}
    # The first user of the shared fresh engine finds its store empty (the Dev Containers test
    # comes later, alphabetically); no python image is there before the action pulls it.
    assert (
        subprocess.run(
            ["docker", "image", "inspect", "python:3.13-slim"], env=engine_shell, capture_output=True
        ).returncode
        != 0
    ), "the fresh engine must not hold the python images"

    files = {str(p.relative_to(HELLO)): p.read_text() for p in sorted(HELLO.rglob("*")) if p.is_file()}
    workspace = tmp_path / "workspace"
    repo = workspace / "repo"
    shutil.copytree(HELLO, repo)
    for argv in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "app"],
    ):
        subprocess.run(argv, cwd=repo, check=True, capture_output=True)
    home = tmp_path / "home"
    home.mkdir()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    summary = tmp_path / "summary.md"
    summary.touch()
    event = json.loads((EVENTS / "push.json").read_text())

    with GitHubDouble() as double:
        double.add_repo("octo/app", files)
        env = {
            "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "HOME": str(home),
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "RUNNER_OS": "Linux",
            "RUNNER_TEMP": str(tmp_path),
            "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_ACTION_PATH": str(ROOT),
            "GITHUB_EVENT_NAME": "push",
            "GITHUB_EVENT_PATH": str(EVENTS / "push.json"),
            "GITHUB_REPOSITORY": event["repository"]["full_name"],
            "GITHUB_REF": event["ref"],
            "GITHUB_SHA": event["after"],
            "GITHUB_API_URL": double.base_url,
            "GITHUB_STEP_SUMMARY": str(summary),
            # The runner's image settings (a repository variable or the caller's env): the local
            # registry, and nothing but a registry.
            "SETUPBOT_IMAGES_REGISTRY": registry,
            "SETUPBOT_IMAGES_SOURCE": "registry",
            **engine_env,
        }
        for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "PIP_FIND_LINKS", "LANG"):
            if name in os.environ:
                env[name] = os.environ[name]
        started = time.monotonic()
        outputs = run_composite(ROOT, {"repo-path": "repo", "token": TOKEN}, env, tmp_path)
        seconds = time.monotonic() - started
        print(f"the action ran in {seconds:.0f}s on the fresh engine")

        pulls = double.pulls("octo/app")
        assert len(pulls) == 1, pulls
        pr = pulls[0]
        head = double.repos["octo/app"].files_at(pr["head"])
        dockerfile = next(v for k, v in head.items() if k.endswith("Dockerfile")).decode()
        assert any(k.endswith("devcontainer.json") for k in head)
        assert any(k.endswith("setup-report.md") for k in head)
        assert double.schema_errors == []

    assert outputs["pr-number"] == str(pr["number"])
    assert outputs["verdict"] in ("Full", "Mostly"), outputs
    # The images came from the local registry: the FROM line is pinned by the pushed digest.
    from_line = next(line for line in dockerfile.splitlines() if line.startswith("FROM "))
    assert from_line == f"FROM python:3.13-slim@{digests['python:3.13-slim']} AS env", from_line
    repo_digests = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .RepoDigests}}", "python:3.13-slim"],
        env=engine_shell,
        capture_output=True,
        text=True,
    ).stdout
    assert f"{registry}/library/python@{digests['python:3.13-slim']}" in repo_digests
    text = summary.read_text()
    assert outputs["verdict"] in text and TOKEN not in text
    report = next(v for k, v in head.items() if k.endswith("setup-report.md")).decode()
    assert digests["python:3.13-slim"] in report
