"""A real Dev Containers client on setupbot's outputs: `devcontainer up --workspace-folder .`,
then `devcontainer exec ... <test command>` (PyPI's devcontainer-rs), on every fixture here
that writes a devcontainer -- a plain one (the README's hello-app), a compose one (a Redis
service from the repository's CI) and one whose project compiles its own C extension (built
again in the mounted checkout by the postCreateCommand; without it, collection fails on
"No module named 'fastsum._speed'"), and one whose Cython module a kept repair compiles in
place (compiled again by the postCreateCommand, as the contributor's user).

The outputs are the files setupbot writes for the fixture's plan. They name official images,
as on a runner that pulls them. Both run on the fresh engine of the `runner_world` fixture,
which pulls python:3.13-slim and redis:7 through a local registry mirror holding the stand-ins
under those names. Not the shared engine: there, other workers' runs clean their images while
this build may stand on one of their cached layers, and the classic builder then fails with
"unknown parent image ID" (a race the product's own builds redo once; the Dev Containers
client's builds are not ours to retry).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

# A second Docker daemon each: one worker runs them one after the other (and the action run and
# the Dev Containers client share the session's `runner_world` there).
pytestmark = pytest.mark.xdist_group("second-dockerd")
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = {
    "hello-app": ROOT / "examples" / "hello-app",
    "devcontainer-redis": ROOT / "tests" / "fixtures" / "repos" / "devcontainer-redis",
    # compiles its own C extension: the devcontainer builds it again in the mounted checkout
    "devcontainer-cext": ROOT / "tests" / "fixtures" / "repos" / "devcontainer-cext",
    # a Cython module only a repair compiles in place: the devcontainer compiles it again
    "loop-cython-in-place": ROOT / "tests" / "fixtures" / "repos" / "loop-cython-in-place",
}
# what the loop keeps for a fixture (its rule's candidate for the failure the plan alone meets)
REPAIRED = {"loop-cython-in-place": "E   ModuleNotFoundError: No module named 'sampling.fast.pick'"}


def unavailable(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def engine_env(request):
    """The fresh engine's environment; its store holds nothing the parallel workers touch."""
    if shutil.which("devcontainer") is None:
        unavailable("the devcontainer CLI is missing (pip install devcontainer-rs; it is in the dev extras)")
    return {**os.environ, **request.getfixturevalue("runner_world")[2]}


def write_outputs_for(fixture: Path, workdir: Path) -> Path:
    from bot.compile.plan import make_plan
    from bot.config import load_settings
    from bot.outputs import outputs_from_pipeline, write_outputs

    repo = workdir / f"{fixture.name}-{os.getpid()}"
    shutil.copytree(fixture, repo)
    settings = load_settings(repo)
    plan = make_plan(repo, settings, available_pythons=["3.11", "3.13"])
    if fixture.name in REPAIRED:
        from bot.graph.apply import apply_atom
        from bot.loop.diagnose import diagnose
        from bot.loop.repair import rule_candidates

        sig = diagnose(REPAIRED[fixture.name])[0]
        [kept] = rule_candidates(sig, repo=repo, python=plan.python, available_pythons=["3.11", "3.13"])
        for atom in kept.atoms:
            apply_atom(plan.graph, atom, REPAIRED[fixture.name])
    write_outputs(repo, outputs_from_pipeline(repo, plan=plan, output_dir=settings.output.dir, repository=fixture.name))
    if os.geteuid() == 0:
        # a developer's checkout is their own, and the client gives the container's user their
        # uid (updateRemoteUserUID); as root it keeps uid 1000, so the copy is given to that uid
        for path in [repo, *repo.rglob("*")]:
            os.chown(path, 1000, 1000, follow_symlinks=False)
    return repo


@pytest.mark.timeout(1800)  # `devcontainer up`'s own bound is 1500 s
@pytest.mark.parametrize("name", sorted(FIXTURES))
@pytest.mark.slow
def test_devcontainer_up_and_exec_runs_the_tests(name, engine_env, tmp_path):
    repo = write_outputs_for(FIXTURES[name], tmp_path)
    config_text = (repo / ".devcontainer" / "devcontainer.json").read_text()
    config = json.loads("\n".join(line for line in config_text.splitlines() if not line.lstrip().startswith("//")))
    compose = "dockerComposeFile" in config
    assert compose == (name == "devcontainer-redis")
    command = config["customizations"]["setupbot"]["testCommand"]
    env = engine_env
    try:

        def devcontainer(*argv: str, timeout: int) -> subprocess.CompletedProcess:
            return subprocess.run(
                ["devcontainer", *argv],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )

        up = devcontainer("up", "--workspace-folder", str(repo), timeout=1500)
        assert up.returncode == 0, (up.stdout + up.stderr)[-5000:]
        result = json.loads(up.stdout.strip().splitlines()[-1])
        assert result["outcome"] == "success", result
        run = devcontainer("exec", "--workspace-folder", str(repo), *command, "-q", timeout=600)
        assert run.returncode == 0, (run.stdout + run.stderr)[-5000:]
        assert " passed" in run.stdout and "failed" not in run.stdout
        # the development stage: the editor's user (remoteUser) and git, which no test needs
        who = devcontainer("exec", "--workspace-folder", str(repo), "sh", "-c", "id -un; git --version", timeout=120)
        assert who.returncode == 0, (who.stdout + who.stderr)[-2000:]
        assert who.stdout.split()[0] == "dev" and "git version" in who.stdout, who.stdout
    finally:
        # Everything this dev container started: its containers (the compose project's too).
        ids = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=devcontainer.local_folder={repo}"],
            env=env,
            capture_output=True,
            text=True,
        ).stdout.split()
        if compose:
            ids += subprocess.run(
                [
                    "docker",
                    "ps",
                    "-aq",
                    "--filter",
                    f"label=com.docker.compose.project.working_dir={repo / '.devcontainer'}",
                ],
                env=env,
                capture_output=True,
                text=True,
            ).stdout.split()
        images = set()
        for container in set(ids):
            image = subprocess.run(
                ["docker", "inspect", "--format", "{{.Config.Image}}", container],
                env=env,
                capture_output=True,
                text=True,
            ).stdout.strip()
            if image.startswith(("devcontainer-", "vsc-")) and repo.name in image:
                images.add(image)  # the image the client built for this copy, and only that
        if ids:
            subprocess.run(["docker", "rm", "-f", "-v", *set(ids)], env=env, capture_output=True)
        if images:
            subprocess.run(["docker", "rmi", *images], env=env, capture_output=True)
