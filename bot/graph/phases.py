"""Where each kind of node sits in the compiled Dockerfile. Layers go from what changes least
to what changes most, so a rebuild after a source edit reuses the dependency layers:
base image -> environment -> system packages -> dependency manifests and dependencies ->
source -> project install -> test tools -> build-time commands."""

from __future__ import annotations

PHASES = {
    "from": 0,
    "env": 10,
    "constraint": 15,
    "apt": 20,
    "build-tool": 30,
    "pip": 40,
    "repair-pip": 45,
    "project": 60,
    "tool": 70,
    "run": 80,
    None: 90,
}


def phase_of(node) -> int:
    return PHASES.get(node.action, 90)
