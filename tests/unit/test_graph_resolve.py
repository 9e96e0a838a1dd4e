"""uv resolution against a local package index (a real HTTP server with real wheels)."""

from __future__ import annotations

import base64
import hashlib
import http.server
import shutil
import threading
import zipfile
from pathlib import Path

import pytest

from bot.compile.plan import make_plan
from bot.graph.mapping import Registry
from bot.graph.resolve import sdist_only, uv_compile, wheel_less

pytestmark = pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")


def make_wheel(
    directory: Path,
    name: str,
    version: str,
    requires_python: str = ">=3.8",
    tag: str = "py3-none-any",
    requires: tuple[str, ...] = (),
) -> Path:
    dist = f"{name.replace('-', '_')}-{version}"
    path = directory / f"{dist}-{tag}.whl"
    files = {
        f"{name.replace('-', '_')}/__init__.py": "",
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Python: {requires_python}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}.dist-info/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n",
    }
    record = []
    with zipfile.ZipFile(path, "w") as zf:
        for arc, text in files.items():
            zf.writestr(arc, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
            record.append(f"{arc},sha256={digest},{len(text)}")
        record.append(f"{dist}.dist-info/RECORD,,")
        zf.writestr(f"{dist}.dist-info/RECORD", "\n".join(record) + "\n")
    return path


def make_sdist(directory: Path, name: str, version: str) -> Path:
    """A source distribution whose PKG-INFO (metadata 2.2, nothing dynamic) uv can read without
    building it."""
    import io
    import tarfile

    base = f"{name.replace('-', '_')}-{version}"
    path = directory / f"{base}.tar.gz"
    files = {
        f"{base}/PKG-INFO": f"Metadata-Version: 2.2\nName: {name}\nVersion: {version}\n",
        f"{base}/pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n',
    }
    with tarfile.open(path, "w:gz") as tf:
        for arc, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(arc)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def local_index(tmp_path: Path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "demo-lib", "1.2.0")
    make_wheel(wheels, "pytest", "8.0.0")
    make_wheel(wheels, "new-only", "2.0.0", requires_python=">=3.13")
    make_wheel(wheels, "win-only", "1.0.0", tag="cp311-cp311-win_amd64")
    make_wheel(wheels, "numpy", "1.26.4")
    make_wheel(wheels, "numpy", "2.0.0")
    make_wheel(wheels, "pandas", "1.5.3", requires=("numpy>=1.21",))
    make_sdist(wheels, "src-only", "1.0.0")
    make_wheel(wheels, "wraps-src", "1.0.0", requires=("src-only==1.0.0",))

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            parts = [p for p in self.path.split("/") if p]
            if len(parts) == 2 and parts[0] == "simple":
                name = parts[1].replace("-", "_")
                found = sorted(w.name for w in wheels.iterdir() if w.name.startswith(name + "-"))
                if not found:
                    self.send_response(404)
                    self.end_headers()
                    return
                body = "".join(f'<a href="/files/{w}">{w}</a>' for w in found).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                self.wfile.write(body)
            elif len(parts) == 2 and parts[0] == "files" and (wheels / parts[1]).is_file():
                data = (wheels / parts[1]).read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            else:
                self.send_response(404)
                self.end_headers()

        def do_HEAD(self):  # noqa: N802 - no range support: uv then downloads the whole wheel
            parts = [p for p in self.path.split("/") if p]
            ok = len(parts) == 2 and parts[0] == "files" and (wheels / parts[1]).is_file()
            self.send_response(200 if ok else 404)
            if ok:
                self.send_header("Content-Length", str((wheels / parts[1]).stat().st_size))
            self.end_headers()

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/simple"
    server.shutdown()


def test_uv_compile_pins_and_reports_a_python_floor(local_index):
    ok = uv_compile(["demo-lib>=1"], "3.11", timeout=60, index_url=local_index)
    assert ok.ok and ok.pins["demo-lib"] == "1.2.0"
    floor = uv_compile(["new-only"], "3.11", timeout=60, index_url=local_index)
    assert not floor.ok and "3.13" in floor.error


def test_plan_resolution_drops_a_missing_test_dependency(tmp_path, local_index):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "requirements.txt").write_text("demo-lib>=1\n")
    (repo / "requirements-test.txt").write_text("pytest\nno-such-test-helper\n")
    p = make_plan(
        repo,
        None,
        available_pythons=["3.11"],
        resolve=True,
        registry=Registry(enabled=False),
        index_url=local_index,
        resolve_timeout=60,
    )
    g = p.graph
    assert g.meta["resolution"]["ok"] is True and g.meta["resolution"]["dropped"] == ["no-such-test-helper"]
    assert g.nodes["package:demo-lib"].attrs["resolved"] == "1.2.0" and g.nodes["package:demo-lib"].state == "SATISFIED"
    assert g.nodes["package:no-such-test-helper"].state == "MISSING"
    assert any("no-such-test-helper is not on the package index" in w.message for w in p.warnings)
    text = p.dockerfile.text
    assert (
        "no-such-test-helper" not in text and "-r requirements-test.txt" not in text and "-r requirements.txt" in text
    )


