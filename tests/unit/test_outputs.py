"""Files in the output folder: markers, hand-written files left alone, schema-valid devcontainer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bot.compile.compose import render_compose
from bot.compile.devcontainer import build_devcontainer, parse_devcontainer, render_devcontainer, validate_devcontainer
from bot.errors import InputError
from bot.evidence.model import ServiceRequirement
from bot.outputs import generate_outputs, has_marker, mark_dockerfile, outputs_from_pipeline, write_outputs
from bot.report import ReportData

PG = ServiceRequirement("postgres", "postgres", "postgres:16", [5432], {"POSTGRES_PASSWORD": "postgres"}, [])
REDIS = ServiceRequirement("redis", "redis", "redis:7", [6379], {}, [])


def gen(**kw):
    kw.setdefault("dockerfile_text", "FROM python:3.11-slim\nRUN pip install .\n")
    return generate_outputs(ReportData(repository="octo/app", test_command=["python", "-m", "pytest"]), **kw)


def test_plain_repo_gets_dockerfile_devcontainer_report_and_plan(tmp_path):
    g = gen(plan_json={"graph": {}})
    assert sorted(g.files) == [
        ".devcontainer/Dockerfile",
        ".devcontainer/devcontainer.json",
        ".devcontainer/setup-report.md",
        ".devcontainer/setupbot-plan.json",
        ".dockerignore",
    ]
    assert all(has_marker(t) for t in g.files.values())
    dc = parse_devcontainer(g.files[".devcontainer/devcontainer.json"])
    validate_devcontainer(dc)
    assert dc["build"] == {"dockerfile": "Dockerfile", "context": ".."}
    assert dc["customizations"]["setupbot"]["testCommand"] == ["python", "-m", "pytest"]
    assert "postCreateCommand" not in dc
    json.loads(g.files[".devcontainer/setupbot-plan.json"])
    result = write_outputs(tmp_path, g)
    assert sorted(result.written) == sorted(g.files)
    assert write_outputs(tmp_path, g).unchanged == result.written


def test_services_switch_to_compose_with_health_checks():
    g = gen(services=[PG, REDIS], app_env={"DATABASE_URL": "postgresql://postgres:postgres@postgres/postgres"})
    dc = parse_devcontainer(g.files[".devcontainer/devcontainer.json"])
    validate_devcontainer(dc)
    assert dc["dockerComposeFile"] == "compose.yaml" and dc["service"] == "app"
    assert dc["runServices"] == ["app", "postgres", "redis"]
    compose = yaml.safe_load(g.files[".devcontainer/compose.yaml"])
    app = compose["services"]["app"]
    assert app["build"] == {"context": "..", "dockerfile": ".devcontainer/Dockerfile"}
    assert app["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert app["environment"]["DATABASE_URL"].startswith("postgresql://")
    assert compose["services"]["postgres"]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    assert compose["services"]["redis"]["healthcheck"]["test"][:2] == ["CMD", "redis-cli"]
    assert set(dc["runServices"]) == set(compose["services"])
    report = g.files[".devcontainer/setup-report.md"]
    assert "docker compose -f .devcontainer/compose.yaml up -d --build --wait" in report
    assert "docker compose -f .devcontainer/compose.yaml exec app python -m pytest" in report


def test_service_names_and_wiring_match_what_verification_used():
    from bot.compile.compose import app_environment

    odd = ServiceRequirement("My DB!", "postgres", "postgres:16", [5432], {}, [])
    g = gen(services=[odd], app_env=app_environment([odd], {"DATABASE_URL": "postgresql://u@localhost:5432/t"}))
    compose = yaml.safe_load(g.files[".devcontainer/compose.yaml"])
    dc = parse_devcontainer(g.files[".devcontainer/devcontainer.json"])
    (name,) = [k for k in compose["services"] if k != "app"]
    assert dc["runServices"] == ["app", name]
    assert compose["services"]["app"]["environment"]["DATABASE_URL"] == f"postgresql://u@{name}:5432/t"


def test_nested_output_folder_points_the_context_at_the_root():
    g = gen(output_dir="env/dev", services=[PG])
    assert yaml.safe_load(g.files["env/dev/compose.yaml"])["services"]["app"]["build"]["context"] == "../.."
    g = gen(output_dir="env/dev")
    assert parse_devcontainer(g.files["env/dev/devcontainer.json"])["build"]["context"] == "../.."


def test_post_create_only_when_asked():
    g = gen(post_create=["python", "-m", "pip", "install", "-e", "."])
    dc = parse_devcontainer(g.files[".devcontainer/devcontainer.json"])
    assert dc["postCreateCommand"] == ["python", "-m", "pip", "install", "-e", "."]
    validate_devcontainer(dc)


def test_hostile_values_stay_data_in_compose():
    evil = ServiceRequirement(
        "db\nx: 1", "postgres", "postgres:16\n  privileged: true", [], {"A": '"; rm -rf /', "B\n": "x"}, []
    )
    text = render_compose(services=[evil], app_env={"K": "v\nprivileged: true"})
    data = yaml.safe_load(text)
    svc = [k for k in data["services"] if k != "app"][0]
    assert "privileged" not in data["services"][svc] and "privileged" not in data["services"]["app"]
    assert data["services"][svc]["image"] == "postgres:16\n  privileged: true"


def test_invalid_devcontainer_is_rejected_before_it_is_written():
    config = build_devcontainer(name="x", test_command=["pytest"])
    config["notAField"] = 1
    with pytest.raises(InputError, match="schema"):
        render_devcontainer(config)


def test_hand_written_files_are_kept_and_the_diff_reported(tmp_path):
    (tmp_path / ".devcontainer").mkdir()
    (tmp_path / ".devcontainer" / "Dockerfile").write_text("FROM my-own\n")
    from bot.outputs import disk_reader

    g = gen(existing=disk_reader(tmp_path))
    assert ".devcontainer/Dockerfile" not in g.files
    diff = g.kept[".devcontainer/Dockerfile"]
    assert "-FROM my-own" in diff and "+FROM python:3.11-slim" in diff
    assert "Hand-written files left alone" in g.files[".devcontainer/setup-report.md"]
    write_outputs(tmp_path, g)
    assert (tmp_path / ".devcontainer" / "Dockerfile").read_text() == "FROM my-own\n"
    # a person takes over a file after generation: still not overwritten
    g2 = gen()
    (tmp_path / ".devcontainer" / "devcontainer.json").write_text("{}\n")
    result = write_outputs(tmp_path, g2)
    assert (tmp_path / ".devcontainer" / "devcontainer.json").read_text() == "{}\n"
    assert ".devcontainer/devcontainer.json" in result.kept


def test_symlinked_output_is_never_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("secret\n")
    repo = tmp_path / "repo"
    (repo / ".devcontainer").mkdir(parents=True)
    (repo / ".devcontainer" / "Dockerfile").symlink_to(outside)
    from bot.outputs import disk_reader

    g = gen(existing=disk_reader(repo))
    result = write_outputs(repo, g)
    assert outside.read_text() == "secret\n"
    # said as a file not written, not as a hand-written one whose diff the report shows
    assert ".devcontainer/Dockerfile" in g.not_written and ".devcontainer/Dockerfile" not in g.kept
    assert "symlink" in result.not_written[".devcontainer/Dockerfile"] and not result.kept
    report = g.files[".devcontainer/setup-report.md"]
    assert "### Files not written" in report and "Hand-written files left alone" not in report
    assert "`.devcontainer/Dockerfile`: it is, or lies under, a symlink" in report


def test_a_symlinked_output_folder_writes_nothing_and_says_why_for_each_file(tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".devcontainer").symlink_to(host, target_is_directory=True)
    from bot.outputs import disk_reader

    g = gen(existing=disk_reader(repo))
    result = write_outputs(repo, g)
    assert list(host.iterdir()) == [] and not result.kept
    assert not [p for p in result.written if p.startswith(".devcontainer")]
    assert {".devcontainer/Dockerfile", ".devcontainer/devcontainer.json"} <= set(result.not_written)
    assert all("symlink" in why for why in result.not_written.values())


def test_a_symlink_made_after_generation_is_not_written_through(tmp_path):
    """The folder became a symlink between generating and writing (the writer checks again)."""
    from bot.outputs import disk_reader

    host = tmp_path / "host"
    host.mkdir()
    repo = tmp_path / "repo"
    repo.mkdir()
    g = gen(existing=disk_reader(repo))
    assert not g.not_written
    (repo / ".devcontainer").symlink_to(host, target_is_directory=True)
    result = write_outputs(repo, g)
    assert list(host.iterdir()) == [] and not [p for p in result.written if p.startswith(".devcontainer")]
    assert ".devcontainer/Dockerfile" in result.not_written and not result.kept


def test_marker_goes_after_parser_directives():
    text = mark_dockerfile("# syntax=docker/dockerfile:1\nFROM x\n")
    assert text.splitlines()[0] == "# syntax=docker/dockerfile:1" and has_marker(text)
    assert mark_dockerfile(text) == text


def test_fingerprint_ignores_the_report_only():
    a, b = gen(), gen()
    b.report.timings = {"build": 99.0}
    assert a.fingerprint == b.fingerprint
    assert gen(dockerfile_text="FROM python:3.13-slim\n").fingerprint != a.fingerprint


def test_every_fixture_repository_gets_a_schema_valid_devcontainer(repos_dir, tmp_path):
    from bot.compile.plan import make_plan

    fixtures = sorted(p for p in repos_dir.iterdir() if p.is_dir())
    assert fixtures, "no fixture repositories"
    for repo in fixtures:
        plan = make_plan(repo, resolve=False, available_pythons=["3.11", "3.13"])
        g = outputs_from_pipeline(repo, plan=plan, repository=f"fixtures/{repo.name}", existing=lambda p: None)
        dc = parse_devcontainer(g.files[".devcontainer/devcontainer.json"])
        validate_devcontainer(dc)
        assert dc["customizations"]["setupbot"]["testCommand"] == plan.test_command, repo.name
        assert has_marker(g.files[".devcontainer/Dockerfile"])
        if plan.services:
            assert ".devcontainer/compose.yaml" in g.files
        again = outputs_from_pipeline(
            repo,
            plan=make_plan(repo, resolve=False, available_pythons=["3.11", "3.13"]),
            repository=f"fixtures/{repo.name}",
            existing=lambda p: None,
        )
        assert again.fingerprint == g.fingerprint, f"{repo.name}: two plans of the same inputs differ"


def test_outputs_from_a_run_record_alone_use_its_final_dockerfile(repos_dir):
    from bot.compile.plan import make_plan
    from bot.loop.records import RunRecord

    repo = repos_dir / "loop-scm"
    plan = make_plan(repo, resolve=False, available_pythons=["3.11", "3.13"])
    final = plan.dockerfile.text + "RUN apt-get install -y libyaml-dev\n"
    record = RunRecord(
        repo=str(repo), run_id="r", status="success", plan=plan.to_json(), dockerfile=final, replay={"ok": True}
    )
    g = outputs_from_pipeline(repo, run_record=record, repository="octo/scm", existing=lambda p: None)
    assert g.files[".devcontainer/Dockerfile"].endswith("RUN apt-get install -y libyaml-dev\n")
    plan_json = json.loads(g.files[".devcontainer/setupbot-plan.json"])["plan"]
    assert "timings" not in plan_json and "repo" not in plan_json
    assert "SETUPTOOLS_SCM_PRETEND_VERSION" in g.files[".devcontainer/setup-report.md"]
    validate_devcontainer(parse_devcontainer(g.files[".devcontainer/devcontainer.json"]))
    with pytest.raises(InputError, match="nothing to write"):
        outputs_from_pipeline(repo, existing=lambda p: None)


@pytest.mark.parametrize("bad", ["../outside", "/etc", ".github/workflows", ".github/workflows/env", "a/../..", "."])
def test_output_dir_from_repository_settings_cannot_escape(bad):
    with pytest.raises(InputError, match="inside the repository"):
        gen(output_dir=bad)


def test_devcontainer_has_a_non_root_user_git_and_the_interpreter_and_matches_the_schema():
    """The devcontainer people expect (issue 16), checked against the official base schema."""
    import jsonschema

    from bot.compile import compile_dockerfile
    from bot.compile.devcontainer import SCHEMA_PATH
    from bot.compile.plan import make_plan
    from bot.graph.mapping import Registry

    schema = json.loads(SCHEMA_PATH.read_text())
    validator = jsonschema.Draft201909Validator(schema)
    plain = parse_devcontainer(gen().files[".devcontainer/devcontainer.json"])
    for config in (
        plain,
        build_devcontainer(name="x", test_command=["pytest"], services=["db"], compose_files=["../docker-compose.yml"]),
    ):
        assert not list(validator.iter_errors(config))
        assert config["remoteUser"] == "dev" and config["updateRemoteUserUID"] is True
        assert (
            config["customizations"]["vscode"]["settings"]["python.defaultInterpreterPath"] == "/usr/local/bin/python"
        )
        assert "ms-python.python" in config["customizations"]["vscode"]["extensions"]
        assert "postCreateCommand" not in config  # nothing must run at create time
    repo = Path(__file__).parents[1] / "fixtures" / "repos" / "plan-imports-only"
    text = compile_dockerfile(
        make_plan(repo, None, available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False)).graph
    ).text
    assert "useradd --create-home dev" in text and "USER " not in text
    assert "--no-install-recommends" in text and "git" in text.split("--no-install-recommends")[1].split("&&")[0]


def test_compose_variant_extends_the_repository_compose_file_instead_of_copying_it():
    from bot.compile.plan import make_plan
    from bot.graph.mapping import Registry

    repo = Path(__file__).parents[1] / "fixtures" / "repos" / "plan-compose"
    p = make_plan(repo, None, available_pythons=["3.11"], resolve=False, registry=Registry(enabled=False))
    g = outputs_from_pipeline(repo, plan=p)
    compose = yaml.safe_load(g.files[".devcontainer/compose.yaml"])
    dc = parse_devcontainer(g.files[".devcontainer/devcontainer.json"])
    # the repository's file comes first; its "app" service is left alone, setupbot's is another
    assert dc["dockerComposeFile"] == ["../docker-compose.yml", "compose.yaml"]
    assert dc["service"] == "devcontainer" and dc["runServices"] == ["devcontainer", "mongo", "broker"]
    services = compose["services"]
    assert set(services) == {"devcontainer", "mongo", "broker"}
    # mongo and broker are extended (a health check), not copied (no image, no environment)
    assert "image" not in services["mongo"] and "environment" not in services["broker"]
    assert services["mongo"]["healthcheck"]["test"][0] == "CMD"
    # paths resolve from the first file's folder: the repository root
    assert services["devcontainer"]["build"] == {"context": ".", "dockerfile": ".devcontainer/Dockerfile"}
    assert services["devcontainer"]["volumes"] == [".:/workspace:cached"]
    assert services["devcontainer"]["depends_on"]["mongo"]["condition"] == "service_healthy"


def test_a_project_that_compiles_its_extension_builds_it_again_when_the_devcontainer_is_created(tmp_path):
    """devcontainer-cext compiles fastsum._speed: the image builds it into its own /workspace,
    which the devcontainer's mount of the host checkout replaces. The devcontainer builds it
    again at create time; a pure-Python project, and an application run from the checkout, do
    not get the command."""
    import shutil

    from bot.atoms import Atom
    from bot.compile.plan import make_plan
    from bot.graph.mapping import Registry
    from bot.outputs import outputs_from_pipeline

    fixtures = Path(__file__).parents[1] / "fixtures" / "repos"

    def config_of(name, *atoms):
        repo = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}"
        shutil.copytree(fixtures / name, repo)
        plan = make_plan(repo, None, available_pythons=["3.13"], resolve=False, registry=Registry(enabled=False))
        for atom in atoms:
            plan.graph.apply_atom(atom, "test")
        out = outputs_from_pipeline(repo, plan=plan, repository=name)
        return parse_devcontainer(out.files[".devcontainer/devcontainer.json"])

    assert config_of("devcontainer-cext")["postCreateCommand"] == [
        "python",
        "-m",
        "pip",
        "install",
        "--no-deps",
        "-e",
        ".",
    ]
    assert "postCreateCommand" not in config_of("plan-imports-only")
    assert "postCreateCommand" not in config_of("devcontainer-cext", Atom("install_deps_only", {}))
