"""S12: nothing from the repository executes on the host.

A hostile repository asks for every kind of requirement that would make a resolver build code:
an sdist-only distribution on the (local, HTTP) index, a direct URL, a file:// archive, a VCS
URL, a local path, an editable path, and index/links options. Every build of any of them writes
a marker file on the host. An audit hook records every host subprocess (and exec/system/spawn)
while `plan` and `run` go; each must be on the allow-list, carry only allow-listed environment
variables, and no marker may appear.
"""

from __future__ import annotations

import http.server
import io
import os
import shutil
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest
from sec_helpers import LLM_KEY_SENTINEL, TOKEN_SENTINEL

from bot.hostenv import allowed as env_allowed

pytestmark = pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")

# ----------------------------------------------------------------------------- the recorder
_RECORDING: list[list] = []


def _hook(event: str, args: tuple) -> None:
    if not _RECORDING:
        return
    log = _RECORDING[-1]
    if event == "subprocess.Popen":
        executable, argv, cwd, env = args
        argv = [os.fsdecode(a) for a in (argv if isinstance(argv, (list, tuple)) else [argv])]
        files = {}
        # uv's input files are temporary: read them now, while they exist
        for a in argv:
            if a.endswith((".in", ".txt")) and os.path.isfile(a):
                files[a] = Path(a).read_text(errors="replace")
        log.append(("Popen", argv, None if env is None else dict(env), files))
    elif event in ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty"):
        log.append((event, [repr(a) for a in args], None, {}))


_INSTALLED = False


class Recorder:
    def __enter__(self):
        global _INSTALLED
        if not _INSTALLED:  # an audit hook cannot be removed: one for the whole session
            sys.addaudithook(_hook)
            _INSTALLED = True
        self.calls: list = []
        _RECORDING.append(self.calls)
        return self

    def __exit__(self, *exc):
        _RECORDING.remove(self.calls)


_GIT_READ_ONLY = {"log", "rev-parse", "show", "status", "ls-files", "cat-file", "config", "describe"}
_DOCKER_SUBCOMMANDS = {
    "build",
    "buildx",
    "create",
    "start",
    "exec",
    "cp",
    "rm",
    "rmi",
    "image",
    "images",
    "info",
    "inspect",
    "network",
    "volume",
    "ps",
    "tag",
    "kill",
    "restart",
    "stop",
    "container",
    "commit",
    "history",
    "version",
    "wait",
    "logs",
    "diff",
}
_SECRETS = (TOKEN_SENTINEL, LLM_KEY_SENTINEL)


def check_allowed(call) -> str | None:
    """Why ``call`` is outside the allow-list, or None."""
    kind, argv, env, files = call
    if kind != "Popen":
        return f"{kind} is never allowed"
    if env is None:
        return "inherits the bot's whole environment"
    extra = {"GIT_CONFIG_NOSYSTEM", "GIT_TERMINAL_PROMPT"}
    bad = sorted(k for k in env if not env_allowed(k) and k not in extra)
    if bad:
        return f"environment outside the allow-list: {bad}"
    for v in env.values():
        if any(s in v for s in _SECRETS):
            return "a secret in the environment"
    prog = os.path.basename(argv[0])
    if prog == "uv":
        if argv[1:3] != ["pip", "compile"]:
            return "uv only compiles"
        if "--no-build" not in argv and ":all:" not in argv:
            return "uv without --no-build"
        for name, text in files.items():
            for line in text.splitlines():
                s = line.strip()
                if s.startswith("-") or "@" in s or "://" in s or s.startswith((".", "/")):
                    return f"{name} hands uv a build-capable requirement: {s!r}"
        return None
    if prog == "git":
        sub = [a for a in argv[1:] if not a.startswith("-") and "=" not in a and not os.path.isabs(a)]
        return None if sub and sub[0] in _GIT_READ_ONLY else f"git {sub[:1]} is not read-only"
    if prog in ("docker", "podman"):
        if argv[1] not in _DOCKER_SUBCOMMANDS:
            return f"{prog} {argv[1]} is not on the list"
        if argv[1] in ("create", "run"):
            if "--privileged" in argv:
                return "a privileged container"
            for flag, value in zip(argv, argv[1:], strict=False):
                if flag in ("--network", "--net", "--pid", "--ipc") and value == "host":
                    return "a host namespace"
                if flag in ("-v", "--volume", "--mount"):
                    return "a host mount"
        return None
    if prog == "debootstrap":
        return None
    if prog == "iptables":  # the egress guard: list, or add/remove rules tagged with the run
        return None if "-S" in argv or any(a.startswith("setupbot:") for a in argv) else "an untagged iptables rule"
    return f"{prog} is not on the allow-list"


