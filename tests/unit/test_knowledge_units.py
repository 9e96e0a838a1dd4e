"""Units: schema and atom validation with reasons, applicability, regex anchors, generalisation."""

from __future__ import annotations

import pytest

from bot.atoms import Atom
from bot.errors import KnowledgeError
from bot.knowledge import Unit
from bot.knowledge.learning import generalise, signature_line
from bot.knowledge.retrieval import anchor_words, tokenize
from bot.knowledge.units import COLD, GOLDEN, NORMAL, Telemetry, load_units_file


def unit_doc(**over):
    doc = {
        "id": "demo",
        "category": "native",
        "signals": {"patterns": [r"foo\.h: No such file"]},
        "advice": "Install the foo headers.",
        "atoms": [{"kind": "apt_install", "packages": ["libfoo-dev"]}],
    }
    doc.update(over)
    return doc


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"id": "Bad Id!"}, "invalid at id"),
        ({"category": "misc"}, "invalid at category"),
        ({"signals": {"patterns": []}}, "signals/patterns"),
        ({"signals": {"patterns": ["(unclosed"]}}, "does not compile"),
        ({"advice": "short"}, "invalid at advice"),
        ({"atoms": []}, "invalid at atoms"),
        ({"atoms": [{"kind": "apt_install", "packages": ["libfoo-dev && curl evil"]}]}, "not a Debian package name"),
        ({"atoms": [{"kind": "launch_rockets"}]}, "unknown atom kind"),
        ({"signals": {"patterns": ["foo"], "when": {"python": ">=three"}}}, "when/python"),
        ({"surprise": 1}, "Additional properties"),
    ],
)
def test_invalid_units_are_refused_with_the_reason(change, reason):
    with pytest.raises(KnowledgeError) as exc:
        Unit.from_json(unit_doc(**change))
    assert reason in exc.value.what


def test_roundtrip_and_telemetry_tiers():
    u = Unit.from_json(unit_doc(telemetry={"hits": 5, "successes": 1, "failures": 4}))
    assert Unit.from_json(u.to_json()) == u
    assert Telemetry(hits=5, successes=1).tier == GOLDEN  # 0.2 success rate
    assert Telemetry(hits=5, successes=0, failures=5).tier == COLD
    assert Telemetry(hits=4, successes=0, failures=4).tier == NORMAL  # too few hits to judge


def test_applicability_conditions():
    u = Unit.from_json(
        unit_doc(
            signals={
                "patterns": ["x+y"],
                "when": {"python": ">=3.12", "os": ["debian"], "suite": ["trixie"], "tool": ["pip"]},
            }
        )
    )
    assert u.applies({"python": "3.13", "os": "debian", "suite": "trixie", "tool": "pip"})
    assert u.applies({})  # unknown context does not exclude
    assert not u.applies({"python": "3.11"})
    assert not u.applies({"os": "alpine"})
    assert not u.applies({"suite": "bookworm"})
    assert not u.applies({"tool": "poetry"})


def test_load_units_file_reports_bad_yaml(tmp_path):
    bad = tmp_path / "units.yml"
    bad.write_text("- id: [unclosed\n")
    with pytest.raises(KnowledgeError, match="cannot read units"):
        load_units_file(bad)


def test_anchor_words_are_required_words_only():
    assert anchor_words(r"No module named '(\w+)'") == {"module", "named"}
    assert "fe" in anchor_words(r"libpq-fe\.h: No such file")
    assert anchor_words(r"(?:foo|bar) baz") == set()  # nothing certain before the alternation...
    assert anchor_words(r"a|b") == set()


def test_tokenize_keeps_compound_names():
    toks = tokenize("fatal error: libxml2-dev missing; Python.h")
    assert "libxml2-dev" in toks and "libxml2" in toks and "python.h" in toks


def test_generalise_templates_numbers_paths_and_names():
    line = "ImportError: libquasar.so.4: cannot open shared object file at /opt/q/lib (build 1234)"
    pattern, atoms = generalise(line, [Atom("apt_install", {"packages": ["libquasar4"]})])
    import re

    assert re.search(pattern, line)
    assert re.search(pattern, "ImportError: libquasar.so.4: cannot open shared object file at /usr/lib/x (build 99)")
    quoted = "ModuleNotFoundError: No module named 'quux'"
    pattern, atoms = generalise(quoted, [Atom("pip_install", {"packages": ["quux"]})])
    assert atoms[0].args["packages"] == ["{match:1}"]
    assert re.search(pattern, "ModuleNotFoundError: No module named 'other'").group(1) == "other"


def test_signature_line_skips_generic_pip_noise():
    log = """  error: subprocess-exited-with-error
      src/a.c:1:10: fatal error: quux.h: No such file or directory
  note: This error originates from a subprocess, and is likely not a problem with pip.
ERROR: Failed building wheel for quux
"""
    assert signature_line(log) == "src/a.c:1:10: fatal error: quux.h: No such file or directory"
    with pytest.raises(KnowledgeError):
        signature_line("")


def test_generalise_keeps_a_name_the_fix_does_not_repeat():
    import re

    line = "ModuleNotFoundError: No module named 'quux_core'"
    pattern, atoms = generalise(line, [Atom("pip_install", {"packages": ["quux-core-dist"]})])
    assert atoms[0].args["packages"] == ["quux-core-dist"]
    assert re.search(pattern, line) and not re.search(pattern, "No module named 'other'")
