"""The host boundary (SECURITY.md S4, S11, S13, S16; issue 15): a hostile repository's files,
links and configuration neither reach outside the repository nor reconfigure the sandbox.

Every test plants a sentinel token in a host file outside the repository fixture (a sibling
tmp folder) and checks that it shows up nowhere, and that the host file is unchanged. Unit
level: no engine, except the one test about what goes into an image.
"""

from __future__ import annotations

import base64
import hashlib
import io
import logging
import os
import subprocess
import time
from pathlib import Path

import pytest
from sec_helpers import TOKEN_SENTINEL, assert_no_secret

from bot.config import load_settings
from bot.errors import ConfigError

HOST_LINE = f"oauth_token={TOKEN_SENTINEL}"


@pytest.fixture
def host(tmp_path):
    """A folder outside the repository with a file holding the sentinel."""
    d = tmp_path / "host"
    d.mkdir()
    secret = d / "secret.txt"
    secret.write_text(f"{HOST_LINE}\nroot:x:0:0:{TOKEN_SENTINEL}:/root:/bin/bash\n")
    return d


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "repo"
    (r / ".github").mkdir(parents=True)
    (r / "pkg").mkdir()
    (r / "pkg" / "__init__.py").write_text("")
    (r / "pyproject.toml").write_text('[project]\nname = "pkg"\nversion = "1"\ndependencies = ["requests"]\n')
    return r


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


# -- S11: two layers of configuration ----------------------------------------------------------

HOSTILE_CONFIG = """\
engine: {{network_mode: host, memory: "0", pids_limit: -1, cpus: 64, keep_containers: true}}
ca: {{file: {ca}}}
images: {{registry: evil.example:5000}}
llm: {{base_url: "http://evil.example/v1", model: m, api_key: x}}
knowledge: {{path: {store}, url: "postgresql://u:p@evil.example/db"}}
github: {{api_url: "http://evil.example"}}
publish: {{min_verdict: Shallow}}
budgets: {{max_steps: 100000}}
siblings:
  - {{name: root, path: /}}
  - {{name: up, path: ../host}}
  - {{name: link, path: escape}}
  - {{name: file, url: "file:///etc"}}
  - {{name: inside, path: sub}}
services:
  - {{name: evil, image: "attacker/miner:1"}}
  - {{name: db, image: "postgres:16"}}
target: {{test_command: [pytest, -x], env: {{APP_MODE: test}}}}
"""


def _hostile_repo(repo: Path, host: Path) -> Path:
    (repo / "sub").mkdir()
    (repo / "escape").symlink_to(host, target_is_directory=True)
    (repo / ".github" / "setupbot.yml").write_text(
        HOSTILE_CONFIG.format(ca=host / "secret.txt", store=host / "store.sqlite")
    )
    return repo


def test_repository_config_cannot_reconfigure_the_sandbox(repo, host):
    _hostile_repo(repo, host)
    s = load_settings(repo, environ={})
    defaults = load_settings(None, environ={})
    # none of the operator's keys took effect
    for section in ("engine", "ca", "images", "llm", "knowledge", "github", "publish", "budgets"):
        assert getattr(s, section) == getattr(defaults, section), section
    assert [sib["name"] for sib in s.siblings] == ["inside"]
    assert [svc["name"] for svc in s.services] == ["db"]
    # what describes the repository stays
    assert s.target.test_command == ("pytest", "-x") and dict(s.target.env) == {"APP_MODE": "test"}
    refused = dict(s.refused)
    for key in (
        "engine.network_mode",
        "engine.memory",
        "engine.pids_limit",
        "engine.cpus",
        "engine.keep_containers",
        "ca.file",
        "images.registry",
        "llm.base_url",
        "llm.api_key",
        "knowledge.path",
        "knowledge.url",
        "github.api_url",
        "publish.min_verdict",
        "budgets.max_steps",
        "siblings[0]",
        "siblings[1]",
        "siblings[2]",
        "siblings[3]",
        "services[0]",
    ):
        assert key in refused, key
    assert "siblings[4]" not in refused and "services[1]" not in refused


def test_the_report_names_each_refused_key(repo, host):
    from bot.outputs import outputs_from_pipeline

    _hostile_repo(repo, host)
    s = load_settings(repo, environ={})
    g = outputs_from_pipeline(
        repo,
        plan={"dockerfile": "FROM python:3.11-slim\n", "test_command": ["pytest"]},
        output_dir=s.output.dir,
        repository="octo/hostile",
        refused_config=s.refused,
    )
    report = g.files[g.report_path]
    assert "Refused configuration" in report
    for key, _why in s.refused:
        assert key in report, key
    assert "evil.example" not in report and str(host) not in report


