"""The human interface: one exit-code table command by command, `--json [FILE]` documents that
validate against schemas/output, `config show|schema|validate`, `init`."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest
import yaml

from bot import config as cfg
from bot.cli import main
from bot.errors import EXIT_CODES, BelowGate, BudgetExceeded, ConfigError, InputError, Interrupted, SetupFailed

ROOT = Path(__file__).parents[2]
SCHEMAS = ROOT / "schemas"
FIXTURE = ROOT / "tests" / "fixtures" / "repos" / "plan-ci-services"


def test_every_output_schema_is_a_valid_schema_named_after_its_kind():
    files = sorted((SCHEMAS / "output").glob("*.schema.json"))
    assert len(files) >= 12
    for f in files:
        schema = json.loads(f.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        kind = f.name.removesuffix(".schema.json")
        assert schema["properties"]["schema"]["const"] == f"setupbot.{kind}/1"
        assert f"`{kind}`" in (ROOT / "README.md").read_text(), f"README does not list {kind}"


def validate(doc: dict, command: str) -> None:
    schema = json.loads((SCHEMAS / "output" / f"{command}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(doc, schema)
    assert doc["schema"] == f"setupbot.{command}/1"


# ------------------------------------------------------------------ exit codes, command by command


def _result(tmp_path: Path, *, status="success", tier="Mostly", tests=3):
    from bot.verify.record import VerificationRecord

    record = SimpleNamespace(
        status=status,
        degraded=False,
        repairs=[],
        run_id="r1",
        replay={"ok": status == "success", "tests": {"passed": tests, "total": tests}},
        remaining="" if status == "success" else "unresolved: x",
    )
    verification = (
        VerificationRecord(image="img", repo=str(tmp_path), verdict={"tier": tier, "reasons": ["r"]}) if tier else None
    )
    return SimpleNamespace(run_record=record, verification=verification, warnings=[], written=None, records=[])


@pytest.mark.parametrize(
    "status,tier,tests,gate,code",
    [
        ("success", "Full", 5, "Mostly", 0),
        ("success", "Mostly", 5, "Mostly", 0),
        ("success", "Shallow", 5, "Mostly", BelowGate.exit_code),  # was 0 before the shared table
        ("success", "Partial", 5, "Mostly", BelowGate.exit_code),
        ("success", "Partial", 5, "Partial", 0),  # the gate is publish.min_verdict
        ("success", "Full", 0, "Mostly", BelowGate.exit_code),  # no test ran
        ("success", None, 5, "Mostly", BelowGate.exit_code),  # verification did not complete
        ("unresolved", None, 0, "Mostly", SetupFailed.exit_code),
        ("over_budget", None, 0, "Mostly", BudgetExceeded.exit_code),
        ("no_tests", None, 0, "Mostly", BelowGate.exit_code),
        ("interrupted", None, 0, "Mostly", Interrupted.exit_code),
    ],
)
def test_run_exit_code_follows_the_gate(tmp_path, monkeypatch, capsys, status, tier, tests, gate, code):
    import bot.pipeline

    monkeypatch.setattr(
        bot.pipeline, "run_pipeline", lambda *a, **k: _result(tmp_path, status=status, tier=tier, tests=tests)
    )
    monkeypatch.setenv("SETUPBOT_PUBLISH_MIN_VERDICT", gate)
    out = tmp_path / "run.json"
    assert main(["run", str(tmp_path), "--json", str(out)]) == code
    doc = json.loads(out.read_text())
    validate(doc, "run")
    assert doc["exit_code"] == code and doc["gate"] == {"min_verdict": gate, "met": code == 0}
    assert code == 0 or "error" in capsys.readouterr().err


@pytest.mark.parametrize(
    "tier,tests,headline",
    [
        ("Full", 5, "setupbot: success\n"),
        ("Shallow", 5, "setupbot: success (setup replayed, but verdict Shallow is below publish.min_verdict Mostly)"),
        ("Full", 0, "setupbot: success (setup replayed, but the clean replay ran no test)"),
    ],
)
def test_run_headline_does_not_read_as_a_pass_below_the_gate(tmp_path, monkeypatch, capsys, tier, tests, headline):
    import bot.pipeline

    monkeypatch.setattr(
        bot.pipeline, "run_pipeline", lambda *a, **k: _result(tmp_path, status="success", tier=tier, tests=tests)
    )
    monkeypatch.setenv("SETUPBOT_PUBLISH_MIN_VERDICT", "Mostly")
    main(["run", str(tmp_path)])
    assert headline in capsys.readouterr().out


def test_run_with_a_bad_gate_is_a_config_error_before_anything_runs(tmp_path, monkeypatch):
    import bot.pipeline

    monkeypatch.setattr(bot.pipeline, "run_pipeline", lambda *a, **k: pytest.fail("must not run"))
    monkeypatch.setenv("SETUPBOT_PUBLISH_MIN_VERDICT", "Great")
    assert main(["run", str(tmp_path)]) == ConfigError.exit_code


@pytest.mark.parametrize("tier,code", [("Full", 0), ("Mostly", 0), ("Partial", 21), ("Shallow", 21)])
def test_verify_uses_the_same_gate(tmp_path, monkeypatch, capsys, tier, code):
    import bot.verify.run
    from bot.verify.record import VerificationRecord

    seen = {}

    def fake_verify(engine, repo, image, **kw):
        seen["python"] = kw["python"]
        return VerificationRecord(image=image, repo=str(repo), verdict={"tier": tier, "reasons": ["because"]})

    monkeypatch.setattr(bot.verify.run, "verify_environment", fake_verify)
    rc = main(["verify", str(tmp_path), "--image", "img:1", "--no-plan", "--interpreter", "python3.12", "--json", "-"])
    assert rc == code and seen["python"] == "python3.12"
    captured = capsys.readouterr()
    doc = json.loads(captured.out)  # stdout holds the document alone
    validate(doc, "verify")
    assert doc["verdict"] == tier and doc["exit_code"] == code
    assert "verdict:" in captured.err


def test_interrupt_exits_130(tmp_path, monkeypatch, capsys):
    import bot.pipeline

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(bot.pipeline, "run_pipeline", interrupted)
    assert main(["run", str(tmp_path)]) == Interrupted.exit_code == 130
    assert "interrupted" in capsys.readouterr().err


def test_bad_input_and_bad_configuration_codes(tmp_path, capsys):
    assert main(["run", str(tmp_path / "missing")]) == InputError.exit_code == 3
    assert main(["plan", str(tmp_path / "missing"), "--no-resolve"]) == 3
    assert main(["bench"]) == 3  # no repository list
    assert main(["init", str(tmp_path / "missing")]) == 3
    bad = tmp_path / "s.yml"
    bad.write_text("engin: {}\n")
    assert main(["config", "validate", str(bad)]) == ConfigError.exit_code == 2


def test_the_readme_documents_every_exit_code():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    for code in EXIT_CODES:
        assert f"| {code} |" in section, f"exit code {code} missing from the README table"


# ------------------------------------------------------------------ --json


def test_plan_json_dash_goes_to_stdout_and_no_file_named_dash(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["plan", str(FIXTURE), "--no-resolve", "--python", "3.11", "--json", "-"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    validate(doc, "plan")
    assert not (tmp_path / "-").exists()
    assert "FROM python:3.11-slim" in captured.err  # the human view moved to stderr
    # a bare --json means stdout too
    assert main(["plan", str(FIXTURE), "--no-resolve", "--python", "3.11", "--json"]) == 0
    validate(json.loads(capsys.readouterr().out), "plan")


def test_global_flags_mean_the_same_before_and_after_the_command(capsys):
    from bot.cli import build_parser

    parser = build_parser()
    for argv in (["-q", "plan", "."], ["plan", ".", "-q"], ["plan", ".", "--quiet"]):
        args = parser.parse_args(argv)
        assert args.quiet is True and args.verbose is False
    args = parser.parse_args(["clean", "-v"])
    assert args.verbose is True and args.quiet is False
    args = parser.parse_args(["-v", "images", "list"])
    assert args.verbose is True
    with pytest.raises(SystemExit):
        parser.parse_args(["plan", ".", "-q", "-v"])


def test_every_reporting_command_takes_the_same_json_flag():
    from bot.cli import build_parser

    parser = build_parser()
    for argv in (
        ["plan", "."],
        ["run", "."],
        ["verify", ".", "--image", "x"],
        ["clean"],
        ["images", "list"],
        ["images", "bootstrap"],
        ["bench"],
        ["config", "show"],
        ["config", "validate", "f"],
        ["init"],
        ["rollout", "--org", "o", "--ref", "a" * 40],
        ["rollout", "status", "--org", "o"],
        ["knowledge", "list"],
    ):
        assert parser.parse_args(argv + ["--json"]).json == "-"
        assert parser.parse_args(argv + ["--json", "out.json"]).json == "out.json"
        assert parser.parse_args(argv).json is None


def test_subcommands_have_a_description():
    from bot.cli import build_parser

    parser = build_parser()
    assert "Exit codes" in parser.format_help()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, child in sub.choices.items():
        assert child.description, f"`setupbot {name} --help` has no description"


# ------------------------------------------------------------------ config


def test_schema_committed_equals_generated(capsys):
    from bot.commands.config import schema_text

    assert (SCHEMAS / "setupbot.schema.json").read_text() == schema_text(), (
        "run `setupbot config schema -o schemas/setupbot.schema.json`"
    )
    assert main(["config", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(yaml.safe_load(cfg.DEFAULTS_FILE.read_text()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"services": [{"nme": "db"}]}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"publish": {"min_verdict": "Great"}}, schema)


def test_config_show_names_the_layer_of_each_value(tmp_path, monkeypatch, capsys):
    repo = tmp_path / "repo"
    (repo / ".github").mkdir(parents=True)
    # budgets are the operator's: the repository's file cannot set them (SECURITY.md S11)
    (repo / ".github" / "setupbot.yml").write_text("budgets:\n  max_steps: 12\ntarget:\n  collect_only: false\n")
    monkeypatch.setenv("SETUPBOT_ENGINE_MEMORY", "2g")
    monkeypatch.setenv("SETUPBOT_VERSION", "9")  # not a section: ignored, no abort
    monkeypatch.setenv("SETUPBOT_LLM_API_KEY", "sk-secret-value")
    assert main(["config", "show", str(repo), "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    validate(doc, "config")
    rows = {r["key"]: r for r in doc["settings"]}
    assert rows["budgets.max_steps"] == {"key": "budgets.max_steps", "value": 40, "origin": "default"}
    assert [r["key"] for r in doc["refused"]] == ["budgets.max_steps"]
    assert rows["target.collect_only"]["value"] is False
    assert rows["target.collect_only"]["origin"] == f"repository file ({repo / '.github' / 'setupbot.yml'})"
    assert rows["engine.memory"]["origin"] == "environment (SETUPBOT_ENGINE_MEMORY)"
    assert rows["engine.kind"]["origin"] == "default"
    assert rows["llm.api_key"]["value"] == "***"
    assert main(["config", "show", str(repo), "--set", "budgets.max_steps=3", "--json", "-"]) == 0
    rows = {r["key"]: r for r in json.loads(capsys.readouterr().out)["settings"]}
    assert rows["budgets.max_steps"] == {"key": "budgets.max_steps", "value": 3, "origin": "flag"}
    assert main(["config", "show", str(repo), "--set", "budgets.max_stesp=3"]) == 2
    assert "Did you mean 'max_steps'?" in capsys.readouterr().err
    assert main(["config", "show", str(repo)]) == 0
    text = capsys.readouterr().out
    assert "budgets.max_steps" in text and "[environment (SETUPBOT_ENGINE_MEMORY)]" in text
    assert "sk-secret-value" not in text


@pytest.mark.parametrize(
    "text,line,needle",
    [
        (
            "target:\n  env: {}\nservices:\n  - name: db\n    image: postgres:17\n  - nme: cache\n",
            6,
            "unknown key 'nme' in services[1]. Did you mean 'name'?",
        ),
        ("siblings:\n  - name: api\n    pth: ../api\n", 3, "unknown key 'pth' in siblings[0]. Did you mean 'path'?"),
        ("budgets:\n  max_steps: 4\n  max_step: 5\n", 3, "unknown key 'budgets.max_step'. Did you mean 'max_steps'?"),
        ("\n\nengin:\n  kind: docker\n", 3, "unknown section 'engin'. Did you mean 'engine'?"),
        ("budgets:\n  max_steps: many\n", 2, "budgets.max_steps"),
        ("budgets:\n  max_steps: [1\n", 3, "not valid YAML"),
        ("siblings:\n  - name: api\n    path: ../api\n    port: http\n", 4, "siblings[0].port"),
    ],
)
def test_validate_names_the_file_and_line(tmp_path, capsys, text, line, needle):
    f = tmp_path / "setupbot.yml"
    f.write_text(text)
    assert main(["config", "validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert f"{f}:{line}:" in err and needle in err
    assert "defaults.yml" not in err


def test_validate_accepts_a_good_file(tmp_path, capsys):
    f = tmp_path / "setupbot.yml"
    f.write_text(
        "services:\n  - {name: db, image: 'postgres:17', ports: [5432], env: {A: b}}\n"
        "siblings:\n  - {name: api, path: ../api, port: 8000, probe: 'http:/health'}\n"
    )
    assert main(["config", "validate", str(f), "--json", "-"]) == 0
    validate(json.loads(capsys.readouterr().out), "config-validate")


def test_repository_file_errors_are_refused_with_their_line_and_the_rest_is_kept(tmp_path):
    # the repository's file is untrusted input (on a pull request its author wrote it): a key
    # that does not check is refused with its line, and the run goes on with the others
    repo = tmp_path / "repo"
    (repo / ".github").mkdir(parents=True)
    (repo / ".github" / "setupbot.yml").write_text(
        "services:\n  - nme: db\n  - name: cache\n    image: redis:8\n"
        "sandbox:\n  privileged: true\n"
        "target:\n  test_comand: [pytest]\n  test_command: [python, -m, pytest, -x]\n"
    )
    settings = cfg.load_settings(repo, environ={})
    refused = dict(settings.refused)
    assert refused["services[0]"] == (".github/setupbot.yml:2: unknown key 'nme' in services[0]. Did you mean 'name'?")
    assert refused["sandbox"].startswith(".github/setupbot.yml:5: unknown section 'sandbox'.")
    assert refused["target.test_comand"].startswith(".github/setupbot.yml:8: unknown key 'target.test_comand'.")
    assert "Did you mean 'test_command'?" in refused["target.test_comand"]
    assert str(tmp_path) not in " ".join(refused.values())  # no host path in the report
    assert [s["name"] for s in settings.services] == ["cache"]
    assert list(settings.target.test_command) == ["python", "-m", "pytest", "-x"]
    # the report the maintainer reads lists each refusal with its line
    from bot.report import ReportData, render_report

    report = ReportData(repository="repo", refused_config=[f"{k}: {why}" for k, why in settings.refused])
    text = render_report(report)
    assert "### Refused configuration (3)" in text
    assert "- sandbox: .github/setupbot.yml:5: unknown section 'sandbox'." in text


def test_an_entry_refused_for_its_service_leaves_the_next_entrys_index_and_line(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".github").mkdir(parents=True)
    (repo / ".github" / "setupbot.yml").write_text(
        "services:\n  - name: db\n    image: evil/postgres:17\n  - nme: cache\n  - name: cache\n    image: redis:8\n"
    )
    settings = cfg.load_settings(repo, environ={})
    refused = dict(settings.refused)
    assert refused["services[0]"].startswith("image 'evil/postgres:17' is not one of the catalogue's images")
    assert refused["services[1]"] == ".github/setupbot.yml:4: unknown key 'nme' in services[1]. Did you mean 'name'?"
    assert [s["name"] for s in settings.services] == ["cache"]


@pytest.mark.parametrize(
    "text,needle",
    [
        ("target: [1\n", "not valid YAML"),
        ("- just\n- a list\n", "the top level must be a mapping"),
        (b"target:\n  env: {A: \xff}\n", "line 2 is not valid UTF-8"),
    ],
)
def test_an_unreadable_repository_file_is_refused_whole_and_the_run_goes_on(tmp_path, text, needle):
    repo = tmp_path / "repo"
    (repo / ".github").mkdir(parents=True)
    f = repo / ".github" / "setupbot.yml"
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    settings = cfg.load_settings(repo, environ={})
    (key, why), *rest = settings.refused
    assert not rest and key == ".github/setupbot.yml" and needle in why
    assert settings.target == cfg.load_settings(None, environ={}).target  # the defaults stand


# ------------------------------------------------------------------ init


def test_init_does_not_write_through_a_symlinked_github_folder(tmp_path, capsys):
    repo, host = tmp_path / "repo", tmp_path / "host"
    repo.mkdir()
    host.mkdir()
    (repo / ".github").symlink_to(host, target_is_directory=True)
    assert main(["init", str(repo), "--ref", "a" * 40, "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    validate(doc, "init")
    assert {f["action"] for f in doc["files"]} == {"refused"}
    assert list(host.iterdir()) == []


def test_init_writes_the_workflow_and_a_commented_settings_file_once(tmp_path, capsys):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/trunk\n")
    assert main(["init", str(tmp_path), "--ref", "a" * 40, "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    validate(doc, "init")
    assert {f["action"] for f in doc["files"]} == {"created"}
    workflow = tmp_path / ".github" / "workflows" / "setupbot.yml"
    settings = tmp_path / ".github" / "setupbot.yml"
    wf = yaml.safe_load(workflow.read_text())
    assert wf[True]["push"]["branches"] == ["trunk"]  # PyYAML reads `on:` as True
    assert wf["jobs"]["setupbot"]["uses"].endswith("@" + "a" * 40)
    text = settings.read_text()
    assert text.startswith("# yaml-language-server: $schema=")
    assert "# extra environment variables for the tests" in text  # comments from the defaults
    assert set(yaml.safe_load(text)) == {"target", "services", "siblings", "output"}
    cfg.merge_layer({}, *cfg.read_config_file(settings)[:1], str(settings))  # a valid settings file
    schema = json.loads((SCHEMAS / "setupbot.schema.json").read_text())
    jsonschema.validate(yaml.safe_load(text), schema)
    # a second run changes nothing, and a file of the user's is left alone
    settings.write_text("target: {collect_only: false}\n")
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (workflow, settings)}
    assert main(["init", str(tmp_path)]) == 0
    assert "exists, left as it is" in capsys.readouterr().out
    assert before == {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (workflow, settings)}
