"""The engine's pure parts: Dockerfile FROM handling, CA resolution, recipes, hardening."""

from __future__ import annotations

import re

import pytest

from bot.config import load_settings
from bot.engine import dockerfile, recipes
from bot.engine.ca import CA_ENV, resolve_ca_bundle
from bot.engine.core import new_run_id
from bot.engine.hardening import Limits, hardened_create_kwargs
from bot.engine.images import _template_extra, select_recipes
from bot.errors import ConfigError
from bot.templating import render_template

PEM = b"-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUSETUPBOTTEST\n-----END CERTIFICATE-----\n"


# ------------------------------------------------------------------ Dockerfile FROM lines
MULTI = """\
ARG PY=3.13
FROM python:${PY}-slim AS build
RUN pip wheel .
FROM --platform=linux/amd64 debian:bookworm-slim
COPY --from=build /wheels /wheels
from build as again
FROM scratch
"""


def test_base_images_skip_stages_and_scratch_and_substitute_global_args():
    assert dockerfile.base_images(MULTI) == ["python:3.13-slim", "debian:bookworm-slim"]


def test_replace_bases_touches_only_the_mapped_from_lines():
    out = dockerfile.replace_bases(
        MULTI, {"python:3.13-slim": "setupbot/ca-base:abc", "debian:bookworm-slim": "setupbot/ca-base:def"}
    )
    lines = out.splitlines()
    assert lines[1] == "FROM setupbot/ca-base:abc AS build"
    assert lines[3] == "FROM --platform=linux/amd64 setupbot/ca-base:def"
    assert lines[5] == "from build as again"
    assert lines[6] == "FROM scratch"
    assert [ln for i, ln in enumerate(lines) if i not in (1, 3)] == [
        ln for i, ln in enumerate(MULTI.splitlines()) if i not in (1, 3)
    ]


def test_replace_bases_without_mapping_is_identity():
    assert dockerfile.replace_bases(MULTI, {}) == MULTI


# ------------------------------------------------------------------ CA
def test_ca_auto_uses_ssl_cert_file_even_at_the_distribution_path(tmp_path):
    bundle = tmp_path / "ca-certificates.crt"
    bundle.write_bytes(PEM)
    ca = resolve_ca_bundle("auto", {"SSL_CERT_FILE": str(bundle)})
    assert ca is not None and ca.pem == PEM and len(ca.fingerprint) == 16


def test_ca_auto_falls_back_to_requests_bundle_and_to_nothing(tmp_path):
    bundle = tmp_path / "b.pem"
    bundle.write_bytes(PEM)
    assert resolve_ca_bundle("auto", {"REQUESTS_CA_BUNDLE": str(bundle)}).path == bundle
    assert resolve_ca_bundle("auto", {}) is None


