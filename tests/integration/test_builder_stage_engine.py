"""The builder stage on the real engine (issue 16 item 5).

A local package index (a directory served over HTTP on 127.0.0.1) offers ctiny 1.0 only as a
source archive with a C extension, and the setuptools wheel its build needs. The clean replay
installs it with build-essential in the image. The lock then finds that ctiny has no wheel,
builds it in a builder stage, and the final image installs the wheel: the same distributions
as the replay, the extension imports and works, and there is no compiler in the image.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

from bot.compile import compile_dockerfile
from bot.compile.plan import make_plan
from bot.config import load_settings
from bot.graph.mapping import Registry
from bot.graph.model import Node
from bot.loop.lock import installed_set, lock_environment

pytestmark = pytest.mark.docker

SETUP_PY = """from setuptools import Extension, setup
setup(name="ctiny", version="1.0", ext_modules=[Extension("ctiny", ["ctiny.c"])])
"""
C_SOURCE = """#include <Python.h>
static PyObject *add(PyObject *self, PyObject *args) {
    long a, b;
    if (!PyArg_ParseTuple(args, "ll", &a, &b)) return NULL;
    return PyLong_FromLong(a + b);
}
static PyMethodDef methods[] = {{"add", add, METH_VARARGS, "a + b"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "ctiny", NULL, -1, methods};
PyMODINIT_FUNC PyInit_ctiny(void) { return PyModule_Create(&module); }
"""


def _sdist(folder: Path) -> Path:
    files = {
        "ctiny-1.0/setup.py": SETUP_PY,
        "ctiny-1.0/ctiny.c": C_SOURCE,
        "ctiny-1.0/pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n',
        "ctiny-1.0/PKG-INFO": "Metadata-Version: 2.1\nName: ctiny\nVersion: 1.0\n",
    }
    out = folder / "ctiny-1.0.tar.gz"
    with tarfile.open(out, "w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1_700_000_000
            tf.addfile(info, io.BytesIO(data))
    return out


def _page(folder: Path) -> None:
    links = "".join(
        f'<a href="{f.name}#sha256={hashlib.sha256(f.read_bytes()).hexdigest()}">{f.name}</a>\n'
        for f in sorted(folder.iterdir())
        if f.suffix in (".gz", ".whl")
    )
    (folder / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")


@pytest.fixture
def local_index(tmp_path):
    index = tmp_path / "index" / "simple"
    (index / "ctiny").mkdir(parents=True)
    _sdist(index / "ctiny")
    _page(index / "ctiny")
    # the build backend, from wherever this machine's pip is configured to get it
    (index / "setuptools").mkdir()
    got = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", "setuptools<81"]
        + ["-d", str(index / "setuptools")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert got.returncode == 0, got.stderr[-2000:]
    _page(index / "setuptools")
    (index / "index.html").write_text('<a href="ctiny/">ctiny</a>\n<a href="setuptools/">setuptools</a>\n')
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(index.parent))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    server.shutdown()
    server.server_close()


def _size(tag: str) -> int:
    out = subprocess.run(["docker", "image", "inspect", "-f", "{{.Size}}", tag], capture_output=True, text=True)
    return int(out.stdout.strip() or 0)


@pytest.mark.slow
def test_a_dependency_with_only_a_source_archive_is_built_in_a_builder_stage(tmp_path, local_index, host_engine):
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "requirements.txt").write_text("ctiny==1.0\n")
    (repo / "tests" / "test_c.py").write_text("import ctiny\n\ndef test_add():\n    assert ctiny.add(2, 3) == 5\n")
    g = make_plan(
        repo, load_settings(repo), available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False)
    ).graph
    g.nodes["tool:pytest"].action = None  # not on the local index, and not needed to compare sets
    for var, value in (("PIP_INDEX_URL", local_index), ("PIP_TRUSTED_HOST", "127.0.0.1")):
        g.add(
            Node(f"config:env:{var}", "CONFIG", var, "SATISFIED", action="env", attrs={"kind": "env", "value": value})
        )
    # what the setup loop adds when the build fails on gcc
    g.add(Node("systemlib:build-essential", "SYSTEMLIB", "build-essential", "SATISFIED", action="apt"))
    replay_tag = f"setupbot-loop-{host_engine.run_id}:replay-1"
    built = host_engine.build(repo, compile_dockerfile(g).text, replay_tag, no_cache=True)
    assert built.ok, built.log[-3000:]

    out = lock_environment(
        host_engine, repo, g, replay_tag=replay_tag, output_dir=".devcontainer", index_url=local_index
    )
    assert out.status == "locked", (out.reason, out.notes)
    assert out.lock.built == ["ctiny"], out.notes
    assert "FROM python:3.11-slim AS wheels" in out.dockerfile
    lock_text = (repo / ".devcontainer" / "requirements.lock").read_text()
    assert "# builder stage: ctiny" in lock_text and "--hash=sha256:" in lock_text

    # the same distributions as the replay, the extension works, and no compiler is left
    assert installed_set(host_engine, out.tag).dists == installed_set(host_engine, replay_tag).dists
    run = host_engine.run_once(out.tag, ["python", "-c", "import ctiny; print(ctiny.add(2, 3))"])
    assert run.ok and run.output.strip().endswith("5"), run.output
    gcc = host_engine.run_once(out.tag, ["sh", "-c", "command -v gcc cc make || echo none"])
    assert gcc.output.strip().endswith("none"), gcc.output
    dpkg = host_engine.run_once(out.tag, ["dpkg-query", "-W", "build-essential"])
    assert not dpkg.ok
    replay_size, locked_size = _size(replay_tag), _size(out.tag)
    print(f"replay image {replay_size / 1e6:.0f} MB, builder-stage image {locked_size / 1e6:.0f} MB")
    assert 0 < locked_size < replay_size
