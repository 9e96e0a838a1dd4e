"""Shared test setup.

Unit tests (everything outside tests/integration) must not start a container by accident: the
guard below makes python-on-whales, the docker SDK and any `docker`/`podman` subprocess fail
loudly there. Integration tests carry the `docker` marker and are collected from
tests/integration only.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REPOS = FIXTURES / "repos"


def _is_integration(request: pytest.FixtureRequest) -> bool:
    # tests/integration is auto-marked; elsewhere (tests/security) a test that needs the engine
    # says so with an explicit @pytest.mark.docker.
    return (
        "integration" in Path(str(request.node.fspath)).parts or request.node.get_closest_marker("docker") is not None
    )


@pytest.fixture(autouse=True)
def _no_engine_in_unit_tests(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    if _is_integration(request):
        yield
        return

    def refuse(*a, **k):
        raise RuntimeError(
            "unit tests must not use the container engine; move this test to tests/integration and mark it `docker`"
        )

    import python_on_whales

    monkeypatch.setattr(python_on_whales.DockerClient, "__init__", refuse)
    try:
        import docker

        monkeypatch.setattr(docker, "from_env", refuse)
        monkeypatch.setattr(docker, "DockerClient", refuse)
    except ImportError:
        pass

    real_popen_init = subprocess.Popen.__init__

    def guarded_popen(self, args, *a, **k):
        first = args[0] if isinstance(args, (list, tuple)) and args else str(args).split(" ")[0]
        if Path(str(first)).name in ("docker", "podman", "docker-compose"):
            refuse()
        return real_popen_init(self, args, *a, **k)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded_popen)
    yield


@pytest.fixture
def repos_dir() -> Path:
    return REPOS


@pytest.fixture
def write_tree(tmp_path: Path):
    """Write ``{relative path: text}`` below ``tmp_path`` (folders made as needed); returns it."""

    def write(files: dict[str, str]) -> Path:
        for rel, text in files.items():
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(text)
        return tmp_path

    return write


@pytest.hookimpl(trylast=True)  # after xdist's own pass over the groups
def pytest_collection_modifyitems(config, items):
    """Every `serial` test joins the xdist group "serial": under `-n N --dist loadgroup` they all
    go to one worker, so two of them never overlap. (CI goes further and runs them after the
    parallel tier, alone: .ci/run. A group keeps them apart from each other, not from the tests
    of the other workers.)

    `--dist loadgroup` schedules by an "@group" suffix each worker adds to the node ids. Up to
    pytest-xdist 3.8 it writes ``item._nodeid``, which pytest 9 no longer reads (the id lives
    in ``item._id``), so the suffix was lost and every group silently ignored: it is added
    here, where this pytest reads it, once."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if item.get_closest_marker("serial") is not None:
            item.add_marker(pytest.mark.xdist_group("serial"))
    if not getattr(config.option, "loadgroup", False):  # set on the workers of --dist loadgroup
        return
    for item in items:
        groups = sorted(
            {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
        )
        if not groups:
            continue
        nodeid = item.nodeid.split("@", 1)[0] if "@" in item.nodeid.rpartition("]")[2] else item.nodeid
        wanted = f"{nodeid}@{'_'.join(groups)}"
        if item.nodeid == wanted:
            continue
        try:
            from _pytest.nodes import coerce_node_id  # pytest >= 9
        except ImportError:
            item._nodeid = wanted
        else:
            item._id = coerce_node_id(wanted)


@pytest.fixture(autouse=True)
def _fresh_hash_memo():
    """Each test starts with no hashes or wheels remembered from another (bot.loop.lock._HASHED,
    bot.graph.resolve._HAS_WHEEL), whose stand-in uv or index may have given others for the
    same pins."""
    from bot.graph import resolve
    from bot.loop import lock

    lock._HASHED.clear()
    resolve._HAS_WHEEL.clear()
    yield
    lock._HASHED.clear()
    resolve._HAS_WHEEL.clear()