# ----------------------------------------------------------------------------- the hostile index
def _setup_py(name: str, marker_dir: Path) -> str:
    # The build writes the marker (on whichever machine builds it) and fails nothing.
    return (
        f"import os\nopen(os.path.join({str(marker_dir)!r}, {name!r}), 'w').write('built')\n"
        f"from setuptools import setup\nsetup(name={name!r}, version='1.0')\n"
    )


def make_sdist(directory: Path, name: str, marker_dir: Path) -> Path:
    base = f"{name.replace('-', '_')}-1.0"
    path = directory / f"{base}.tar.gz"
    # PKG-INFO with dynamic metadata: only running setup.py could tell its dependencies
    files = {
        f"{base}/PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{base}/setup.py": _setup_py(name, marker_dir),
    }
    with tarfile.open(path, "w:gz") as tf:
        for arc, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(arc)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def make_wheel(directory: Path, name: str, version: str) -> Path:
    import zipfile

    dist = f"{name.replace('-', '_')}-{version}"
    path = directory / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        zf.writestr(
            f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        zf.writestr(f"{dist}.dist-info/RECORD", "")
    return path


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    markers = tmp_path / "markers"
    markers.mkdir()
    files = tmp_path / "index"
    files.mkdir()
    make_sdist(files, "setupbot-probe-sdist", markers)
    make_sdist(files, "setupbot-probe-url", markers)
    archive = make_sdist(tmp_path, "setupbot-probe-file", markers)
    make_wheel(files, "pytest", "8.0.0")  # so the resolution gets as far as the sdist

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            parts = [p for p in self.path.split("/") if p]
            if len(parts) == 2 and parts[0] == "simple":
                name = parts[1].replace("-", "_")
                found = sorted(f.name for f in files.iterdir() if f.name.startswith(name + "-"))
                body = "".join(f'<a href="/files/{f}">{f}</a>' for f in found).encode()
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                self.wfile.write(body)
            elif len(parts) == 2 and parts[0] == "files" and (files / parts[1]).is_file():
                data = (files / parts[1]).read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            else:
                self.send_response(404)
                self.end_headers()

        def do_HEAD(self):  # noqa: N802  (uv asks for range support; none here)
            self.send_response(405)
            self.end_headers()

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"

    vcs = tmp_path / "vcs"
    vcs.mkdir()
    (vcs / "setup.py").write_text(_setup_py("setupbot-probe-vcs", markers))
    git_env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    for argv in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-qm", "x"]):
        subprocess.run(argv, cwd=vcs, check=True, env=git_env, capture_output=True)

    repo = tmp_path / "repo"
    (repo / "localpkg").mkdir(parents=True)
    (repo / "localpkg" / "setup.py").write_text(_setup_py("setupbot-probe-path", markers))
    (repo / "editable").mkdir()
    (repo / "editable" / "setup.py").write_text(_setup_py("setupbot-probe-editable", markers))
    (repo / "requirements.txt").write_text(
        "\n".join(
            [
                "setupbot-probe-sdist",
                f"setupbot-probe-url @ {url}/files/setupbot_probe_url-1.0.tar.gz",
                f"setupbot-probe-file @ file://{archive}",
                f"setupbot-probe-vcs @ git+file://{vcs}",
                "./localpkg",
                "-e ./editable",
                f"--find-links {url}/files/",
                f"--extra-index-url {url}/simple/",
                "",
            ]
        )
    )
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "hostile-host"\nversion = "0"\n'
        f'dependencies = ["setupbot-probe-url @ {url}/files/setupbot_probe_url-1.0.tar.gz"]\n'
    )
    (repo / "tests").mkdir()
    (repo / "tests" / "test_x.py").write_text("def test_x():\n    assert True\n")

    # the operator's index is the hostile one; the bot's environment holds secrets
    monkeypatch.setenv("UV_INDEX_URL", f"{url}/simple/")
    monkeypatch.setenv("PIP_INDEX_URL", f"{url}/simple/")
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN_SENTINEL)
    monkeypatch.setenv("SETUPBOT_LLM_API_KEY", LLM_KEY_SENTINEL)
    monkeypatch.setenv("SOME_OTHER_SECRET", TOKEN_SENTINEL)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))  # nothing built earlier is reused
    yield repo, markers, url
    server.shutdown()


