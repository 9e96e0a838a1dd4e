"""What a first run on modelcontextprotocol/python-sdk (a uv workspace pool repository) showed:
a `.python-version` pin this engine does not offer was dropped for the newest Python, whose
wheels the lock's pydantic-core release does not have; uv's failed sdist build went
unclassified; and debconf's "TERM is not set" line was taken for the cause and "repaired"."""

from __future__ import annotations

from bot.evidence.model import PythonConstraint, Source
from bot.graph.runtime import choose_python
from bot.loop.diagnose import diagnose
from bot.loop.repair import rule_candidates

UV_LOCKED_BUILD = """\
debconf: (TERM is not set, so the dialog frontend is not usable.)
Resolved 61 packages in 2ms
  × Failed to build `pydantic-core==2.18.3`
  ├─▶ The build backend returned an error
  ╰─▶ Call to `maturin.build_wheel` failed (exit status: 1)
      error: could not compile `target-lexicon` (build script) due to 1 previous error
      💥 maturin failed
hint: `pydantic-core` (v2.18.3) was included because `mcp` (v1.1.1.dev0) depends on `pydantic` (v2.7.2) which depends on `pydantic-core`
hint: Build failures usually indicate a problem with the package or the build environment
"""


def kinds(text):
    return [(s.kind, s.key) for s in diagnose(text)]


def test_a_failed_build_of_a_locked_sdist_is_named_and_debconf_is_not_a_cause():
    assert kinds(UV_LOCKED_BUILD) == [("locked_build_failed", "pydantic-core==2.18.3")]


def test_debconf_alone_is_nothing_but_a_real_unset_variable_still_is():
    assert kinds("debconf: (TERM is not set, so the dialog frontend is not usable.)\n") == []
    assert kinds("RuntimeError: API_TOKEN is not set\n") == [("missing_env", "API_TOKEN")]
    assert kinds("'DATABASE_URL' environment variable is not set\n") == [("missing_env", "DATABASE_URL")]


def test_the_included_hint_without_a_build_failure_is_not_a_locked_build():
    # uv prints the same "was included because" help under a resolution failure
    text = "hint: `numpy` (v1.26.4) was included because `app` depends on `numpy`\nNo solution found\n"
    assert ("locked_build_failed", "numpy==1.26.4") not in kinds(text)


def test_a_precise_cause_in_the_same_log_wins():
    text = UV_LOCKED_BUILD + "src/psycopg.c:1:10: fatal error: pg_config.h: No such file or directory\n"
    assert [k for k, _ in kinds(text)] == ["missing_header"]


def test_the_repair_is_each_older_offered_python_newest_first(tmp_path):
    sig = diagnose(UV_LOCKED_BUILD)[0]
    found = rule_candidates(sig, repo=tmp_path, python="3.13", available_pythons=["3.10", "3.11", "3.13"])
    assert [c.atoms[0].args["version"] for c in found] == ["3.11", "3.10"]
    assert "the lock pins pydantic-core==2.18.3" in found[0].why
    assert rule_candidates(sig, repo=tmp_path, python="3.11", available_pythons=["3.11", "3.13"]) == []


S = Source(".python-version", 1)


def test_an_unoffered_pin_takes_the_nearest_offered_python():
    req = PythonConstraint("requires", ">=3.10", Source("pyproject.toml", 10))
    tested = PythonConstraint("tested", "3.13", Source("pyproject.toml", 26))
    choice = choose_python([req, tested, PythonConstraint("pin", "3.10", S)], ["3.11", "3.13"])
    assert choice.version == "3.11" and "nearest offered to Python 3.10" in choice.reason
    assert any("3.10 is pinned but not offered" in w.message for w in choice.warnings)


def test_a_tie_takes_the_newer_and_a_pin_outside_the_requirement_the_nearest_allowed():
    assert choose_python([PythonConstraint("pin", "3.12", S)], ["3.11", "3.13"]).version == "3.13"
    req = PythonConstraint("requires", ">=3.11", Source("pyproject.toml", 3))
    assert choose_python([req, PythonConstraint("pin", "3.8", S)], ["3.9", "3.11", "3.13"]).version == "3.11"


def test_an_offered_pin_is_still_taken_as_it_is():
    assert choose_python([PythonConstraint("pin", "3.11", S)], ["3.11", "3.13"]).reason.startswith("pinned by")