def test_plan_resolution_failure_on_a_runtime_dependency_is_a_warning(tmp_path, local_index):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "requirements.txt").write_text("demo-lib>=1\nnot-there-at-all\n")
    p = make_plan(
        repo,
        None,
        available_pythons=["3.11"],
        resolve=True,
        registry=Registry(enabled=False),
        index_url=local_index,
        resolve_timeout=60,
    )
    assert p.graph.meta["resolution"]["ok"] is False
    assert p.graph.nodes["package:not-there-at-all"].state == "MISSING"
    assert any("could not resolve" in w.message for w in p.warnings)
    assert "FROM python:3.11-slim" in p.dockerfile.text  # still a plan


def test_a_pin_without_a_linux_wheel_is_found(local_index):
    assert (
        sdist_only({"demo-lib": "1.2.0", "win-only": "1.0.0"}, "3.11", timeout=60, index_url=local_index) == "win-only"
    )
    assert sdist_only({"demo-lib": "1.2.0"}, "3.11", timeout=60, index_url=local_index) is None


def test_every_pin_without_a_linux_wheel_is_found(local_index):
    """wheel_less names all of them (one resolution more per name found), not only the first."""
    pins = {"demo-lib": "1.2.0", "win-only": "1.0.0", "src-only": "1.0.0"}
    assert sorted(wheel_less(pins, "3.11", timeout=60, index_url=local_index) or []) == ["src-only", "win-only"]
    assert wheel_less({"demo-lib": "1.2.0"}, "3.11", timeout=60, index_url=local_index) == []
    # a pin the index does not have at all is not a missing wheel: it cannot be told
    assert wheel_less({"demo-lib": "9.9.9"}, "3.11", timeout=60, index_url=local_index) is None


def test_a_pin_seen_with_a_wheel_is_not_asked_about_again(local_index, monkeypatch):
    """A run checks its lock's set up to three times over mostly the same pins: the pins seen
    with a wheel are left out, the others checked alone; a pin with no wheel is asked again."""
    from bot.graph import resolve

    asked: list[tuple[dict[str, str], bool]] = []
    real = resolve.wheel_resolution

    def spy(pins, python, **kw):
        asked.append((dict(pins), kw.get("no_deps", False)))
        return real(pins, python, **kw)

    monkeypatch.setattr(resolve, "wheel_resolution", spy)
    first = {"demo-lib": "1.2.0", "win-only": "1.0.0"}
    assert wheel_less(first, "3.11", timeout=60, index_url=local_index) == ["win-only"]
    assert asked[0] == (first, False)
    asked.clear()
    again = {**first, "src-only": "1.0.0"}
    assert sorted(wheel_less(again, "3.11", timeout=60, index_url=local_index) or []) == ["src-only", "win-only"]
    assert asked[0] == ({"win-only": "1.0.0", "src-only": "1.0.0"}, True)
    assert all("demo-lib" not in pins for pins, _ in asked)
    asked.clear()
    assert wheel_less({"demo-lib": "1.2.0"}, "3.11", timeout=60, index_url=local_index) == [] and asked == []
    # another Python, another index: not what was seen
    assert wheel_less({"demo-lib": "1.2.0"}, "3.12", timeout=60, index_url=local_index) == [] and len(asked) == 1