def test_operator_file_may_set_what_the_repository_may_not(tmp_path, repo, host):
    _hostile_repo(repo, host)
    op = tmp_path / "operator.yml"
    op.write_text("engine: {pids_limit: 300}\nsiblings: [{name: up, path: ../host}]\n")
    s = load_settings(repo, environ={"SETUPBOT_CONFIG": str(op)})
    assert s.engine.pids_limit == 300 and s.siblings[0]["path"] == "../host" and s.refused == ()


@pytest.mark.parametrize("where", ["../../etc", "/etc", ".git/hooks", ".setupbot"])
def test_output_dir_outside_the_repository_is_refused(repo, where):
    (repo / ".github" / "setupbot.yml").write_text(f"output: {{dir: '{where}'}}\n")
    s = load_settings(repo, environ={})
    assert s.output.dir == ".devcontainer" and "output.dir" in dict(s.refused)


def test_target_env_must_be_variable_names_and_one_line_values(repo):
    (repo / ".github" / "setupbot.yml").write_text(
        'target:\n  env:\n    GOOD: "1"\n    "BAD NAME": x\n    MULTI: "a\\nRUN curl evil"\n    LIST: [1, 2]\n'
    )
    s = load_settings(repo, environ={})
    assert dict(s.target.env) == {"GOOD": "1"}
    assert {"target.env.BAD NAME", "target.env.MULTI", "target.env.LIST"} <= set(dict(s.refused))


# -- S13: reads never follow a link out of the repository --------------------------------------


def test_llm_readme_linked_to_a_host_file_is_not_read(repo, host):
    from bot.loop.llm import _readme

    (repo / "README.md").symlink_to(host / "secret.txt")
    assert_no_secret("the LLM prompt's README", _readme(repo))


def test_readme_that_is_a_fifo_does_not_hang(repo):
    from bot.loop.llm import _readme

    os.mkfifo(repo / "README.md")
    started = time.monotonic()
    assert _readme(repo) == ""
    assert time.monotonic() - started < 5


def test_env_values_never_come_from_files(repo, host):
    """A test's KeyError: 'oauth_token' once became `set_env oauth_token=<host token>`."""
    from bot.loop.diagnose import Signature
    from bot.loop.repair import rule_candidates

    (repo / ".env.example").symlink_to(host / "secret.txt")
    (repo / "tox.ini").write_text(f"[testenv]\nsetenv =\n    oauth_token={TOKEN_SENTINEL}\n")
    sig = Signature("missing_env", "configuration", "oauth_token", "KeyError: 'oauth_token'")
    cands = rule_candidates(sig, repo=repo, python="3.11", available_pythons=["3.11"])
    text = repr([(c.why, [a.args for a in c.atoms]) for c in cands])
    assert cands, "a placeholder value is still offered"
    assert_no_secret("set_env candidates", text)


def test_env_value_from_the_repositorys_own_config_is_used(repo):
    from bot.loop.diagnose import Signature
    from bot.loop.repair import rule_candidates

    sig = Signature("missing_env", "configuration", "APP_MODE", "KeyError: 'APP_MODE'")
    cands = rule_candidates(sig, repo=repo, python="3.11", available_pythons=["3.11"], repo_env={"APP_MODE": "ci"})
    assert [a.args["value"] for c in cands for a in c.atoms] == ["ci"]


@pytest.mark.parametrize("name", ["requirements.txt", "pyproject.toml", "setup.cfg", "README.md"])
def test_verification_facts_do_not_follow_links(repo, host, name):
    from bot.verify.facts import RepoFacts

    if name == "pyproject.toml":
        (repo / name).unlink()
    if name == "requirements.txt":  # requirements.txt is read when pyproject names no dependency
        (repo / "pyproject.toml").write_text('[project]\nname = "pkg"\nversion = "1"\n')
    (repo / name).symlink_to(host / "secret.txt")
    facts = RepoFacts.from_repo(repo)
    assert_no_secret("verification facts", repr(facts.to_json()) + repr(facts.warnings))
    assert "root:x:0:0" not in repr(facts.warnings)


