"""Collection failures: errors raised inside an installed dependency, and the fallback
signature that lets the era repair run when nothing else classifies the failure."""

from __future__ import annotations

from bot.loop.diagnose import collection_signatures, dependency_errors, diagnose

DRIFT = """\
_________ ERROR collecting pkg_tests/test_sign.py _________
pkg_tests/signing_commons.py:20: in <module>
    key = load_key("keys/ec.der")
/usr/local/lib/python3.13/dist-packages/cryptography/hazmat/primitives/serialization/base.py:25: in load_der_private_key
    return rust_openssl.keys.load_der_private_key(
E   ValueError: EC private key is not encoded properly
ERROR pkg_tests/test_sign.py - ValueError: EC private key is not encoded properly
!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!
"""

OWN = """\
tests/json-fixtures/test_vm.py:79: in pytest_generate_tests
    generate_fixture_tests(
eth/tools/fixtures/generation.py:69: in generate_fixture_tests
    raise AssertionError(
E   AssertionError: Suspiciously found zero fixtures: /workspace/fixtures/VMTests
ERROR tests/json-fixtures/test_vm.py - AssertionError: Sus...
!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!
"""


def test_error_raised_in_a_dependency_names_it():
    sigs = dependency_errors(DRIFT)
    assert [(s.kind, s.category, s.key) for s in sigs] == [("dependency_error", "version", "cryptography")]
    assert "EC private key" in sigs[0].message


def test_error_in_the_repositorys_own_code_is_not_a_dependency_error():
    assert dependency_errors(OWN) == []
    # but a failed collection still gets a signature the era repair can target
    kinds = [s.kind for s in collection_signatures(OWN) if s.is_setup_failure]
    assert kinds == ["collection_error"]


def test_runner_frames_are_not_dependencies():
    log = (
        "/usr/lib/python3/dist-packages/_pytest/python.py:493: in importtestmodule\n"
        "    mod = import_path(...)\n"
        "E   RuntimeError: boom\n"
    )
    assert dependency_errors(log) == []


def test_a_precise_signature_wins_over_the_dependency_frame():
    log = (
        "tests/test_db.py:3: in <module>\n    from app.models import Row\n"
        "/usr/local/lib/python3.13/dist-packages/django/apps/registry.py:138: in check_apps_ready\n"
        '    raise AppRegistryNotReady("Apps aren\'t loaded yet.")\n'
        "E   django.core.exceptions.AppRegistryNotReady: Apps aren't loaded yet.\n"
        "!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!\n"
    )
    assert [s.kind for s in collection_signatures(log)] == ["django_settings"]


def test_a_clean_collection_has_no_signature():
    assert collection_signatures("collected 12 items\n\n12 tests collected in 0.3s\n") == []


def test_absent_submodule_is_named(tmp_path):
    from bot.loop.target import absent_submodules

    (tmp_path / ".gitmodules").write_text(
        '[submodule "fixtures"]\n\tpath = fixtures\n\turl = https://example.invalid/tests.git\n'
        '[submodule "docs"]\n\tpath = docs/theme\n\turl = https://example.invalid/theme.git\n'
    )
    (tmp_path / "fixtures").mkdir()
    assert absent_submodules(tmp_path, OWN) == [("fixtures", "https://example.invalid/tests.git")]
    # checked out: nothing to say
    (tmp_path / "fixtures" / "VMTests").mkdir()
    assert absent_submodules(tmp_path, OWN) == []
    # not mentioned by the output: not the cause
    assert absent_submodules(tmp_path, "E   ImportError: x") == []


def test_a_missing_data_file_is_not_a_missing_program():
    from bot.loop.diagnose import diagnose

    assert [
        s.kind for s in diagnose("FileNotFoundError: [Errno 2] No such file or directory: 'no-such-cert.crt'")
    ] == []
    assert [(s.kind, s.key) for s in diagnose("FileNotFoundError: [Errno 2] No such file or directory: 'ffmpeg'")] == [
        ("missing_command", "ffmpeg")
    ]


def test_dependency_error_kept_beside_an_unrelated_signature():
    log = "FileNotFoundError: [Errno 2] No such file or directory: 'gpg'\n" + DRIFT
    assert [s.kind for s in collection_signatures(log)] == ["missing_command", "dependency_error"]


def test_failed_builds_names_the_distribution_whose_build_failed():
    from bot.loop.era import failed_builds

    log = (
        "Collecting requests>=2.28\n  Downloading requests-2.32.3-py3-none-any.whl\n"
        "Collecting pygobject>=3.42\n  Downloading pygobject-3.52.3.tar.gz (1.2 MB)\n"
        "  Installing build dependencies: started\n  Preparing metadata (pyproject.toml): started\n"
        '  ../meson.build:31:12: ERROR: Dependency "girepository-2.0" not found, tried pkgconfig and cmake\n'
        "  error: subprocess-exited-with-error\n"
    )
    assert failed_builds(log) == ["pygobject"]
    assert failed_builds("Collecting six\nSuccessfully installed six-1.16.0\n") == []


def test_a_test_log_line_is_not_a_wheel_build():
    from bot.loop.diagnose import diagnose

    assert diagnose("2020-08-01 00:00:00 WARNING Failed to build path\n") == []
    assert [(s.kind, s.key) for s in diagnose("  Failed to build lxml\nERROR: Could not build wheels for lxml")] == [
        ("wheel_build_failed", "lxml")
    ]
    assert [(s.kind, s.key) for s in diagnose("ERROR: Failed building wheel for psycopg2")] == [
        ("wheel_build_failed", "psycopg2")
    ]