def test_ca_empty_disables():
    assert resolve_ca_bundle("", {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt"}) is None


def test_ca_file_errors_say_what_to_do(tmp_path):
    with pytest.raises(ConfigError) as err:
        resolve_ca_bundle(str(tmp_path / "missing.pem"), {})
    assert "ca.file" in err.value.what and err.value.fix
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    with pytest.raises(ConfigError):
        resolve_ca_bundle(str(junk), {})


def test_finish_template_carries_the_ca_only_when_asked():
    with_ca = render_template(
        "images/finish.Dockerfile.j2", base="x:1", ca=True, ca_env=CA_ENV, env={"PYTHON_VERSION": "3.13.5"}
    )
    assert "COPY setupbot-extra-ca.crt" in with_ca and "ENV PYTHON_VERSION=3.13.5" in with_ca
    assert "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt" in with_ca
    without = render_template("images/finish.Dockerfile.j2", base="x:1", ca=False, ca_env=CA_ENV, env={})
    assert "crt" not in without and without.strip() == "FROM x:1"


# ------------------------------------------------------------------ recipes
def test_python_stand_in_template_behaves_like_the_official_image():
    settings = load_settings(None, environ={})
    r = recipes.python_recipe("3.13", "trixie")
    text = render_template(r.template, **r.template_variables(_template_extra(settings)))
    assert text.startswith("FROM debian:trixie-slim")
    assert "rm -f /usr/lib/python3.13/EXTERNALLY-MANAGED" in text
    assert "LANG=C.UTF-8" in text and "rm -rf /var/lib/apt/lists/*" in text
    for tool in ("python", "python3"):
        assert "/usr/local/bin/$name" in text and tool in text
    assert "gcc" not in text and "build-essential" not in text


def test_debian_template_uses_the_configured_mirror_and_security_suite():
    settings = load_settings(None, environ={}, overrides={"images": {"mirror": "http://deb.debian.org/debian"}})
    r = recipes.debian_recipe("bookworm")
    text = render_template(r.template, **r.template_variables(_template_extra(settings)))
    assert "deb http://deb.debian.org/debian bookworm main" in text
    assert "deb http://deb.debian.org/debian-security bookworm-security main" in text


def test_an_empty_mirror_keeps_debootstraps_choice_and_names_no_host():
    settings = load_settings(None, environ={})
    assert settings.images.mirror == ""
    r = recipes.debian_recipe("trixie")
    text = render_template(r.template, **r.template_variables(_template_extra(settings)))
    assert "debian.org" not in text and "/etc/apt/sources.list" in text and "trixie-security" in text


def test_a_suite_newer_than_debootstrap_uses_the_testing_script(tmp_path, monkeypatch):
    from bot.engine import images

    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "sid").write_text("")
    (scripts / "trixie").write_text("")
    fake = tmp_path / "debootstrap"
    fake.write_text('DEF_MIRROR="http://mirror.invalid/debian"\n')
    monkeypatch.setattr(images, "DEBOOTSTRAP_SCRIPTS", str(scripts))
    monkeypatch.setattr(images, "DEBOOTSTRAP", str(fake))
    settings = load_settings(None, environ={})
    assert images._mirror_args(settings, "trixie") == []
    assert images._mirror_args(settings, "forky") == ["http://mirror.invalid/debian", str(scripts / "sid")]
    assert recipes.SUITE_PYTHON["forky"] == "3.14"


def test_recipe_hash_changes_with_base_ca_and_variables():
    r = recipes.python_recipe("3.11", "bookworm")
    h = r.recipe_hash("sha256:a", "ca1")
    assert h == r.recipe_hash("sha256:a", "ca1")
    assert h != r.recipe_hash("sha256:b", "ca1")
    assert h != r.recipe_hash("sha256:a", "ca2")
    assert h != r.recipe_hash("sha256:a", "ca1", {"mirror": "http://other/debian"})


def test_selection_pulls_in_bases_in_dependency_order():
    settings = load_settings(None, environ={})
    order = [r.tag for r in select_recipes(settings, pythons=["3.13"], services=[])]
    assert order.index("debian:trixie-slim") < order.index("python:3.13-slim")
    assert "python:3.11-slim" not in order
    all_tags = [r.tag for r in select_recipes(settings, services=[])]
    everything = select_recipes(settings)
    kinds = [r.kind for r in everything]
    assert kinds == sorted(kinds, key=["debian", "python", "service"].index)  # pythons before services
    assert {"python:3.11-slim", "python:3.13-slim", "debian:bookworm-slim", "debian:trixie-slim"} <= set(all_tags)


def test_a_python_of_a_suite_left_out_of_the_default_is_built_when_named():
    """bullseye is not among images.suites: the default bootstrap leaves it out, and
    `--python 3.9` builds its rootfs, Debian and Python (with newer pip and setuptools)."""
    settings = load_settings(None, environ={})
    default = [r.tag for r in select_recipes(settings, services=[])]
    assert "python:3.9-slim" not in default and "debian:bullseye-slim" not in default
    named = select_recipes(settings, pythons=["3.9"], services=[])
    tags = [r.tag for r in named]
    assert tags.index("debian:bullseye-slim") < tags.index("python:3.9-slim")
    recipe = next(r for r in named if r.tag == "python:3.9-slim")
    assert recipe.base == "debian:bullseye-slim" and recipe.wheels == recipes.WHEELS["bullseye"]
    text = render_template(recipe.template, **recipe.template_variables(_template_extra(settings)))
    assert "COPY wheels /tmp/setupbot-wheels" in text and "--find-links /tmp/setupbot-wheels" in text
    assert "--root-user-action=" not in text  # bullseye's own pip (20.3) does not know it
    # a suite whose pip is new enough installs from its own wheels, as before
    bookworm = recipes.python_recipe("3.11", "bookworm")
    text = render_template(bookworm.template, **bookworm.template_variables(_template_extra(settings)))
    assert "setupbot-wheels" not in text and "--root-user-action=ignore" in text and not bookworm.wheels


def test_selection_rejects_unknown_names_with_the_known_ones():
    settings = load_settings(None, environ={})
    with pytest.raises(ConfigError) as err:
        select_recipes(settings, pythons=["2.7"], services=[])
    assert "3.11" in err.value.fix and "3.13" in err.value.fix
    with pytest.raises(ConfigError):
        select_recipes(settings, pythons=[], services=["oracle"])


def test_service_recipes_in_mapping_form_become_image_recipes():
    r = recipes._service_recipe_from_mapping(
        "redis",
        {
            "kind": "redis",
            "context": "images/services/redis",
            "base": "debian:trixie-slim",
            "tags": ["redis:7", "redis:latest"],
        },
    )
    assert (r.tag, r.aliases, r.kind, r.name, r.version) == ("redis:7", ("redis:latest",), "service", "redis", "7")
    assert r.base == "debian:trixie-slim" and r.template == ""


# ------------------------------------------------------------------ hardening, names
def test_hardening_never_privileged_and_drops_everything_else():
    kw = hardened_create_kwargs(Limits(memory="1g", pids=128, cpus=1.0))
    assert kw["privileged"] is False and kw["cap_drop"] == ["ALL"]
    assert "no-new-privileges" in kw["security_options"]
    assert not {"SYS_ADMIN", "NET_ADMIN", "NET_RAW", "MKNOD", "SYS_PTRACE"} & set(kw["cap_add"])
    assert (kw["pids_limit"], kw["memory"], kw["memory_swap"], kw["cpus"]) == (128, "1g", "1g", 1.0)


def test_run_ids_are_unique_and_name_safe():
    ids = {new_run_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(re.fullmatch(r"\d{14}-[0-9a-f]{6}", i) for i in ids)


def test_run_owners_are_recognised_alive_or_gone():
    import subprocess

    from bot.engine.core import owner_alive, owner_token

    assert owner_alive(owner_token()) is True
    ended = subprocess.Popen(["true"])
    ended.wait()
    assert owner_alive(owner_token(ended.pid)) is False
    assert owner_alive("some-other-host/boot/1/2") is None  # cannot tell: left alone
    assert owner_alive("garbage") is None


def test_clean_run_id_and_all_are_exclusive():
    import pytest

    from bot.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["clean"]).all is False
    assert parser.parse_args(["clean", "--all"]).all is True
    with pytest.raises(SystemExit):
        parser.parse_args(["clean", "--all", "--run-id", "x"])


def test_buildkit_plain_progress_reads_like_the_classic_builder():
    from bot.engine.core import plain_buildkit_log

    raw = (
        "#5 [2/3] RUN pip install .\n#5 0.512 Collecting six\n"
        "#5 1.20 ModuleNotFoundError: No module named 'yaml'\n#5 ERROR: process did not complete\n"
    )
    assert plain_buildkit_log(raw) == (
        "[2/3] RUN pip install .\nCollecting six\n"
        "ModuleNotFoundError: No module named 'yaml'\nERROR: process did not complete\n"
    )
    # the summary after a failed step repeats its tail: it goes, the error line stays last
    failed = raw + "------\n > [2/3] RUN pip install .:\n1.20 ModuleNotFoundError: No module named 'yaml'\n------\n"
    failed += "ERROR: failed to solve: executor failed running [/bin/sh -c pip install .]: exit code: 1\n"
    assert plain_buildkit_log(failed).splitlines()[-2:] == [
        "ERROR: process did not complete",
        "ERROR: failed to solve: executor failed running [/bin/sh -c pip install .]: exit code: 1",
    ]


def test_cache_mounts_are_scoped_to_the_build_and_marked_for_pruning():
    from bot.engine.dockerfile import scope_cache_mounts

    text = (
        "FROM x\n"
        "RUN --mount=type=cache,id=cargo-target-a,target=/c,sharing=locked \\\n"
        "    sh -c 'cargo build; s=$?; exit $s'\n"
        "RUN echo plain \\\n"
        "  && echo kept\n"
        "RUN \\\n"
        " # a comment inside the instruction\n"
        " --mount=type=cache,target=/root/.cache echo hidden\n"
        'RUN --mount=type=bind,source=a,target=/b ["ls"]\n'
    )
    out = scope_cache_mounts(text, "setupbot-cache-r1")
    assert out.splitlines() == [
        "FROM x",
        "RUN --mount=type=cache,target=/c,sharing=locked,id=setupbot-cache-r1-cargo-target-a "
        ": setupbot-cache-r1; sh -c 'cargo build; s=$?; exit $s'",
        "RUN echo plain \\",
        "  && echo kept",
        "RUN --mount=type=cache,target=/root/.cache,id=setupbot-cache-r1-/root/.cache : setupbot-cache-r1; echo hidden",
        'RUN --mount=type=bind,source=a,target=/b ["ls"]',
    ]


def test_cache_records_are_found_by_the_scope_in_their_description():
    from bot.engine.core import cache_records

    du = (
        "ID:\t\tabc123*\nMutable:\ttrue\nDescription:\tcached mount /c from exec /bin/sh -c : "
        "setupbot-cache-r1; sh -c 'x'\nType:\t\texec.cachemount\n\n"
        "ID:\t\tdef456\nDescription:\tcached mount /c from exec /bin/sh -c : setupbot-cache-r2; y\n\n"
        "ID:\t\tghi789\nDescription:\tcached mount /root/.cache from exec /bin/sh -c pip install x\n"
    )
    assert cache_records(du, "setupbot-cache-r1") == ["abc123"]
    assert cache_records(du, "setupbot-cache-") == ["abc123", "def456"]


def test_cached_steps_are_counted_from_each_builder_s_own_output():
    """A RUN, COPY or ADD step from the layer cache counts; a FROM already present and a
    cached ENV or WORKDIR change no file and do not. An unknown format or a log whose middle
    was cut says nothing (None)."""
    from bot.engine.core import count_cached_steps

    classic = (
        "Step 1/4 : FROM python:3.11-slim\n ---> 92beae941600\n"
        "Step 2/4 : ENV A=1\n ---> Using cache\n ---> 9867f2a461dc\n"
        "Step 3/4 : RUN pip install requests\n ---> Running in 5e4b87960a16\n"
        "Step 4/4 : COPY . /workspace\n ---> 58a896d83803\nSuccessfully built 58a896d83803\n"
    )
    assert count_cached_steps(classic, buildkit=False) == 0
    again = classic.replace(" ---> Running in 5e4b87960a16", " ---> Using cache")
    assert count_cached_steps(again, buildkit=False) == 1
    podman = (
        "STEP 1/3: FROM python:3.11-slim\nSTEP 2/3: RUN apt-get update\n--> Using cache 1f2e3d\nSTEP 3/3: COPY . .\n"
    )
    assert count_cached_steps(podman, buildkit=False) == 1
    buildkit = (
        "#1 [internal] load build definition from Dockerfile\n#1 DONE 0.0s\n"
        "#5 [env 1/4] FROM docker.io/library/python:3.11-slim\n#5 CACHED\n"
        "#6 [env 2/4] WORKDIR /workspace\n#6 CACHED\n"
        "#7 [env 3/4] RUN pip install requests\n#7 0.512 Collecting requests\n#7 DONE 3.1s\n"
    )
    assert count_cached_steps(buildkit, buildkit=True) == 0
    assert count_cached_steps(buildkit.replace("#7 0.512 Collecting requests\n", "#7 CACHED\n"), buildkit=True) == 1
    assert count_cached_steps("Successfully built", buildkit=False) is None
    cut = classic.replace("Step 3/4", "[setupbot] ... 52133 bytes of output elided ...\nStep 3/4")
    assert count_cached_steps(cut, buildkit=False) is None