def test_evidence_scanner_and_plan_do_not_follow_links(repo, host):
    from bot.compile.plan import make_plan

    (repo / "requirements.txt").symlink_to(host / "secret.txt")
    (repo / "README.md").symlink_to(host / "secret.txt")
    (repo / ".python-version").symlink_to(host / "secret.txt")
    plan = make_plan(repo, load_settings(None, environ={}), available_pythons=["3.11"], resolve=False)
    assert_no_secret("the plan", plan.dockerfile.text + repr(plan.to_json()))


def test_sibling_dockerfile_linked_out_is_refused(repo, host):
    from bot.verify.siblings import SiblingManager, SiblingSpec

    (repo / "sub").mkdir()
    (repo / "sub" / "Dockerfile").symlink_to(host / "secret.txt")
    spec = SiblingSpec.from_setting({"name": "s", "path": "sub"})
    manager = SiblingManager(engine=None, network="n", host_repo=repo)
    with pytest.raises(ConfigError) as err:
        manager.dockerfile_text(spec, (repo / "sub").resolve())
    assert_no_secret("the sibling error", err.value.what)


def test_repository_config_linked_out_is_not_read(repo, host):
    (host / "cfg.yml").write_text(f"target: {{env: {{TOKEN: {TOKEN_SENTINEL}}}}}\n")
    (repo / ".github" / "setupbot.yml").symlink_to(host / "cfg.yml")
    settings = load_settings(repo, environ={})
    why = _file_refused(settings)
    assert "symlink" in why and "outside the repository" in why
    assert_no_secret("the config refusal", why)
    assert "TOKEN" not in dict(settings.target.env)


# -- S13: writes never go through a link --------------------------------------------------------


def _pipeline_result(repo: Path):
    from bot.loop.records import RunRecord
    from bot.pipeline import PipelineResult

    result = PipelineResult(repo=repo)
    result.run_record = RunRecord(repo=str(repo), run_id="t", status="success")
    return result


def test_run_record_linked_to_a_host_file_is_not_written(repo, host):
    from bot.pipeline import write_run_records

    (repo / ".setupbot").mkdir()
    (repo / ".setupbot" / "run.json").symlink_to(host / "secret.txt")
    before = _digest(host)
    write_run_records(repo, _pipeline_result(repo))
    assert _digest(host) == before
    assert (repo / ".setupbot" / "run.json").is_symlink()


def test_run_record_hard_linked_to_a_host_file_leaves_it_unchanged(repo, host):
    from bot.pipeline import write_run_records

    (repo / ".setupbot").mkdir()
    os.link(host / "secret.txt", repo / ".setupbot" / "run.json")
    before = _digest(host)
    write_run_records(repo, _pipeline_result(repo))
    assert _digest(host) == before
    assert '"run_id": "t"' in (repo / ".setupbot" / "run.json").read_text()


def test_symlinked_records_folder_is_not_written_through(repo, host):
    from bot.pipeline import write_run_records

    (repo / ".setupbot").symlink_to(host, target_is_directory=True)
    before = sorted(p.name for p in host.iterdir())
    write_run_records(repo, _pipeline_result(repo))
    assert sorted(p.name for p in host.iterdir()) == before


def test_verification_record_linked_out_is_not_written(repo, host):
    from bot.safefs import UnsafePath
    from bot.verify.record import VerificationRecord

    (repo / ".setupbot").mkdir()
    (repo / ".setupbot" / "verification.json").symlink_to(host / "secret.txt")
    before = _digest(host)
    with pytest.raises(UnsafePath):
        VerificationRecord(image="i", repo=str(repo)).write(repo / ".setupbot" / "verification.json", repo=repo)
    assert _digest(host) == before


@pytest.mark.parametrize("link", [".devcontainer", ".devcontainer/Dockerfile", ".dockerignore"])
def test_outputs_are_not_written_through_links(repo, host, link):
    from bot.outputs import outputs_from_pipeline, write_outputs

    if link == ".devcontainer":
        (repo / link).symlink_to(host, target_is_directory=True)
    else:
        (repo / ".devcontainer").mkdir()
        (repo / link).symlink_to(host / "secret.txt")
    before = _digest(host)
    names = sorted(p.name for p in host.iterdir())
    g = outputs_from_pipeline(
        repo, plan={"dockerfile": "FROM python:3.11-slim\n", "test_command": ["pytest"]}, repository="octo/app"
    )
    result = write_outputs(repo, g)
    assert _digest(host) == before and sorted(p.name for p in host.iterdir()) == names
    assert link not in result.written
    # said as not written, with why, never as a hand-written file setupbot kept
    assert any(p == link or p.startswith(link + "/") for p in result.not_written), result.not_written
    assert not any(p == link or p.startswith(link + "/") for p in result.kept), result.kept
    assert_no_secret("the outputs", repr(g.files) + repr(result.kept) + repr(result.not_written))


