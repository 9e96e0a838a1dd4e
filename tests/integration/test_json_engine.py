"""`--json` of the commands that need the engine: `images list` and `clean` validate against
their schemas (schemas/output)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema

from bot.config import load_settings
from bot.engine import Engine

ROOT = Path(__file__).parents[2]


def _cli(*argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETUPBOT_") or k.startswith("SETUPBOT_ENGINE_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "bot", *argv], capture_output=True, text=True, env=env, timeout=300)


def _validate(text: str, kind: str) -> dict:
    doc = json.loads(text)
    jsonschema.validate(doc, json.loads((ROOT / "schemas" / "output" / f"{kind}.schema.json").read_text()))
    return doc


def test_images_list_json(docker_available):
    r = _cli("images", "list", "--json", "-")
    assert r.returncode == 0, r.stderr
    doc = _validate(r.stdout, "images")
    assert doc["action"] == "list" and "python:" in r.stderr  # human lines moved to stderr


def test_clean_json_counts_what_it_removed(docker_available):
    engine = Engine.from_settings(load_settings(None))
    engine.start_container("debian:bookworm-slim", "held", command=["sleep", "120"])
    r = _cli("clean", "--run-id", engine.run_id, "--json", "-")
    assert r.returncode == 0, r.stderr
    doc = _validate(r.stdout, "clean")
    assert doc["run_id"] == engine.run_id and doc["removed"]["containers"] == 1
