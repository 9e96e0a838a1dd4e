"""A package index served over HTTP on 127.0.0.1 (PEP 503 pages over a folder of wheels written
by hand), for tests whose builds must see releases appear or be cached the way PyPI serves them.

``serve(index, cache_control=...)`` sends the header PyPI sends with its files when asked
(pip's HTTP cache keeps a download only when the response allows it)."""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import http.server
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

# what files.pythonhosted.org sends with every file
PYPI_FILE_CACHE_CONTROL = "max-age=365000000, immutable, public"


def build_wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel, written by hand (what a build backend would produce)."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f'__version__ = "{version}"\n',
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: setupbot-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(zipfile.ZipInfo(path, (2024, 1, 1, 0, 0, 0)), text)
    return wheel


def publish(index: Path, name: str, version: str) -> None:
    """Add a release and rewrite the PEP 503 page, each link with its #sha256= fragment."""
    folder = index / "simple" / name
    folder.mkdir(parents=True, exist_ok=True)
    build_wheel(folder, name, version)
    links = "".join(
        f'<a href="{w.name}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{w.name}</a>\n'
        for w in sorted(folder.glob("*.whl"))
    )
    (folder / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    names = sorted(p.name for p in (index / "simple").iterdir() if p.is_dir())
    (index / "simple" / "index.html").write_text("".join(f'<a href="{n}/">{n}</a>\n' for n in names))


class _Handler(http.server.SimpleHTTPRequestHandler):
    cache_control = ""
    requests: list[str]

    def end_headers(self) -> None:
        if self.cache_control and self.path.endswith(".whl"):
            self.send_header("Cache-Control", self.cache_control)
        super().end_headers()

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.requests.append(self.path)
        super().do_GET()

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def serve(index: Path, cache_control: str = "") -> Iterator[tuple[str, list[str]]]:
    """The index's simple URL on 127.0.0.1, and the paths requested so far (appended live)."""
    requests: list[str] = []
    handler = type("Handler", (_Handler,), {"cache_control": cache_control, "requests": requests})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(index)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple", requests
    finally:
        server.shutdown()
        server.server_close()