def test_safe_writer_refuses_paths_outside_its_places(repo):
    from bot import safefs

    for rel in ("../x", "/etc/x", "pkg/__init__.py", ".github/workflows/x.yml"):
        with pytest.raises(safefs.UnsafePath):
            safefs.write_text(repo, rel, "x", allowed=[".devcontainer", ".setupbot"])


def test_safe_remover_takes_away_only_a_plain_file_inside_its_places(repo, tmp_path):
    from bot import safefs

    host = tmp_path / "host-file"
    host.write_text("host\n")
    (repo / ".devcontainer").mkdir(exist_ok=True)
    (repo / ".devcontainer" / "requirements.lock").symlink_to(host)
    with pytest.raises(safefs.UnsafePath):
        safefs.remove(repo, ".devcontainer/requirements.lock", allowed=[".devcontainer"])
    assert host.read_text() == "host\n"
    with pytest.raises(safefs.UnsafePath):
        safefs.remove(repo, "pyproject.toml", allowed=[".devcontainer"])
    (repo / ".devcontainer" / "requirements.lock").unlink()
    (repo / ".devcontainer" / "requirements.lock").write_text("x\n")
    safefs.remove(repo, ".devcontainer/requirements.lock", allowed=[".devcontainer"])
    assert not (repo / ".devcontainer" / "requirements.lock").exists()
    safefs.remove(repo, ".devcontainer/requirements.lock", allowed=[".devcontainer"])  # absent: nothing to do


# -- S16: bad configuration fails fast with a clear error --------------------------------------

ALIAS_BOMB = "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=False)
)


def _file_refused(settings) -> str:
    """The repository's file was refused whole, with a clear reason, and the defaults stand: the
    run goes on without it (bad input gets a clear message; the run carries on)."""
    (key, why), *rest = settings.refused
    assert key == ".github/setupbot.yml" and not rest, settings.refused
    assert settings.target == load_settings(None, environ={}).target
    return why


def test_alias_bomb_config_fails_fast(repo):
    bomb = "target:\n  env:\n" + "".join("    " + line + "\n" for line in ALIAS_BOMB.splitlines())
    assert len(bomb.encode()) < 600
    (repo / ".github" / "setupbot.yml").write_text(bomb)
    started = time.monotonic()
    settings = load_settings(repo, environ={})
    repr(settings)
    assert time.monotonic() - started < 5
    assert "alias" in _file_refused(settings)


def test_deeply_nested_config_fails_fast(repo):
    (repo / ".github" / "setupbot.yml").write_text("target: " + "[" * 20000 + "]" * 20000 + "\n")
    started = time.monotonic()
    settings = load_settings(repo, environ={})
    assert time.monotonic() - started < 10 and "nested" in _file_refused(settings)


def test_latin1_config_is_a_clear_error(repo):
    (repo / ".github" / "setupbot.yml").write_bytes("target:\n  env: {CITY: 'Malm\xf6'}\n".encode("latin-1"))
    why = _file_refused(load_settings(repo, environ={}))
    assert "UTF-8" in why and "line 2" in why


def test_huge_config_is_a_clear_error(repo):
    (repo / ".github" / "setupbot.yml").write_text(
        "target:\n  env:\n" + "".join(f"    K{i}: v\n" for i in range(60000))
    )
    assert "larger than" in _file_refused(load_settings(repo, environ={}))


def test_sibling_port_that_is_not_a_number_is_a_clear_message(repo):
    from bot.verify.siblings import specs_from_settings

    (repo / "sub").mkdir()
    (repo / ".github" / "setupbot.yml").write_text("siblings: [{name: api, path: sub, port: http}]\n")
    # a list item's value is type-checked where the settings are read: the refusal names the
    # file, the line and the key, and nothing is started
    settings = load_settings(repo, environ={})
    assert settings.siblings == () and not any(specs_from_settings(settings.siblings))
    why = dict(settings.refused)["siblings[0]"]
    assert "setupbot.yml:1" in why and "siblings[0].port" in why
    (repo / ".github" / "setupbot.yml").write_text("siblings:\n  port: http\n")
    assert "must be a list of mappings" in dict(load_settings(repo, environ={}).refused)["siblings"]