def test_numpy2_next_to_a_numpy1_build_gets_a_constraint(tmp_path, local_index):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "requirements.txt").write_text("pandas<2\n")
    p = make_plan(
        repo,
        None,
        available_pythons=["3.11"],
        resolve=True,
        registry=Registry(enabled=False),
        index_url=local_index,
        resolve_timeout=60,
    )
    g = p.graph
    assert g.nodes["config:constraint:numpy<2"].evidence[0][0] == "uv pip compile"
    assert g.meta["resolution"]["numpy_guard"] == "numpy<2"
    assert "numpy<2" in p.dockerfile.text and "PIP_CONSTRAINT" in p.dockerfile.text


def test_a_dependency_without_wheels_brings_the_compiler(tmp_path, local_index):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "requirements.txt").write_text("demo-lib\nsrc-only\n")
    p = make_plan(
        repo,
        None,
        available_pythons=["3.11"],
        resolve=True,
        registry=Registry(enabled=False),
        index_url=local_index,
        resolve_timeout=60,
    )
    assert p.graph.meta["resolution"]["ok"] is True, p.graph.meta["resolution"]
    assert p.graph.meta["resolution"]["sdist_only"] == "src-only"
    be = p.graph.nodes["systemlib:build-essential"]
    assert "src-only has no wheel for Python 3.11" in be.evidence[0][2]
    assert "build-essential" in p.dockerfile.text
    # the same repository without the source-only dependency needs no compiler
    (repo / "requirements.txt").write_text("demo-lib\n")
    p = make_plan(
        repo,
        None,
        available_pythons=["3.11"],
        resolve=True,
        registry=Registry(enabled=False),
        index_url=local_index,
        resolve_timeout=60,
    )
    assert "systemlib:build-essential" not in p.graph.nodes and "build-essential" not in p.dockerfile.text


def test_a_dependency_of_a_dependency_without_wheels_leaves_the_rest_resolved(tmp_path, local_index):
    # wraps-src needs src-only, which has only an sdist: before, the whole resolution failed and
    # the plan had no pins at all, so guards that read them (numpy<2 here) never ran
    res = uv_compile(["wraps-src", "pandas<2"], "3.11", timeout=60, index_url=local_index)
    assert res.ok, res.error
    assert res.unbuilt == ["src-only"]
    assert res.pins == {"wraps-src": "1.0.0", "pandas": "1.5.3", "numpy": "2.0.0"}
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "requirements.txt").write_text("wraps-src\npandas<2\n")
    p = make_plan(
        repo,
        None,
        available_pythons=["3.11"],
        resolve=True,
        registry=Registry(enabled=False),
        index_url=local_index,
        resolve_timeout=60,
    )
    r = p.graph.meta["resolution"]
    assert r["ok"] is True and r["unbuilt"] == ["src-only"], r
    assert r["numpy_guard"] == "numpy<2" and r["pins"]["numpy"] == "1.26.4"
    assert any("src-only" in w.message and "built in the container" in w.message for w in p.warnings)


def test_no_deps_resolves_each_requirement_alone(local_index):
    together = uv_compile(["pandas"], "3.11", timeout=60, index_url=local_index)
    assert together.ok and set(together.pins) == {"pandas", "numpy"}
    alone = uv_compile(["pandas"], "3.11", timeout=60, index_url=local_index, no_deps=True)
    assert alone.ok and alone.pins == {"pandas": "1.5.3"}


