"""One LABEL instruction for the run's labels, appended to the transient Dockerfile copy."""

from __future__ import annotations

from bot.engine.core import label_instruction

LABELS = {"setupbot": "1", "setupbot.run": "20261205-ab12", "setupbot.owner": "vm/host/123/456"}


def test_every_label_in_one_instruction_for_the_last_stage():
    line = label_instruction("FROM a AS env\nRUN true\nFROM env AS dev\n", LABELS)
    assert line == 'LABEL "setupbot"="1" "setupbot.run"="20261205-ab12" "setupbot.owner"="vm/host/123/456"\n'


def test_no_labels_no_instruction():
    assert label_instruction("FROM a\n", {}) == ""


def test_a_trailing_continuation_keeps_the_flags():
    # an appended line would become part of the RUN
    assert label_instruction("FROM a\nRUN true \\\n", LABELS) == ""
    assert label_instruction("# escape=`\nFROM a\nRUN true `\n", LABELS) == ""


def test_a_value_the_dockerfile_would_read_otherwise_keeps_the_flags():
    for value in ("$HOME", 'a"b', "a\\b", "a\nb", "a`b"):
        assert label_instruction("FROM a\n", {"setupbot.owner": value}) == "", value