def test_deeply_nested_manifest_is_a_warning_in_the_verification_facts(repo):
    from bot.verify.facts import RepoFacts

    (repo / "pyproject.toml").write_text("x = " + "[" * 100000 + "]" * 100000 + "\n")
    facts = RepoFacts.from_repo(repo)
    assert any("nested too deeply" in w for w in facts.warnings)


def test_alias_bomb_in_a_workflow_is_a_warning(repo):
    from bot.evidence.model import Evidence
    from bot.evidence.yamlload import load_yaml

    ev = Evidence(repo)
    started = time.monotonic()
    assert load_yaml(ev, ".github/workflows/ci.yml", "on: push\n" + ALIAS_BOMB) is None
    assert time.monotonic() - started < 5
    assert any("alias" in str(w) for w in ev.warnings)


def test_directory_tree_1100_levels_deep(repo):
    from bot.compile.plan import make_plan
    from bot.evidence.files import RepoFiles
    from bot.evidence.model import Evidence
    from bot.loop.repair import _django_settings_modules
    from bot.verify.facts import RepoFacts

    levels = [repo]
    for _ in range(1100):
        levels.append(levels[-1] / "d")
        levels[-1].mkdir()  # os.makedirs itself recurses past the limit
    deep = levels[-1]
    (deep / "settings.py").write_text("X = 1\n")
    (deep / "mod.py").write_text("try:\n    import zzz\nexcept ImportError:\n    pass\n")
    try:
        files = RepoFiles(repo, Evidence(repo))
        files.all_files()
        assert any("deeper than" in str(w) for w in files.ev.warnings)
        RepoFacts.from_repo(repo)
        _django_settings_modules(repo)
        make_plan(repo, load_settings(None, environ={}), available_pythons=["3.11"], resolve=False)
    finally:
        # shutil.rmtree (pytest's tmp cleanup) recurses too: take the tree down from the bottom
        for name in ("settings.py", "mod.py"):
            (deep / name).unlink()
        for level in reversed(levels[1:]):
            level.rmdir()


# -- S4: redaction -----------------------------------------------------------------------------


def test_redaction_knows_token_shapes_and_url_credentials():
    from bot.redact import Redactor

    red = Redactor()
    shapes = [
        "ghp_" + "A1b2" * 9,
        "gho_" + "x" * 36,
        "ghu_" + "y" * 36,
        "ghs_" + "z" * 36,
        "ghr_" + "w" * 36,
        "github_pat_11ABCDEFG0" + "q" * 60,
        "sk-" + "k" * 48,
        "sk-proj-" + "p" * 40,
    ]
    for token in shapes:
        assert token not in red(f"token: {token}\n"), token
    text = red("postgresql://setupbot:hunter2pw@db.example:5432/xp and https://user:s3cret@host/x")
    assert "hunter2pw" not in text and "s3cret" not in text and "db.example" in text


def test_knowledge_url_password_is_a_secret():
    from bot.redact import global_redactor

    s = load_settings(None, environ={"SETUPBOT_KNOWLEDGE_URL": "postgresql://bot:pgSENTINEL42@db/xp"})
    assert "pgSENTINEL42" in s.secrets()
    # registered when the settings load: masked even where it stands alone
    assert "pgSENTINEL42" not in global_redactor()("store password pgSENTINEL42")


def test_registered_secret_is_masked_inside_longer_base64():
    from bot.redact import Redactor

    red = Redactor([TOKEN_SENTINEL])
    for pad in (b"", b"a", b"aa", b"user:"):
        blob = base64.b64encode(pad + TOKEN_SENTINEL.encode() + b"\n").decode()
        assert_no_secret("base64 text", red(f"Authorization: Basic {blob}"))


def test_logged_traceback_is_redacted():
    from bot.redact import redacting_handler, register_secret

    register_secret(TOKEN_SENTINEL)
    stream = io.StringIO()
    handler = redacting_handler()
    handler.stream = stream
    log = logging.getLogger("bot.test_trust_boundary")
    log.addHandler(handler)
    try:
        try:
            raise RuntimeError(f"push to https://x-access-token:{TOKEN_SENTINEL}@github.com failed")
        except RuntimeError:
            log.exception("publish failed")
    finally:
        log.removeHandler(handler)
    out = stream.getvalue()
    assert "Traceback" in out and "RuntimeError" in out
    assert_no_secret("a logged traceback", out)