def test_a_dependency_that_checks_numpy_at_import_is_a_dependency_error_for_the_era():
    """pyarrow's own check under a project that caps numpy<2: the era release of pyarrow is the
    repair, so the signature names pyarrow (the fresh sample's lighteval, before)."""
    from bot.loop.diagnose import collection_signatures

    out = (
        "ImportError while importing test module '/workspace/tests/test_unit_reorder.py'.\n"
        "E   ImportError: pyarrow requires NumPy 2.0 or newer, found 1.26.4\n"
        "!!!!!!!!!!!!!!!!!!! Interrupted: 17 errors during collection !!!!!!!!!!!!!!!!!!!\n"
    )
    sigs = [(s.kind, s.key) for s in collection_signatures(out) if s.is_setup_failure]
    assert sigs == [("dependency_error", "pyarrow")]


# a test module that loads a model from a hub at import: the chained exceptions pass through
# socket, urllib3, requests and the hub client, each in site-packages
OUTSIDE = """\
_____________ ERROR collecting tests/metrics/test_scores.py _____________
/usr/local/lib/python3.11/site-packages/urllib3/connection.py:198: in _new_conn
    sock = connection.create_connection(
E   socket.gaierror: [Errno -2] Name or service not known
/usr/local/lib/python3.11/site-packages/urllib3/connection.py:205: in _new_conn
    raise NameResolutionError(self.host, self, e) from e
E   urllib3.exceptions.NameResolutionError: <urllib3.connection.HTTPSConnection object>: Failed to resolve \
'models.example.org' ([Errno -2] Name or service not known)
/usr/local/lib/python3.11/site-packages/requests/adapters.py:700: in send
    raise ConnectionError(e, request=request)
E   requests.exceptions.ConnectionError: HTTPSConnectionPool(host='models.example.org', port=443): Max retries \
exceeded with url: /tiny/config.json
/usr/local/lib/python3.11/site-packages/hubclient/file_download.py:470: in cached_file
E   OSError: We couldn't connect to 'https://models.example.org' to load this file
ERROR tests/metrics/test_scores.py
!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!
"""


def test_a_host_outside_not_reached_is_the_network_not_a_dependency_release():
    sigs = collection_signatures(OUTSIDE)
    # not urllib3's, requests' or the hub client's release, and no era repair: nothing to repair
    assert [(s.kind, s.category, s.key) for s in sigs] == [("external_network", "external", "models.example.org")]
    assert not any(s.is_setup_failure for s in sigs)
    # the dependency frames alone still read as dependency errors
    assert {s.key for s in dependency_errors(OUTSIDE)} == {"urllib3", "requests", "hubclient"}


def test_a_refused_local_address_is_not_the_outside():
    local = OUTSIDE.replace("models.example.org", "localhost").replace(
        "Name or service not known", "Connection refused"
    )
    assert "external_network" not in [s.kind for s in collection_signatures(local)]
    # a service host the catalogue knows is a service to start, not the outside
    service = 'E   psycopg2.OperationalError: could not translate host name "postgres" to address: Name or service not known\n'
    kinds = [s.kind for s in collection_signatures(service + "!!! Interrupted: 1 error during collection !!!\n")]
    assert kinds[0] == "unknown_service_host" and "external_network" not in kinds


def test_the_judge_and_the_loop_read_one_list_of_outside_failures():
    from bot.logtext import outside_host
    from bot.verify.judge import EXTERNAL_PATTERNS

    hub = "OSError: We couldn't connect to 'https://models.example.org' to load this file"
    assert outside_host(hub) == "models.example.org" and EXTERNAL_PATTERNS.search(hub)
    # a local address that does not answer is a service the run did not start: neither dismisses it
    for local in ("Cannot connect to 'http://localhost:8000/api'", "unable to connect to http://127.0.0.1:9000"):
        assert outside_host(local) is None and not EXTERNAL_PATTERNS.search(local)


PIP_URL_UNREACHABLE = """\
Collecting electrum@ https://github.com/spesmilo/electrum/archive/df1b9a2.zip (from -r requirements/daemons/btc.txt (line 1))
  WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by \
'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new \
connection: [Errno -2] Name or service not known')': /spesmilo/electrum/archive/df1b9a2.zip
ERROR: Could not install packages due to an OSError: HTTPSConnectionPool(host='github.com', port=443): Max retries \
exceeded with url: /spesmilo/electrum/archive/df1b9a2.zip (Caused by NewConnectionError('<pip._vendor.urllib3.connection.\
HTTPSConnection object at 0x7f>: Failed to establish a new connection: [Errno -2] Name or service not known'))
ERROR: executor failed running [/bin/sh -c python -m pip install -r requirements/daemons/btc.txt]: exit code: 1
"""


def test_a_requirement_whose_archive_host_is_not_reached_is_the_network_not_a_setup_failure():
    """bitcart's requirements name an archive on a code host this machine does not reach: the
    build stops there, and the report says which host, instead of "no classified cause"."""
    sigs = diagnose(PIP_URL_UNREACHABLE)
    assert [(s.kind, s.category, s.key) for s in sigs] == [("external_network", "external", "github.com")]
    assert not any(s.is_setup_failure for s in sigs)
    # an index on this machine that refuses is not the outside
    local = PIP_URL_UNREACHABLE.replace("github.com", "127.0.0.1").replace(
        "[Errno -2] Name or service not known", "[Errno 111] Connection refused"
    )
    assert "external_network" not in [s.kind for s in diagnose(local)]
