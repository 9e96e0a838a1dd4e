"""The programs setupbot runs inside containers are package files, read as text."""

import ast
from pathlib import Path

import pytest

from bot import programs
from bot.compile.compose import app_command
from bot.services import FORWARDER
from bot.verify.mutation import MUTATE
from bot.verify.prosecutor import IMPORT_PROBE


@pytest.mark.parametrize("name", programs.PROGRAMS)
def test_each_program_is_a_file_that_compiles(name):
    text = programs.source(name)
    assert text == (Path(programs.__file__).parent / f"{name}.py").read_text(encoding="utf-8")
    compile(text, name, "exec")
    # standard library only: they run on whatever interpreter the analysed repository uses
    imported = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported and "bot" not in imported, f"{name} imports setupbot itself"


def test_the_modules_run_the_packaged_text():
    assert FORWARDER == programs.source("forwarder")
    assert IMPORT_PROBE == programs.source("import_probe") and "SETUPBOT-IMPORTS" in IMPORT_PROBE
    assert MUTATE == programs.source("mutate") and "SETUPBOT-MUTATION" in MUTATE
    assert app_command(["5432:db:5432"])[3].strip() == FORWARDER.strip()


def test_an_unknown_program_is_refused():
    with pytest.raises(KeyError):
        programs.source("../cli")