def test_cli_prints_unexpected_tracebacks_redacted(monkeypatch, capsys):
    from bot import cli

    monkeypatch.setenv("GITHUB_TOKEN", TOKEN_SENTINEL)

    def boom(_args):
        raise ValueError(f"unexpected {TOKEN_SENTINEL}")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    args = parser.parse_args(["plan", "."])
    args.func = boom
    monkeypatch.setattr(parser, "parse_args", lambda argv=None: args)
    assert cli.main(["plan", "."]) == 1
    err = capsys.readouterr().err
    assert "ValueError" in err
    assert_no_secret("stderr", err)


# -- the build context -------------------------------------------------------------------------


def test_dockerignore_is_generated_and_a_hand_written_one_is_kept(repo):
    from bot.outputs import outputs_from_pipeline, write_outputs

    plan = {
        "dockerfile": "FROM python:3.11-slim\nCOPY requirements/.env.txt ./\nCOPY . /workspace\n",
        "test_command": ["pytest"],
    }
    g = outputs_from_pipeline(repo, plan=plan, repository="octo/app")
    ignore = g.files[".dockerignore"].splitlines()
    assert "generated by setupbot" in ignore[0]
    for pattern in (".git", ".env", ".env.*", "*.pem", "*.key", "id_rsa*", ".setupbot"):
        assert pattern in ignore
    assert "!requirements/.env.txt" in ignore
    # a test's own key or certificate is a committed fixture: it comes after the exclusions
    assert ignore.index("!**/*test*/**/*.pem") > ignore.index("**/*.pem")
    (repo / ".dockerignore").write_text("node_modules\n")
    g = outputs_from_pipeline(repo, plan=plan, repository="octo/app")
    assert ".dockerignore" not in g.files and ".dockerignore" in g.kept
    write_outputs(repo, g)
    assert (repo / ".dockerignore").read_text() == "node_modules\n"
    assert ".dockerignore" in g.files[g.report_path]


@pytest.mark.docker
def test_image_built_with_the_generated_dockerignore_carries_no_credentials(docker_available, repo, tmp_path):
    """The compiled Dockerfile (COPY of a requirements file, then the source) builds with the
    generated .dockerignore, and the image holds neither .git/config nor .env nor a key."""
    from bot.config import load_settings as settings_for
    from bot.engine import Engine
    from bot.outputs import outputs_from_pipeline, write_outputs

    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "config", "http.extraheader", f"AUTHORIZATION: basic {TOKEN_SENTINEL}"], check=True
    )
    (repo / ".env").write_text(f"TOKEN={TOKEN_SENTINEL}\n")
    (repo / "deploy.pem").write_text(f"-----BEGIN PRIVATE KEY-----\n{TOKEN_SENTINEL}\n")
    (repo / ".env.example").write_text("DEBUG=1\n")  # a committed template stays
    # a test fixture's key stays (pyHanko's tests load theirs from pyhanko_tests/data/crypto)
    (repo / "pkg_tests" / "data").mkdir(parents=True)
    (repo / "pkg_tests" / "data" / "root_ca.key.pem").write_text("-----BEGIN PRIVATE KEY-----\nFIXTURE\n")
    (repo / "requirements.txt").write_text("")
    dockerfile = "FROM python:3.11-slim\nWORKDIR /workspace\nCOPY requirements.txt ./\nCOPY . /workspace\n"
    write_outputs(
        repo,
        outputs_from_pipeline(repo, plan={"dockerfile": dockerfile, "test_command": ["pytest"]}, repository="octo/app"),
    )
    engine = Engine.from_settings(settings_for(None, environ={}))
    tag = f"setupbot/test-dockerignore:{engine.run_id}"
    try:
        result = engine.build(repo, (repo / ".devcontainer" / "Dockerfile").read_text(), tag, ca=False)
        assert result.ok, result.log[-2000:]
        listing = subprocess.run(
            [
                "docker",
                "run",
                "--rm",
                "--network",
                "none",
                tag,
                "sh",
                "-c",
                "ls -a /workspace /workspace/pkg_tests/data; cat /workspace/.git/config /workspace/.env "
                "/workspace/deploy.pem 2>&1; grep -r SENTINEL /workspace 2>&1 || true",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        assert "requirements.txt" in listing and "pyproject.toml" in listing and ".env.example" in listing
        assert "root_ca.key.pem" in listing
        assert_no_secret("the image", listing)
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=120)
        engine.clean(engine.run_id)