def test_an_era_that_does_not_resolve_without_building_falls_back_to_each_requirements_own_release(monkeypatch):
    """scitools/iris-grib at 2024-06-22: the set needs cf-units and cftime releases that had only
    sdists, which the host does not build; the era pin of scitools-iris itself needs no build."""
    from bot.graph import era as era_mod
    from bot.graph.resolve import Resolution

    calls = []

    def fake_compile(reqs, python, **kw):
        calls.append(kw.get("no_deps", False))
        if kw.get("no_deps"):
            return Resolution(True, {"scitools-iris": "3.9.0", "numpy": "2.0.0"})
        return Resolution(
            False, error="hint: Wheels are required for `cftime` because building from source is disabled"
        )

    monkeypatch.setattr(era_mod, "uv_compile", fake_compile)
    era = era_mod.resolve_era(["scitools-iris>=3.0.2", "numpy"], "3.11", "2024-06-22T22:31:14+01:00")
    assert calls == [False, True]
    assert era.partial and era.version_of("scitools-iris") == "3.9.0"
    assert (
        era.resolution.error.startswith("resolved each requirement alone (--no-deps)")
        and "cftime" in era.resolution.error
    )
    # a set that resolves keeps its full resolution
    calls.clear()
    monkeypatch.setattr(
        era_mod,
        "uv_compile",
        lambda reqs, python, **kw: calls.append(kw.get("no_deps", False)) or Resolution(True, {"a": "1"}),
    )
    full = era_mod.resolve_era(["a"], "3.11", "2024-06-22")
    assert calls == [False] and not full.partial and full.pins == {"a": "1"}


def test_the_distributions_uv_names_as_having_no_wheel_keep_their_names_past_uvs_markers():
    """uv writes a marker in braces between a name and its version; the version is not a name
    (the fresh sample's universal_manipulation_interface listed '1-3-0' as a distribution)."""
    from bot.graph.resolve import _unbuilt_names

    hint = "hint: Wheels are required for `evdev` because building from source is disabled (--no-build)"
    assert _unbuilt_names(
        "Because evdev{'linux' in sys_platform}>=1.3.0 has no usable wheels and pynput==1.7.6 depends on it. " + hint
    ) == ["evdev"]
    assert _unbuilt_names("Because docopt==0.6.2 has no usable wheels and you require it --no-build") == ["docopt"]
    assert _unbuilt_names("Because all versions of foo-bar have no usable wheels --no-build") == ["foo-bar"]


def test_host_uv_never_downloads_an_interpreter(tmp_path, monkeypatch, local_index):
    """uv on the host resolves for --python-version and builds nothing; asked for a Python the
    host lacks, it first tried to download one: 6.5 s of failed retries on every call where no
    download host answers (each resolution, hash and wheel check of a run)."""
    from bot.graph import resolve
    from bot.loop import lock

    calls = tmp_path / "calls"
    fake = tmp_path / "uv"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    fake.chmod(0o755)
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: str(fake) if name == "uv" else real_which(name, *a, **k))
    resolve.uv_compile(["demo-lib==1.2.0"], "3.13", index_url=local_index, use_cache=False)
    lock.uv_hashes({"demo-lib": "1.2.0"}, "3.13", index_url=local_index)
    lines = calls.read_text().splitlines()
    assert len(lines) == 2 and all(resolve.NO_PYTHON_DOWNLOADS in line.split() for line in lines)
    monkeypatch.undo()
    # the real uv takes the flag and resolves for a Python the host does not have
    res = resolve.uv_compile(["demo-lib==1.2.0"], "3.13", index_url=local_index, use_cache=False)
    assert res.ok and res.pins == {"demo-lib": "1.2.0"}, res.error
