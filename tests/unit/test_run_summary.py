"""What `setupbot run` prints of the files it wrote, kept and could not write."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

from bot.commands.run import _print_summary
from bot.loop.records import RunRecord
from bot.outputs import SYMLINK_REASON, WriteResult


def test_a_file_not_written_is_not_called_hand_written(tmp_path, capsys):
    record = RunRecord(repo="r", run_id="x")
    record.status = "success"
    written = WriteResult(
        written=[".dockerignore"],
        kept={".devcontainer/compose.yaml": "--- a\n+++ b\n"},
        not_written={".devcontainer/Dockerfile": SYMLINK_REASON},
    )
    result = SimpleNamespace(run_record=record, verification=None, warnings=[], written=written, records=[])
    files = _print_summary(argparse.Namespace(json=None), tmp_path, result, 0, "")
    out = capsys.readouterr().out
    assert files == [".dockerignore"]
    assert "kept your .devcontainer/compose.yaml (no setupbot marker)" in out
    assert f"did not write .devcontainer/Dockerfile: {SYMLINK_REASON}" in out
    assert "kept your .devcontainer/Dockerfile" not in out
