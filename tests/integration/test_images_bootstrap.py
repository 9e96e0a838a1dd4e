"""`setupbot images bootstrap`: stand-ins exist, behave like the official images, are reused
while their recipe hash matches and rebuilt when it changes."""

from __future__ import annotations

import subprocess

import pytest

from bot.config import load_settings
from bot.engine import Engine
from bot.engine.images import available_pythons, bootstrap, build_standin
from bot.engine.recipes import ImageRecipe

# serial: they build and retag the stand-ins every other test starts from
pytestmark = [pytest.mark.slow, pytest.mark.serial]


@pytest.fixture
def engine(docker_available):
    e = Engine.from_settings(load_settings(None))
    yield e
    e.clean(e.run_id)


@pytest.mark.timeout(2000)  # the bootstrap's own bound is 1800 s
def test_bootstrap_provides_the_python_stand_ins(engine):
    r = subprocess.run(
        ["setupbot", "images", "bootstrap", "--python", "3.11", "--python", "3.13", "--services", ""],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert {"3.11", "3.13"} <= set(available_pythons(engine))
    listing = subprocess.run(["setupbot", "images", "list"], capture_output=True, text=True, check=True).stdout
    assert "3.11" in listing and "3.13" in listing
    for version in ("3.11", "3.13"):
        tag = f"python:{version}-slim"
        labels = engine.image_labels(tag)
        assert labels["setupbot.standin"] == "1" and labels["setupbot.recipe"]
        assert "setupbot.run" not in labels  # `setupbot clean` keeps stand-ins
        script = (
            'set -e; test "$(command -v python)" = /usr/local/bin/python; '
            "command -v pip; command -v pip3; command -v python3; "
            '! command -v gcc; test "$LANG" = C.UTF-8; '
            f'case "$PYTHON_VERSION" in {version}.*) ;; *) exit 9;; esac; '
            "python -m venv /tmp/v; /tmp/v/bin/python -c 'import sys; print(sys.prefix)'; "
            'test -z "$(ls /var/lib/apt/lists | grep -v -e lock -e partial || true)"; '
            "dpkg -s ca-certificates >/dev/null; "
            # as the official images' minimizing config: dpkg does not sync each file, apt
            # fetches no translations and drops its .deb files, no service starts on install
            "grep -qx force-unsafe-io /etc/dpkg/dpkg.cfg.d/docker-apt-speedup; "
            "grep -q 'Acquire::Languages \"none\"' /etc/apt/apt.conf.d/docker-no-languages; "
            "grep -q 'DPkg::Post-Invoke' /etc/apt/apt.conf.d/docker-clean; "
            'test -x /usr/sbin/policy-rc.d; /usr/sbin/policy-rc.d || test "$?" = 101; '
            f"test ! -e /usr/lib/python{version}/EXTERNALLY-MANAGED; "
            # as upstream: the C headers for native builds, no static libpython
            'test -f "$(python -c \'import sysconfig; print(sysconfig.get_paths()["include"])\')/Python.h"; '
            f"test -z \"$(find /usr/lib -name 'libpython{version}*.a')\"; "
            "pip install -q --no-deps six && python -c 'import six; print(\"SIX\", six.__version__)'"
        )
        res = engine.run_once(tag, ["sh", "-c", script], network="bridge", timeout=300)
        assert res.exit_code == 0 and "SIX" in res.output, res.output[-2000:]


def test_second_bootstrap_reuses_everything(engine):
    outcomes = bootstrap(engine, engine.settings, pythons=["3.13"], services=[])
    assert {o.action for o in outcomes} == {"reused"}, outcomes


def test_recipe_registry_reuses_on_matching_hash_and_rebuilds_on_change(engine):
    tag = f"setupbot-test/standin:{engine.run_id}"
    recipe = ImageRecipe(
        tag=tag,
        template="images/finish.Dockerfile.j2",
        base="debian:trixie-slim",
        kind="service",
        name="probe-only",
        variables={"ca": False, "ca_env": {}, "env": {"PROBE_VALUE": "one"}},
        probe=("sh", "-c", "echo $PROBE_VALUE"),
        version_env="SEEN_BY_PROBE",
    )
    try:
        first = build_standin(engine, engine.settings, recipe)
        assert first.action == "built", first.detail
        again = build_standin(engine, engine.settings, recipe)
        assert again.action == "reused"
        env = engine.run_once(tag, ["sh", "-c", "echo $SEEN_BY_PROBE"]).output.strip()
        assert env == "one"
        changed = ImageRecipe(**{**recipe.__dict__, "variables": {**recipe.variables, "env": {"PROBE_VALUE": "two"}}})
        rebuilt = build_standin(engine, engine.settings, changed)
        assert rebuilt.action == "built"
        assert engine.run_once(tag, ["sh", "-c", "echo $SEEN_BY_PROBE"]).output.strip() == "two"
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


def test_an_empty_store_loads_the_kept_archive_instead_of_building(engine, tmp_path):
    """images.archives: a built stand-in is kept under its recipe hash; once the engine has lost
    it, the next bootstrap loads the archive (same image, same recipe label) and builds
    nothing; a changed recipe builds again and replaces the archive."""
    from bot.engine.images import image_archive

    settings = load_settings(None, overrides={"images": {"cache_dir": str(tmp_path), "archives": True}})
    tag = f"setupbot-test/archived:{engine.run_id}"
    recipe = ImageRecipe(
        tag=tag,
        template="images/finish.Dockerfile.j2",
        base="debian:trixie-slim",
        kind="service",
        name="archived",
        aliases=(f"{tag}-alias",),
        variables={"ca": False, "ca_env": {}, "env": {"PROBE_VALUE": "one"}},
        probe=("sh", "-c", "echo $PROBE_VALUE"),
        version_env="SEEN_BY_PROBE",
    )
    try:
        first = build_standin(engine, settings, recipe)
        assert first.action == "built", first.detail
        built_id = engine.image_id(tag)
        digest = engine.image_labels(tag)["setupbot.recipe"]
        archive = image_archive(settings, tag, digest)
        assert archive.is_file() and archive.stat().st_size > 0
        assert sorted(p.name for p in archive.parent.iterdir()) == [archive.name]

        subprocess.run(["docker", "rmi", "-f", tag, f"{tag}-alias"], capture_output=True, check=True)
        assert engine.image_id(tag) is None
        loaded = build_standin(engine, settings, recipe)
        assert loaded.action == "reused" and loaded.detail == f"loaded from {archive}", loaded
        assert engine.image_id(tag) == built_id and engine.image_id(f"{tag}-alias") == built_id
        assert engine.run_once(tag, ["sh", "-c", "echo $SEEN_BY_PROBE"]).output.strip() == "one"

        # without images.archives nothing is loaded: the same loss means a build
        subprocess.run(["docker", "rmi", "-f", tag, f"{tag}-alias"], capture_output=True, check=True)
        plain = load_settings(None, overrides={"images": {"cache_dir": str(tmp_path)}})
        assert build_standin(engine, plain, recipe).action == "built"

        changed = ImageRecipe(**{**recipe.__dict__, "variables": {**recipe.variables, "env": {"PROBE_VALUE": "two"}}})
        rebuilt = build_standin(engine, settings, changed)
        assert rebuilt.action == "built"
        new_archive = image_archive(settings, tag, engine.image_labels(tag)["setupbot.recipe"])
        assert new_archive != archive
        assert sorted(p.name for p in archive.parent.iterdir()) == [new_archive.name]  # the old one is gone
    finally:
        subprocess.run(["docker", "rmi", "-f", tag, f"{tag}-alias"], capture_output=True)


def test_rootfs_tarball_from_debootstrap_is_slim(docker_available, tmp_path):
    import os
    import tarfile

    if os.geteuid() != 0 or not os.path.exists("/usr/sbin/debootstrap"):
        pytest.skip("debootstrap needs root and the debootstrap package (CI installs it)")
    from bot.engine.images import rootfs_key, rootfs_tarball

    settings = load_settings(None, overrides={"images": {"cache_dir": str(tmp_path)}})
    (tmp_path / "bookworm.tar").write_bytes(b"a tarball from before tarballs were named by their recipe")
    (tmp_path / "trixie.tar").write_bytes(b"another suite's")
    tarball = rootfs_tarball(settings, "bookworm")
    assert tarball == tmp_path / f"bookworm-{rootfs_key(settings, 'bookworm')}.tar"
    assert sorted(p.name for p in tmp_path.glob("*.tar")) == [tarball.name, "trixie.tar"]
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    assert "./usr/bin/apt-get" in names and "./etc/debian_version" in names
    assert not [n for n in names if n.endswith(".deb")]
    assert not [
        n for n in names if n.startswith("./usr/share/doc/") and not n.endswith("/copyright") and n.count("/") > 4
    ]
    assert not [n for n in names if n.startswith("./usr/share/man/") and n != "./usr/share/man"]
    # a second call reuses the cache
    mtime = tarball.stat().st_mtime
    assert rootfs_tarball(settings, "bookworm").stat().st_mtime == mtime


@pytest.mark.extended
@pytest.mark.timeout(1500)
def test_the_python_of_bullseye_is_a_stand_in_with_a_pip_new_enough_for_editable_installs(engine):
    """`--python 3.9` builds bullseye's interpreter with pip and setuptools newer than the
    suite's (downloaded by the host's pip). Built here under a tag of its own, so that the
    other tests' plans are not offered 3.9."""
    import dataclasses

    from bot.engine.images import build_standin, ensure_rootfs
    from bot.engine.recipes import debian_recipe, python_recipe

    settings = load_settings(None)
    assert ensure_rootfs(engine, settings, "bullseye").action != "failed"
    assert build_standin(engine, settings, debian_recipe("bullseye")).action != "failed"
    tag = f"setupbot-test/python:3.9-slim-{engine.run_id}"
    recipe = dataclasses.replace(python_recipe("3.9", "bullseye"), tag=tag, aliases=())
    outcome = build_standin(engine, settings, recipe)
    try:
        assert outcome.action == "built", outcome.detail
        # (run_once has no network: the versions stand for what they can do, PEP 660 editable
        # installs from pip 21.3 and setuptools 64 on)
        script = (
            "set -e; python --version; pip --version | grep -q 'pip 23.0.1 '; ! command -v gcc; "
            "python -c 'import setuptools; assert setuptools.__version__ == \"66.1.1\"'; "
            "python -m venv /tmp/v && /tmp/v/bin/python -m pip --version; "
            "! dpkg -s python3-pip 2>/dev/null | grep -q 'Status: install ok'; "
            # what a tool puts where sysconfig says (Poetry with virtualenvs.create=false, as
            # ZenGuard-AI's bench row did) imports: bullseye's sysconfig names a folder that
            # Debian's 3.9 leaves off sys.path
            'python -c \'import os, sysconfig; p = sysconfig.get_paths()["purelib"]; '
            'open(os.path.join(p, "placed_by_sysconfig.py"), "w").write("X = 1")\'; '
            "python -c 'import placed_by_sysconfig'"
        )
        r = engine.run_once(tag, ["sh", "-c", script], timeout=600)
        assert r.ok and "Python 3.9." in r.output, r.output[-3000:]
    finally:
        engine.untag(tag)
