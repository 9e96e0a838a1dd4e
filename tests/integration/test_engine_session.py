"""Runner sessions against the real engine: snapshots, rollback, timeouts, limits, hardening,
CA injection, cleanup."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from bot.config import load_settings
from bot.engine import Engine
from bot.engine.hardening import PACKAGE_MANAGER_CAPS

IMAGE = "python:3.13-slim"


@pytest.fixture
def engine(docker_available):
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode != 0:
        pytest.fail(f"{IMAGE} is missing: run `setupbot images bootstrap` first (CI does)")
    e = Engine.from_settings(load_settings(None, overrides={"engine": {"pids_limit": 256, "memory": "1g"}}))
    yield e
    e.clean(e.run_id)


def _inspect(name: str) -> dict:
    out = subprocess.run(["docker", "inspect", name], capture_output=True, text=True, check=True).stdout
    return json.loads(out)[0]


def test_snapshot_write_rollback_restores_the_earlier_state(engine):
    with engine.session(IMAGE, env={"MARKER": "kept"}, workdir="/workspace") as s:
        s.exec(["sh", "-c", "echo before > /workspace/state"])
        s.snapshot("before the try")
        s.exec(["sh", "-c", "echo after > /workspace/state && touch /workspace/new-file"])
        assert s.exec(["cat", "/workspace/state"]).output.strip() == "after"
        s.rollback()
        assert s.exec(["cat", "/workspace/state"]).output.strip() == "before"
        assert s.exec(["test", "-e", "/workspace/new-file"]).exit_code == 1
        # same environment and working directory in the restored container
        res = s.exec(["sh", "-c", 'echo "$MARKER $PWD"'])
        assert res.output.strip() == "kept /workspace"
        assert s.depth == 1


def test_rollback_of_two_frames(engine):
    with engine.session(IMAGE) as s:
        s.snapshot("A")
        s.exec(["touch", "/workspace/one"])
        s.snapshot("B")
        committed = s.snapshots[-1][0]
        s.exec(["touch", "/workspace/two"])
        assert s.depth == 2
        s.rollback(2)
        assert s.depth == 1
        listing = s.exec(["ls", "-A", "/workspace"]).output.split()
        assert listing == []
        # B was a commit, and went with its frame
        assert not engine.image_exists(committed)
        assert [note for _, note in s.snapshots] == ["A"]
        s.exec(["touch", "/workspace/three"])
        s.snapshot("C")
        tags = [tag for tag, _ in s.snapshots]
    # the images the session committed are gone with it; the image it was made from stays
    assert tags[0] == IMAGE and engine.image_exists(IMAGE)
    assert not any(engine.image_exists(t) for t in tags[1:])


def test_a_container_that_only_ran_its_tests_is_not_committed_and_rolls_back_to_its_image(engine):
    """The loop snapshots before every trial; a commit takes seconds for every hundred megabytes
    the container wrote. A container that ran nothing but reads and its tests since it was made
    from its image is that image again: the frame names the image, and a rollback makes a
    container from it, with the CA the session put in, as a fresh container on it would be."""
    with engine.session(IMAGE, env={"MARKER": "kept"}) as s:
        ca_files = s.exec(["sh", "-c", "ls /usr/local/share/ca-certificates 2>/dev/null; echo"], changes=False).output
        s.exec(["sh", "-c", "echo report > /tmp/junit.xml"], changes=False)  # a test run's report
        image_id = s.snapshot("before the first trial")
        assert image_id == engine.image_id(IMAGE) and s.snapshots == [(IMAGE, "before the first trial")]
        s.exec(["sh", "-c", "echo installed > /workspace/trial"])  # a trial changes the container
        s.rollback()
        # reads (changes=False) leave the restored container as its image made it
        assert s.exec(["test", "-e", "/workspace/trial"], changes=False).exit_code == 1
        assert s.exec(["test", "-e", "/tmp/junit.xml"], changes=False).exit_code == 1
        assert s.exec(["sh", "-c", 'echo "$MARKER"'], changes=False).output.strip() == "kept"
        ca_again = s.exec(["sh", "-c", "ls /usr/local/share/ca-certificates 2>/dev/null; echo"], changes=False)
        assert ca_again.output == ca_files
        # a container rolled back to its image is pristine again: the next frame is no commit
        s.snapshot("before the second trial")
        assert [t for t, _ in s.snapshots] == [IMAGE, IMAGE]
        # after a change, the snapshot is a commit that holds it
        s.exec(["sh", "-c", "echo kept > /workspace/kept"])
        s.snapshot("after a kept trial")
        committed = s.snapshots[-1][0]
        assert committed != IMAGE
        s.exec(["sh", "-c", "echo tried > /workspace/tried"])
        s.rollback()
        assert s.exec(["cat", "/workspace/kept"]).output.strip() == "kept"
        assert s.exec(["test", "-e", "/workspace/tried"]).exit_code == 1
    # the commit went with the session; the image it was made from stays
    assert not engine.image_exists(committed) and engine.image_exists(IMAGE)


@pytest.mark.serial
def test_command_over_its_timeout_is_killed_and_reported(engine):
    with engine.session(IMAGE) as s:
        started = time.monotonic()
        res = s.exec(["sh", "-c", "sleep 1000 & sleep 1000"], timeout=3)
        assert res.timed_out and res.exit_code != 0
        assert time.monotonic() - started < 60
        assert "timeout" in res.output
        # nothing of the command survives in the container; the session still works
        top = subprocess.run(["docker", "top", s.name], capture_output=True, text=True).stdout
        assert "sleep 1000" not in top
        assert s.exec(["echo", "still here"]).output.strip() == "still here"


@pytest.mark.serial
def test_fork_bomb_stops_at_the_pids_limit(engine):
    with engine.session(IMAGE) as s:
        container_id = _inspect(s.name)["Id"]
        bomb = "bomb() { bomb | bomb & }; bomb; sleep 20"
        res = s.exec(["bash", "-c", bomb], timeout=12)
        pids_max = 256
        # the limit is what the kernel enforced: the cgroup never went above it
        assert _inspect(s.name)["HostConfig"]["PidsLimit"] == pids_max
        s.kill_processes()
        assert s.exec(["echo", "alive"]).output.strip() == "alive"
        assert res.exit_code != 0 or res.timed_out
        assert container_id == _inspect(s.name)["Id"]
    # this process and the engine are fine
    assert subprocess.run(["docker", "info"], capture_output=True).returncode == 0


@pytest.mark.serial
def test_pids_limit_is_enforced_by_the_kernel(engine):
    with engine.session(IMAGE) as s:
        # start far more processes than allowed: forks fail, nothing hangs
        res = s.exec(
            ["bash", "-c", "for i in $(seq 400); do sleep 30 & done 2>&1 | tail -n 1; ls /proc | grep -c '^[0-9]'"],
            timeout=60,
        )
        count = int(res.output.strip().splitlines()[-1])
        assert count <= 256
        assert "fork" in res.output.lower() or "resource temporarily unavailable" in res.output.lower()
        s.kill_processes()


def test_environment_is_allow_listed(engine, monkeypatch):
    monkeypatch.setenv("SETUPBOT_SENTINEL_SECRET", "s3ntinel-value")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_sentinel")
    with engine.session(IMAGE, env={"NAMED": "yes"}) as s:
        out = s.exec(["env"], env={"PER_COMMAND": "1"}).output
        assert "NAMED=yes" in out and "PER_COMMAND=1" in out
        assert "s3ntinel" not in out and "ghp_sentinel" not in out
        assert "PER_COMMAND" not in s.exec(["env"]).output


def test_runner_containers_are_hardened(engine):
    with engine.session(IMAGE) as s:
        info = _inspect(s.name)
        host = info["HostConfig"]
        assert host["Privileged"] is False
        assert host["CapDrop"] == ["ALL"] or "ALL" in host["CapDrop"]
        assert set(c.removeprefix("CAP_") for c in host["CapAdd"]) == set(PACKAGE_MANAGER_CAPS)
        assert "no-new-privileges" in host["SecurityOpt"]
        assert host["PidsLimit"] == 256
        assert host["Memory"] == 1024**3
        assert host["NanoCpus"] == int(engine.settings.engine.cpus * 1e9)
        assert not host.get("Binds") and not [m for m in info["Mounts"] if m.get("Type") == "bind"]
        assert not any("docker.sock" in str(m) for m in info["Mounts"])
        assert info["Config"]["Labels"]["setupbot.run"] == engine.run_id
        assert info["Name"].lstrip("/").startswith(f"setupbot-{engine.run_id}-")
        # inside: effective capabilities are the small set, and no privilege can be regained
        status = s.exec(["cat", "/proc/self/status"]).output
        assert "NoNewPrivs:\t1" in status


def test_apt_and_pip_work_inside_a_runner_through_the_ca_setting(engine):
    assert engine.ca is not None, "this machine's proxy CA is configured through ca.file=auto"
    # debian:trixie-slim carries the CA from bootstrap; a bare rootfs does not and gets it injected.
    # The venv's own pip (ensurepip, from python3-venv) is what fetches over TLS: python3-pip,
    # a second pip, would only add packages to unpack.
    for image in ("setupbot/rootfs:trixie", IMAGE):
        with engine.session(image) as s:
            res = s.exec(
                [
                    "sh",
                    "-c",
                    "apt-get update -qq && apt-get install -y -qq --no-install-recommends "
                    "python3-venv libyaml-0-2 >/dev/null && echo APT-OK",
                ],
                timeout=600,
            )
            assert "APT-OK" in res.output, res.output[-2000:]
            res = s.exec(
                [
                    "sh",
                    "-c",
                    "python3 -m venv /tmp/v && /tmp/v/bin/pip install -q six && "
                    "/tmp/v/bin/python -c 'import six; print(\"PIP-OK\", six.__version__)'",
                ],
                timeout=600,
            )
            assert "PIP-OK" in res.output, res.output[-2000:]


def test_copy_in_a_directory(engine, tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("VALUE = 42\n")
    with engine.session(IMAGE) as s:
        s.copy_in(tmp_path, "/workspace")
        assert s.exec(["python", "-c", "import pkg.mod; print(pkg.mod.VALUE)"]).output.strip() == "42"


def test_keep_containers_debug_switch(docker_available):
    e = Engine.from_settings(load_settings(None, overrides={"engine": {"keep_containers": True}}))
    try:
        with e.session(IMAGE) as s:
            name = s.name
        assert subprocess.run(["docker", "inspect", name], capture_output=True).returncode == 0
    finally:
        e.clean(e.run_id)
    assert subprocess.run(["docker", "inspect", name], capture_output=True).returncode != 0


@pytest.mark.serial
def test_allocation_over_the_memory_limit_fails(engine):
    with engine.session(IMAGE) as s:
        res = s.exec(
            [
                "python",
                "-c",
                "b = bytearray(1536 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); print('ALLOCATED')",
            ],
            timeout=120,
        )
        assert "ALLOCATED" not in res.output
        assert res.exit_code != 0
        assert s.exec(["echo", "ok"]).output.strip() == "ok"


def test_service_containers_are_hardened_and_labelled(engine):
    with engine.network() as net:
        handle = engine.start_container(IMAGE, "svc", network=net, aliases=["svc"], command=["sleep", "60"])
        info = _inspect(handle.name)
        host = info["HostConfig"]
        assert host["Privileged"] is False and "ALL" in host["CapDrop"]
        assert "no-new-privileges" in host["SecurityOpt"] and host["PidsLimit"] == 256
        assert info["Config"]["Labels"]["setupbot.run"] == engine.run_id
        assert handle.exec(["echo", "in-service"]).output.strip() == "in-service"
        handle.remove()
        assert not handle.running()


def test_a_rollback_to_an_image_without_the_ca_puts_the_ca_in_again(engine, tmp_path):
    """The session puts the proxy CA into a container whose image does not carry it; a commit
    keeps it, the image the container was made from does not: a rollback to that image (a
    container that had only run its tests) puts it in again."""
    from bot.engine.ca import CA_LABEL, CONTAINER_EXTRA

    if engine.ca is None:
        pytest.fail("this machine's engine has no CA to inject (engine.ca)")
    tag = f"setupbot-test/no-ca:{engine.run_id}"
    text = f"FROM {IMAGE}\nRUN rm -f {CONTAINER_EXTRA}\nLABEL {CA_LABEL}=another\n"
    built = engine.build_raw(tmp_path, text, tag, engine.labels)
    assert built.ok, built.log
    assert not engine.carries_ca(tag)
    with engine.session(tag) as s:
        assert s.exec(["test", "-s", CONTAINER_EXTRA], changes=False).exit_code == 0
        s.snapshot("pristine")
        assert s.snapshots[0][0] == tag
        s.exec(["rm", "-f", CONTAINER_EXTRA])
        s.rollback()
        assert s.exec(["test", "-s", CONTAINER_EXTRA], changes=False).exit_code == 0