def _assert_clean(calls, markers: Path) -> None:
    assert calls, "the recorder saw no subprocess at all"
    problems = [(why, call[1][:8]) for call in calls if (why := check_allowed(call))]
    assert not problems, problems
    assert not list(markers.iterdir()), f"a build ran on the host: {sorted(p.name for p in markers.iterdir())}"


# ----------------------------------------------------------------------------- the tests
def test_the_allow_list_catches_what_the_old_resolution_did():
    """The checker is not vacuous: an inherited environment, a uv without --no-build, a direct
    URL handed to uv, a shell and a git write are all refused."""
    env = {"PATH": "/usr/bin"}
    assert check_allowed(("Popen", ["/usr/bin/uv", "pip", "compile", "r.in"], env, {})) == "uv without --no-build"
    assert check_allowed(("Popen", ["uv", "pip", "compile", "--no-build", "r.in"], None, {}))
    assert check_allowed(
        ("Popen", ["uv", "pip", "compile", "--no-build", "r.in"], {"PATH": "/bin", "GITHUB_TOKEN": "x"}, {})
    )
    assert check_allowed(
        ("Popen", ["uv", "pip", "compile", "--no-build", "r.in"], env, {"r.in": "x @ file:///tmp/x.tar.gz\n"})
    )
    assert check_allowed(("Popen", ["sh", "-c", "pip install ."], env, {}))
    assert check_allowed(("Popen", ["git", "-C", "/r", "checkout", "x"], env, {}))
    assert check_allowed(("os.system", ["'make'"], None, {}))
    assert check_allowed(("Popen", ["git", "-c", "core.fsmonitor=false", "-C", "/r", "log", "-1"], env, {})) is None


def test_plan_of_a_hostile_repository_runs_nothing_from_it_on_the_host(hostile, capsys):
    from bot.cli import main

    repo, markers, _url = hostile
    with Recorder() as rec:
        code = main(["plan", str(repo), "--python", "3.11"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert any("uv" == os.path.basename(c[1][0]) for c in rec.calls), rec.calls
    _assert_clean(rec.calls, markers)
    # each build-capable requirement was kept away from the host, and the plan says so
    for what in ("setupbot-probe-url @", "setupbot-probe-file @", "setupbot-probe-vcs @"):
        assert any(what in line and "not resolved on the host" in line for line in out.splitlines()), what
    assert any("setupbot-probe-sdist" in line and "resolution never builds" in line for line in out.splitlines()), out
    # paths and options never reach the resolver; the scanner says what became of them
    for what in ("./localpkg", "./editable", "--find-links", "--extra-index-url"):
        assert any(what in line and line.startswith("warning:") for line in out.splitlines()), what


@pytest.mark.docker
@pytest.mark.slow
# with the lock on as well as off: drafting the lock from the plan (and completing the plan's
# resolution in a container, bot.loop.inimage) runs nothing more on the host than the engine's CLI
@pytest.mark.parametrize("lock", [False, True], ids=["no-lock", "lock"])
def test_run_of_a_hostile_repository_runs_nothing_from_it_on_the_host(docker_available, hostile, lock):
    from bot.config import load_settings
    from bot.engine import Engine
    from bot.pipeline import run_pipeline

    repo, markers, _url = hostile
    settings = load_settings(
        repo,
        overrides={
            "llm": {"base_url": ""},  # no LLM: the deterministic path only
            "budgets": {"max_steps": 2, "wall_clock": 400},
            "output": {"lock": lock},
        },
    )
    engine = Engine.from_settings(settings)
    try:
        with Recorder() as rec:
            run_pipeline(
                repo,
                settings,
                engine=engine,
                use_knowledge=False,
                verify=False,
                write=False,
                repository="example/hostile-host",
            )
    finally:
        engine.clean(engine.run_id)
    progs = {os.path.basename(c[1][0]) for c in rec.calls if c[0] == "Popen"}
    assert {"uv", "docker"} <= progs, progs
    _assert_clean(rec.calls, markers)
