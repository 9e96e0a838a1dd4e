"""What a run left on the engine, for the end-to-end loop tests (test_loop_classes,
test_loop_fixtures)."""

from __future__ import annotations

import subprocess


def _ids(*args: str) -> list[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout.split()


def run_leftovers(engine) -> list[str]:
    """Containers and networks labelled with the engine's run id. The engine's own egress
    network lives as long as the engine (its fixture releases it): it is not something the run
    left behind."""
    label = f"label=setupbot.run={engine.run_id}"
    own = set(_ids("network", "ls", "-q", "--filter", f"name=^{engine._egress_net}$")) if engine._egress_net else set()
    return _ids("ps", "-a", "-q", "--filter", label) + [
        n for n in _ids("network", "ls", "-q", "--filter", label) if n not in own
    ]
