"""The ecosystem seam (issue 17 item 4): detection through the registry, Python behind the
Protocol, the "not supported yet" result on the CLI, the GitHub path and rollout, and adding an
ecosystem by registering one object."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest
from doubles.github_api import GitHubDouble

import bot.ecosystems as ecosystems
from bot.cli import main
from bot.compile.plan import Plan
from bot.ecosystems import (
    FOREIGN_MARKERS,
    REGISTRY,
    Detection,
    Ecosystem,
    ImageFamily,
    TestRunner,
    make_plan,
    parse_only,
    select,
    select_files,
    unsupported_reason,
)
from bot.errors import EXIT_CODES, ConfigError, NotSupported
from bot.github.provider import GitHubProvider, RetryPolicy
from bot.github.rollout import rollout
from bot.graph.model import DepGraph, Node

ROOT = Path(__file__).parents[2]
REPOS = ROOT / "tests" / "fixtures" / "repos"
EVENTS = ROOT / "tests" / "fixtures" / "events"
UNSUPPORTED = REPOS / "unsupported-node-go"
SHA = "2" * 40


def _copy(src: Path, tmp_path: Path) -> Path:
    dest = tmp_path / src.name
    shutil.copytree(src, dest)
    return dest


def _tree(path: Path) -> list[str]:
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*"))


# ------------------------------------------------------------------ detection


def test_every_registered_ecosystem_satisfies_the_protocol():
    assert REGISTRY, "no ecosystem registered"
    for name, eco in REGISTRY.items():
        assert isinstance(eco, Ecosystem), name
        assert eco.name == name
        assert "{version}" in eco.image_family.pattern


@pytest.mark.parametrize(
    "fixture,confidence",
    [
        ("plan-poetry-only", 1.0),  # a manifest at the root
        ("plan-imports-only", 0.6),  # tests and sources, no manifest
        ("hostile-limits", 0.7),  # .python-version only
    ],
)
def test_python_repositories_are_detected_with_what_made_the_call(fixture, confidence):
    sel = select(REPOS / fixture)
    assert sel.names == ["python"]
    assert sel.detections[0].confidence == confidence
    assert sel.detections[0].markers and sel.detections[0].reason
    assert sel.lead is REGISTRY["python"]


def test_a_node_and_go_repository_is_not_supported_and_says_what_it_found():
    sel = select(UNSUPPORTED)
    assert not sel.supported and sel.lead is None
    assert sel.foreign == ["package.json", "go.mod"]
    message = sel.not_supported_message()
    assert message.startswith("not supported yet: found package.json, go.mod (Node.js, Go)")
    assert "setupbot supports python" in message
    err = sel.error()
    assert isinstance(err, NotSupported) and err.exit_code == 23 and err.markers == ["package.json", "go.mod"]


def test_loose_python_files_do_not_make_a_node_project_python(tmp_path):
    (tmp_path / "package.json").write_text("{}")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "release.py").write_text("print('x')\n")
    sel = select(tmp_path)
    assert not sel.supported and [d.ecosystem for d in sel.dropped] == ["python"]
    # a manifest settles it: a Python project with a JavaScript frontend is a Python project
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    sel = select(tmp_path)
    assert sel.names == ["python"] and sel.foreign == ["package.json"]


def test_detection_never_enters_dependency_folders_or_follows_links(tmp_path):
    (tmp_path / "package.json").write_text("{}")
    (tmp_path / "node_modules" / "pkg").mkdir(parents=True)
    (tmp_path / "node_modules" / "pkg" / "setup.py").write_text("")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "pyproject.toml").write_text("[project]\nname='x'\n")
    (tmp_path / "linked").symlink_to(outside, target_is_directory=True)
    assert not select(tmp_path).supported


def test_detection_from_file_names_alone_matches_the_checkout():
    names = [p.relative_to(UNSUPPORTED).as_posix() for p in UNSUPPORTED.rglob("*") if p.is_file()]
    assert select_files("o/r", names).to_json() == select(UNSUPPORTED).to_json()
    assert select_files("o/r", ["pyproject.toml", "README.md"]).names == ["python"]


def test_only_names_registered_ecosystems():
    assert parse_only("python") == ["python"]
    assert parse_only(" Python , python ") == ["python"]
    assert parse_only(None) == [] and parse_only("") == []
    with pytest.raises(ConfigError) as exc:
        parse_only("python,cobol")
    assert "cobol" in exc.value.what and "Registered ecosystems: python" in exc.value.fix


# ------------------------------------------------------------------ Python behind the seam


def test_python_plan_through_the_registry_is_the_graph_plan(tmp_path):
    repo = _copy(ROOT / "examples" / "hello-app", tmp_path)
    plan = make_plan(repo, None, ["3.11", "3.12"], resolve=False)
    assert plan.graph.meta["ecosystems"] == ["python"]
    assert plan.base_image == f"python:{plan.python}-slim" and plan.python in ("3.11", "3.12")
    eco = REGISTRY["python"]
    ev = eco.scan(repo)
    assert eco.choose_version(ev, ["3.11", "3.12"]).version == plan.python
    command, why = eco.test_command(ev, plan.graph)
    assert command == plan.test_command and command[:3] == ["python", "-m", "pytest"]
    snippets = eco.compile_snippets(plan.graph)
    assert snippets[0].layer == "base" and snippets[0].step["image"] == plan.base_image
    target = next(s for s in snippets if s.layer == "target")
    assert target.step["argv"] == plan.test_command
    # after the tests: the development stage, git and the user, on top of the tested one
    dev = snippets[snippets.index(target) + 1 :]
    assert dev and all(s.layer == "dev" for s in dev) and dev[0].step["image"] == "env"
    layers = [s.layer for s in snippets]
    assert layers.index("source") < layers.index("target")
    assert "ms-python.python" in eco.devcontainer({"name": "x"}, plan)["customizations"]["vscode"]["extensions"]


def test_python_contributes_its_nodes_to_a_graph_it_does_not_own(tmp_path):
    repo = _copy(REPOS / "plan-poetry-only", tmp_path)
    eco = REGISTRY["python"]
    graph = DepGraph()
    graph.add(Node("tool:other", "TOOL", "other", "SATISFIED"))
    warnings: list = []
    eco.contribute(eco.scan(repo), graph, warnings)
    assert "tool:other" in graph.nodes and "runtime:python" in graph.nodes
    assert graph.of_type("PACKAGE")


def test_python_results_and_diagnosis_are_the_existing_parsers():
    eco = REGISTRY["python"]
    assert eco.test_runner.result_format == "junit"
    xml = (
        '<testsuite><testcase classname="t" name="a"/><testcase classname="t" name="b">'
        '<failure message="boom">x</failure></testcase></testsuite>'
    )
    results = eco.parse_results(xml)
    assert results.outcomes == {"t::a": "passed", "t::b": "failed"}
    assert eco.parse_results("not xml").outcomes == {}
    kinds = {(s.kind, s.key) for s in eco.diagnose("ModuleNotFoundError: No module named 'yaml'\n")}
    assert ("missing_module", "yaml") in kinds


# ------------------------------------------------------------------ not supported: CLI, github, rollout


def test_run_on_an_unsupported_repository_exits_23_and_writes_nothing(tmp_path, capsys):
    repo = _copy(UNSUPPORTED, tmp_path)
    before = _tree(repo)
    out = tmp_path / "run.json"
    assert main(["run", str(repo), "--json", str(out)]) == NotSupported.exit_code == 23
    doc = json.loads(out.read_text())
    schema = json.loads((ROOT / "schemas" / "output" / "run.schema.json").read_text())
    jsonschema.validate(doc, schema)
    assert doc["status"] == "not_supported" and doc["exit_code"] == 23
    assert doc["foreign_markers"] == ["package.json", "go.mod"] and doc["written"] == []
    assert "not supported yet: found package.json, go.mod" in capsys.readouterr().err
    assert _tree(repo) == before  # no Dockerfile, no .devcontainer, no .setupbot
    assert main(["plan", str(repo), "--no-resolve"]) == 23
    assert EXIT_CODES[23].startswith("not supported")


def test_github_on_an_unsupported_repository_opens_no_pull_request(tmp_path, monkeypatch, capsys):
    """The real produce path (no stub): the pipeline refuses before any engine or GitHub write."""
    repo = _copy(UNSUPPORTED, tmp_path)
    with GitHubDouble() as double:
        double.add_repo("octo/app", {p.name: p.read_text() for p in UNSUPPORTED.iterdir()})
        monkeypatch.setenv("GITHUB_TOKEN", "ghs_eco_sentinel")
        monkeypatch.setenv("SETUPBOT_GITHUB_API_URL", double.base_url)
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
        monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "output.txt"))
        code = main(["github", "--event-name", "push", "--event-path", str(EVENTS / "push.json"), "--repo", str(repo)])
        assert code == 23
        assert double.write_calls() == [] and double.pulls("octo/app") == []
        assert double.schema_errors == []
    assert "pr-operation=none" in (tmp_path / "output.txt").read_text().splitlines()
    assert "not supported yet: found package.json, go.mod" in (tmp_path / "summary.md").read_text()
    assert "skip: " in capsys.readouterr().out
    assert not (repo / ".devcontainer").exists()


@pytest.fixture
def org():
    with GitHubDouble() as d:
        d.add_repo("acme/py", {"pyproject.toml": "[project]\nname='py'\n", "README.md": "x\n"}, org=True)
        d.add_repo("acme/nodego", {p.name: p.read_text() for p in UNSUPPORTED.iterdir()}, org=True)
        d.add_repo("acme/fresh", org=True)
        yield d
    assert d.schema_errors == []


def test_rollout_skips_an_unsupported_repository_with_the_reason(org):
    provider = GitHubProvider("t", org.base_url, policy=RetryPolicy(sleep=lambda s: None))
    results = {
        r.repo: r
        for r in rollout(
            provider,
            ["acme/py", "acme/nodego", "acme/fresh"],
            setupbot_repository="acme/setupbot",
            ref=SHA,
            unsupported=unsupported_reason,
        )
    }
    assert results["acme/nodego"].action == "skipped"
    assert results["acme/nodego"].detail.startswith("not supported yet: found package.json, go.mod")
    assert org.pulls("acme/nodego") == []
    # a supported repository, and one whose root names nothing yet, still get their workflow
    assert results["acme/py"].action == "created" and results["acme/fresh"].action == "created"


def test_rollout_only_filters_on_detected_ecosystems(org, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SETUPBOT_GITHUB_API_URL", org.base_url)
    monkeypatch.setenv("GITHUB_TOKEN", "t")
    repos = tmp_path / "repos.txt"
    repos.write_text("acme/py\nacme/nodego\nacme/fresh\n")
    out = tmp_path / "rollout.json"
    assert (
        main(["rollout", "--repos", str(repos), "--ref", SHA, "--only", "python", "--dry-run", "--json", str(out)]) == 0
    )
    doc = json.loads(out.read_text())
    assert [r["repo"] for r in doc["repos"]] == ["acme/py"] and doc["matched"] == 1
    assert org.write_calls() == []
    # without --only the command still skips the repository no ecosystem supports
    assert main(["rollout", "--repos", str(repos), "--ref", SHA, "--dry-run", "--json", str(out)]) == 0
    actions = {r["repo"]: (r["action"], r["detail"]) for r in json.loads(out.read_text())["repos"]}
    assert actions["acme/nodego"][0] == "skipped" and "found package.json, go.mod" in actions["acme/nodego"][1]
    assert actions["acme/py"][0] != "skipped" and actions["acme/fresh"][0] != "skipped"
    assert main(["rollout", "--repos", str(repos), "--ref", SHA, "--only", "python,cobol", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "unknown ecosystem cobol" in err and "Registered ecosystems: python" in err


# ------------------------------------------------------------------ adding an ecosystem


class ToyEcosystem:
    """A whole ecosystem in one object: registering it is all it takes."""

    name = "toy"
    title = "Toy"
    markers = ("toy.toml", "mix.exs")
    image_family = ImageFamily("toy", "toy:{version}-slim", ("1", "2"), "the newest")
    test_runner = TestRunner(("toy", "test"), ("toy", "test", "--list"), "toy-text")
    devcontainer_extensions = ("toy.toy-lang",)

    def __init__(self) -> None:
        self.planned: list[Path] = []

    def detect(self, repo):
        return self.detect_files([p.name for p in Path(repo).iterdir()])

    def detect_files(self, files):
        found = tuple(f for f in files if f in self.markers)
        return Detection(self.name, found, 1.0, f"{found[0]} at the root") if found else None

    def scan(self, repo, output_dir=None):
        return SimpleNamespace(version=(Path(repo) / "toy.toml").read_text().strip())

    def contribute(self, evidence, graph, warnings):
        graph.add(
            Node(
                "runtime:toy",
                "RUNTIME",
                f"toy {evidence.version}",
                "SATISFIED",
                action="from",
                attrs={"version": evidence.version, "base_image": self.image_family.image(evidence.version)},
            )
        )
        graph.add(
            Node(
                "target:tests",
                "TARGET",
                "run the toy tests",
                "UNKNOWN",
                attrs={
                    "command": list(self.test_runner.command),
                    "collect_command": list(self.test_runner.collect_command),
                },
            )
        )

    def available_versions(self, settings):
        return list(self.image_family.versions)

    def choose_version(self, evidence, available):
        return SimpleNamespace(
            version=evidence.version, satisfied=evidence.version in available, reason="toy.toml", warnings=[]
        )

    def make_plan(self, repo, settings=None, **options):
        self.planned.append(Path(repo))
        graph = DepGraph()
        self.contribute(self.scan(repo), graph, [])
        return Plan(Path(repo), graph)

    def extend_plan(self, plan, settings=None):
        plan.graph.add(Node("tool:toy", "TOOL", "toy", "SATISFIED"))

    def compile_snippets(self, graph):
        return []

    def test_command(self, evidence, graph):
        return list(self.test_runner.command), [("toy.toml", None, "toy")]

    def parse_results(self, text):
        from bot.junit import TestResults

        return TestResults(outcomes={line.split()[1]: "passed" for line in text.splitlines() if line.startswith("ok ")})

    def diagnose(self, output):
        return []

    def devcontainer(self, config, plan):
        vscode = dict(config.get("customizations", {}).get("vscode", {}))
        vscode["extensions"] = [*vscode.get("extensions", []), *self.devcontainer_extensions]
        return {**config, "customizations": {**config.get("customizations", {}), "vscode": vscode}}


@pytest.fixture
def toy(monkeypatch):
    eco = ToyEcosystem()
    monkeypatch.setitem(ecosystems.REGISTRY, "toy", eco)  # the one line a new ecosystem adds
    return eco


def test_a_registered_toy_ecosystem_is_detected_planned_and_filtered_on(toy, tmp_path, monkeypatch):
    assert isinstance(toy, Ecosystem)
    repo = tmp_path / "toyrepo"
    repo.mkdir()
    (repo / "toy.toml").write_text("2\n")
    (repo / "mix.exs").write_text("")  # a marker the toy claims is no longer foreign
    sel = select(repo)
    assert sel.names == ["toy"] and sel.foreign == [] and "mix.exs" in FOREIGN_MARKERS
    plan = make_plan(repo)
    assert toy.planned == [repo] and plan.graph.meta["ecosystems"] == ["toy"]
    assert plan.graph.nodes["runtime:toy"].attrs["base_image"] == "toy:2-slim"
    assert parse_only("toy,python") == ["toy", "python"]

    # the pipeline gets its plan through the registry: run_setup's make_plan is the toy's
    import bot.pipeline as pipeline
    from bot.config import load_settings
    from bot.pipeline import run_pipeline

    seen = {}

    def fake_run_setup(repo_dir, settings, engine, store, llm, make_plan):
        seen["plan"] = make_plan(repo_dir, settings, ["2"])
        return SimpleNamespace(plan={}, replay={}, status="unresolved")

    monkeypatch.setattr(pipeline, "run_setup", fake_run_setup)
    engine = SimpleNamespace(run_id="toy-run", clean=lambda run_id: None)
    result = run_pipeline(repo, load_settings(repo), engine=engine, use_knowledge=False, verify=False, write=False)
    assert result.ecosystems == ["toy"] and result.plan is seen["plan"]
    assert "runtime:toy" in result.plan.graph.nodes and toy.planned == [repo, repo]


def test_a_second_ecosystem_joins_the_plan_the_first_leads(toy, tmp_path):
    repo = _copy(ROOT / "examples" / "hello-app", tmp_path)
    (repo / "toy.toml").write_text("1\n")
    sel = select(repo)  # both certain: registry order breaks the tie
    assert sel.names == ["python", "toy"]
    plan = make_plan(repo, None, ["3.12"], selection=sel, resolve=False)
    assert plan.python == "3.12" and "tool:toy" in plan.graph.nodes
    assert plan.graph.meta["ecosystems"] == ["python", "toy"]


def test_the_plan_s_ecosystems_add_their_editor_extensions(toy, tmp_path):
    from bot.compile.devcontainer import parse_devcontainer
    from bot.ecosystems import devcontainer_for
    from bot.outputs import generate_outputs
    from bot.report import ReportData

    repo = tmp_path / "toyrepo"
    repo.mkdir()
    (repo / "toy.toml").write_text("2\n")
    plan = make_plan(repo)
    generated = generate_outputs(
        ReportData(repository="acme/toy", verdict="Full", replay_ok=True),
        dockerfile_text="FROM toy:2-slim\n",
        plan_json=plan.graph.to_json(),
        customise_devcontainer=devcontainer_for,
    )
    config = parse_devcontainer(generated.files[".devcontainer/devcontainer.json"])
    assert "toy.toy-lang" in config["customizations"]["vscode"]["extensions"]
    python_only = generate_outputs(
        ReportData(repository="acme/py", verdict="Full", replay_ok=True),
        dockerfile_text="FROM python:3.12-slim\n",
        plan_json={"graph": {"meta": {"ecosystems": ["python"]}}},
        customise_devcontainer=devcontainer_for,
    )
    config = parse_devcontainer(python_only.files[".devcontainer/devcontainer.json"])
    assert config["customizations"]["vscode"]["extensions"] == ["ms-python.python"]


def test_python_offers_what_the_engine_has_else_the_official_tags(monkeypatch):
    import bot.ecosystems.python as images  # the module that calls available_pythons
    from bot.config import load_settings
    from bot.errors import EngineError

    eco = REGISTRY["python"]
    settings = load_settings(None)
    monkeypatch.setattr(images, "available_pythons", lambda engine: ["3.11", "3.13"])
    assert eco.available_versions(settings) == ["3.11", "3.13"]

    def no_engine(engine):
        raise EngineError("the engine is not reachable")

    monkeypatch.setattr(images, "available_pythons", no_engine)
    assert eco.available_versions(settings) == list(eco.image_family.versions)
