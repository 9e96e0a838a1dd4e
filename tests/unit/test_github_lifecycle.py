"""The environment pull request through its life, as a maintainer meets it: `setupbot github` over
real HTTP against the REST double, with a stand-in pipeline that behaves like the real one (its
plan follows the checkout's pyproject.toml; every run has its own timings, like a real run).

Each case is one the maintainer reported: merge then push, close then push, a human commit on the
bot branch, a Failed verdict, a push that changes no input, a pull request that breaks main's
environment, and the same from a fork.
"""

from __future__ import annotations

import itertools
import json
import tomllib
from pathlib import Path

import pytest
from doubles.git import git
from doubles.github_api import GitHubDouble

import bot.commands.github as github_command
from bot.cli import main
from bot.outputs import outputs_from_pipeline, write_outputs
from bot.report.render import HANDBACK_COMMENT_MARKER, HANDBACK_MARKER

EVENTS = Path(__file__).parents[1] / "fixtures" / "events"
REPO = "octo/app"
OUT = ".devcontainer"
PYPROJECT = (
    '[project]\nname = "app"\ndependencies = ["six>=1.16"]\n[project.optional-dependencies]\ntest = ["pytest"]\n'
)
SOURCE = {
    "pyproject.toml": PYPROJECT,
    "src/app/__init__.py": "import six\n",
    "tests/test_app.py": "def test_x():\n    pass\n",
}
_clock = itertools.count(1)


def fake_plan(repo: Path) -> dict:
    """A plan in Plan.to_json()'s shape, following the checkout's pyproject.toml."""
    deps = tomllib.loads((repo / "pyproject.toml").read_text())["project"].get("dependencies", [])
    nodes = [
        {
            "id": f"package:{d}",
            "type": "PACKAGE",
            "name": d.split(">")[0].split("=")[0],
            "state": "SATISFIED",
            "action": "pip",
            "attrs": {"spec": d},
            "evidence": [["pyproject.toml", 3, d]],
        }
        for d in deps
    ]
    nodes.append(
        {
            "id": "runtime:python",
            "type": "RUNTIME",
            "name": "python 3.11",
            "state": "SATISFIED",
            "action": "from",
            "attrs": {"version": "3.11"},
            "evidence": [["pyproject.toml", 1, ""]],
        }
    )
    install = "".join(f"RUN python -m pip install '{d}'\n" for d in deps)
    return {
        "repo": str(repo),
        "python": "3.11",
        "base_image": "python:3.11-slim",
        "test_command": ["python", "-m", "pytest"],
        "collect_command": ["python", "-m", "pytest", "--co"],
        "services": [],
        "env": {},
        "warnings": [],
        "dockerfile_lines": [],
        "dockerfile": f"FROM python:3.11-slim\n{install}COPY . /workspace\n",
        # like the real plan: the resolver's duration and the phase timings differ on every run
        "graph": {"nodes": nodes, "edges": [], "meta": {"resolution": {"ok": True, "seconds": next(_clock) / 7}}},
        "timings": {"scan": next(_clock) / 3},
    }


class Pipeline:
    """Stands in for bot.pipeline: counts its runs; ``verdict``/``replay_ok`` say how it ends."""

    def __init__(self) -> None:
        self.runs = 0
        self.verdict = "Full"
        self.replay_ok = True

    def __call__(self, repo: Path, settings, repository: str):
        self.runs += 1
        seconds = next(_clock) * 1.5
        record = {
            "replay": {
                "ok": self.replay_ok,
                "collect_exit": 0,
                "test_exit": 0 if self.replay_ok else 1,
                "seconds": seconds,
            },
            "tests": {"passed": 1 if self.replay_ok else 0, "failed": 0 if self.replay_ok else 1, "total": 1},
            "timings": {"build_seconds": seconds, "total_seconds": seconds + 3},
        }
        if not self.replay_ok:
            record["unresolved"] = [
                {"message": "the build fails at step 3: pip cannot build lxml (no libxml2)", "category": "build"}
            ]
        verification = {"verdict": {"tier": self.verdict, "reasons": [f"verdict {self.verdict}"]}}
        generated = outputs_from_pipeline(
            repo,
            plan=fake_plan(repo),
            run_record=record,
            verification=verification,
            output_dir=settings.output.dir,
            repository=repository,
            image_size=100_000_000 + self.runs,
            settings=settings,
            gate=settings.publish.min_verdict,
        )
        write_outputs(repo, generated)  # as the pipeline does
        return generated


class World:
    """The double's octo/app and a local checkout of its main branch, kept in step."""

    def __init__(self, double: GitHubDouble, tmp: Path, pipeline: Pipeline) -> None:
        self.double, self.tmp, self.pipeline = double, tmp, pipeline
        self.checkout = tmp / "checkout"
        self.checkout.mkdir()
        git(self.checkout, "init", "-q", "-b", "main")
        self.write_main(SOURCE, "initial")

    def write_main(self, files: dict[str, str], message: str = "change") -> None:
        """Someone pushes ``files`` to main: on the double and in the checkout."""
        if "octo/app" in self.double.repos:
            self.double.push(REPO, "main", files, message)
        else:
            self.double.add_repo(REPO, files)
        for rel, text in files.items():
            (self.checkout / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.checkout / rel).write_text(text)
        git(self.checkout, "add", "-A")
        git(self.checkout, "commit", "-q", "-m", message)

    def reset_checkout(self) -> None:
        """A fresh checkout of main (the action's checkout has only what main has)."""
        git(self.checkout, "checkout", "-q", "--", ".")
        git(self.checkout, "clean", "-q", "-fdx")

    def bot_files(self) -> dict[str, str]:
        return {p: b.decode() for p, b in self.double.repos[REPO].files_at("setupbot/main").items()}

    def proposed(self) -> dict[str, str]:
        """What the bot branch changes against main: the output folder and the root .dockerignore."""
        main = {p: b.decode() for p, b in self.double.repos[REPO].files_at("main").items()}
        return {p: t for p, t in self.bot_files().items() if main.get(p) != t}

    def merge(self, number: int) -> None:
        self.write_main(self.proposed(), f"Merge pull request #{number}")
        self.double.close_pull(REPO, number, merged=True)

    def run(self, event: str = "push", *extra: str) -> int:
        self.reset_checkout()
        files = {"push": "push.json", "pr": "pull_request.json", "fork": "pull_request_fork.json"}
        name = "pull_request" if event in ("pr", "fork") else event
        return main(
            [
                "github",
                "--event-name",
                name,
                "--event-path",
                str(EVENTS / files[event]),
                "--repo",
                str(self.checkout),
                *extra,
            ]
        )

    def summary(self) -> str:
        return (self.tmp / "summary.md").read_text()


@pytest.fixture
def world(tmp_path, monkeypatch):
    pipeline = Pipeline()
    monkeypatch.setattr(github_command, "produce_outputs", pipeline)
    with GitHubDouble() as double:
        monkeypatch.setenv("GITHUB_TOKEN", "ghs_lifecycle")
        monkeypatch.setenv("SETUPBOT_GITHUB_API_URL", double.base_url)
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
        monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "output.txt"))
        monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
        monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
        monkeypatch.setenv("GITHUB_RUN_ID", "4242")
        yield World(double, tmp_path, pipeline)
        assert double.schema_errors == []


def outputs(world: World) -> dict[str, str]:
    lines = (world.tmp / "output.txt").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines[-5:])


def test_merge_then_push_opens_no_new_pull_request(world):
    assert world.run() == 0
    assert [p["number"] for p in world.double.pulls(REPO)] == [1]
    world.merge(1)
    writes = len(world.double.write_calls())
    assert world.run() == 0
    assert len(world.double.write_calls()) == writes, "a merged environment came back as a new PR"
    assert len(world.double.pulls(REPO)) == 1
    assert outputs(world)["pr-operation"] == "none"
    # Redoing the container work changes nothing either: the files are a pure function of the inputs.
    assert world.run("push", "--force") == 0
    assert len(world.double.write_calls()) == writes
    assert world.pipeline.runs == 2


def test_an_open_pr_whose_content_reached_main_is_closed_with_a_comment(world):
    assert world.run() == 0
    files = world.proposed()
    assert set(files) == {".dockerignore"} | {
        f"{OUT}/{f}" for f in ("Dockerfile", "devcontainer.json", "setupbot-plan.json", "setup-report.md")
    }
    world.write_main(files, "copy the environment by hand")
    assert world.run() == 0
    pr = world.double.pulls(REPO)[0]
    assert pr["state"] == "closed" and not pr["merged"]
    comments = [c["body"] for c in world.double.repos[REPO].comments.values() if c["issue"] == 1]
    assert len(comments) == 1 and "already has the environment" in comments[0]
    assert outputs(world)["pr-operation"] == "closed"


def test_close_then_push_does_not_propose_the_same_content_again(world):
    assert world.run() == 0
    world.double.close_pull(REPO, 1, merged=False)
    writes = len(world.double.write_calls())
    assert world.run() == 0
    assert len(world.double.write_calls()) == writes and len(world.double.pulls(REPO)) == 1
    assert "closed without merging" in world.summary()
    # The inputs change: a new proposal, which says why it is back.
    world.write_main({"pyproject.toml": PYPROJECT.replace('"six>=1.16"', '"six>=1.16", "attrs"')})
    assert world.run() == 0
    second = world.double.pulls(REPO, "open")
    assert [p["number"] for p in second] == [2]
    body = second[0]["body"]
    assert "#1, was closed without merging" in body and "inputs have changed" in body
    assert "+ package attrs" in body and "pyproject.toml changed" in body


def test_a_human_commit_on_the_bot_branch_stops_setupbot_until_handed_back(world):
    assert world.run() == 0
    human = world.double.push(
        REPO, "setupbot/main", {f"{OUT}/Dockerfile": "FROM python:3.12-slim\n"}, "Use 3.12, our CI runs it"
    )
    world.write_main({"pyproject.toml": PYPROJECT.replace('"six>=1.16"', '"six>=1.17"')})
    for _ in range(2):
        assert world.run() == 0
        assert world.double.repos[REPO].refs["heads/setupbot/main"] == human, (
            "the maintainer's commit was force-pushed away"
        )
    notes = [c["body"] for c in world.double.repos[REPO].comments.values() if HANDBACK_COMMENT_MARKER in c["body"]]
    assert len(notes) == 1 and "tick" in notes[0] and "delete the branch" in notes[0]
    # The maintainer ticks the box in the description: setupbot takes the branch back.
    pr = world.double.repos[REPO].pulls[1]
    pr["body"] = pr["body"].replace(
        f"- [ ] Let setupbot update this branch again {HANDBACK_MARKER}",
        f"- [x] Let setupbot update this branch again {HANDBACK_MARKER}",
    )
    assert world.run() == 0
    head = world.double.repos[REPO].refs["heads/setupbot/main"]
    assert head != human and "Setupbot-Fingerprint:" in world.double.repos[REPO].commits[head]["message"]
    assert "six>=1.17" in world.bot_files()[f"{OUT}/Dockerfile"]
    assert "- [ ] Let setupbot update this branch again" in world.double.repos[REPO].pulls[1]["body"]


def test_update_without_conflict_is_not_a_rebase(world):
    assert world.run() == 0
    first = world.double.repos[REPO].refs["heads/setupbot/main"]
    world.write_main({"pyproject.toml": PYPROJECT.replace('"six>=1.16"', '"six>=1.17"')})
    assert world.run() == 0
    head = world.double.repos[REPO].refs["heads/setupbot/main"]
    assert world.double.repos[REPO].commits[head]["parents"] == [first]  # fast-forward, no force-push


def test_failed_verdict_opens_no_proven_pull_request(world, monkeypatch):
    world.pipeline.verdict, world.pipeline.replay_ok = "Failed", False
    assert world.run() == 0  # fail-on regression: a push cannot regress
    assert world.double.pulls(REPO) == [] and world.double.write_calls() == []
    assert "below the Mostly gate" in world.summary()
    assert world.run("push", "--fail-on", "any-failure") == 20
    # With draft_below_gate: a draft whose title says the verdict, and never "proven" or "verified".
    monkeypatch.setenv("SETUPBOT_PUBLISH_DRAFT_BELOW_GATE", "true")
    assert world.run() == 0
    pr = world.double.pulls(REPO)[0]
    assert pr["draft"] is True and "Failed" in pr["title"]
    commit = world.double.repos[REPO].commits[world.double.repos[REPO].refs["heads/setupbot/main"]]
    for text in (pr["title"], pr["body"], commit["message"]):
        assert "proven" not in text.lower() and "verified" not in text.lower(), text


def test_a_push_that_changes_no_input_skips_the_container_work(world):
    assert world.run() == 0
    world.merge(1)
    runs = world.pipeline.runs
    world.write_main({"src/app/__init__.py": "import six\n\n\ndef answer():\n    return 42\n"}, "code only")
    sha = git(world.checkout, "log", "-1", "--format=%h", "--", f"{OUT}/setupbot-plan.json")
    writes = len(world.double.write_calls())
    assert world.run() == 0
    assert world.pipeline.runs == runs, "the pipeline ran although no input changed"
    assert f"environment inputs unchanged since {sha}" in world.summary()
    assert len(world.double.write_calls()) == writes
    # A manifest change is an input change.
    world.write_main({"pyproject.toml": PYPROJECT.replace('"six>=1.16"', '"six>=1.17"')})
    assert world.run() == 0
    assert world.pipeline.runs == runs + 1


def _main_with_verified_environment(world: World) -> None:
    assert world.run() == 0
    world.merge(1)
    world.double.repos[REPO].refs["heads/bump-numpy"] = world.double.repos[REPO].refs["heads/main"]
    world.double.repos[REPO].pulls[7] = {
        "id": 7007,
        "number": 7,
        "state": "open",
        "title": "Add lxml",
        "body": "",
        "head": "bump-numpy",
        "base": "main",
        "merged": False,
        "merged_at": None,
        "maintainer_can_modify": True,
    }
    # the PR's checkout: main plus lxml
    world.write_main({"pyproject.toml": PYPROJECT.replace('"six>=1.16"', '"six>=1.16", "lxml"')}, "add lxml")
    world.double.repos[REPO].refs["heads/main"] = world.double.repos[REPO].commits[
        world.double.repos[REPO].refs["heads/main"]
    ]["parents"][0]
    world.pipeline.verdict, world.pipeline.replay_ok = "Failed", False


def test_a_pull_request_that_breaks_mains_environment_fails_its_check(world):
    _main_with_verified_environment(world)
    sha = world.double.repos[REPO].refs["heads/bump-numpy"]
    event = json.loads((EVENTS / "pull_request.json").read_text())
    event["pull_request"]["head"]["sha"] = sha
    path = world.tmp / "pr.json"
    path.write_text(json.dumps(event))
    world.reset_checkout()
    code = main(["github", "--event-name", "pull_request", "--event-path", str(path), "--repo", str(world.checkout)])
    assert code == 22
    status = world.double.statuses(REPO)[-1]
    assert status["sha"] == sha and status["state"] == "failure" and status["context"] == "setupbot"
    assert "adds `lxml` but no system package" in status["description"]
    assert status["target_url"] == "https://github.com/octo/app/actions/runs/4242"
    summary = world.summary()
    assert "Regression:" in summary and "+ package lxml" in summary and "step 3" in summary
    assert (
        main(
            [
                "github",
                "--event-name",
                "pull_request",
                "--event-path",
                str(path),
                "--repo",
                str(world.checkout),
                "--fail-on",
                "never",
            ]
        )
        == 0
    )


def test_a_fork_pull_request_gets_the_comparison_in_its_summary_only(world):
    _main_with_verified_environment(world)
    writes = len(world.double.write_calls())
    assert world.run("fork") == 22
    assert len(world.double.write_calls()) == writes
    assert "Regression:" in world.summary() and "from a fork" in world.summary()


def test_a_pull_request_that_keeps_the_environment_passes(world):
    assert world.run() == 0
    world.merge(1)
    world.double.repos[REPO].refs["heads/bump-numpy"] = world.double.repos[REPO].refs["heads/main"]
    world.double.repos[REPO].pulls[7] = {
        "id": 7007,
        "number": 7,
        "state": "open",
        "title": "docs",
        "body": "",
        "head": "bump-numpy",
        "base": "main",
        "merged": False,
        "merged_at": None,
        "maintainer_can_modify": True,
    }
    event = json.loads((EVENTS / "pull_request.json").read_text())
    event["pull_request"]["head"]["sha"] = world.double.repos[REPO].refs["heads/main"]
    path = world.tmp / "pr.json"
    path.write_text(json.dumps(event))
    runs = world.pipeline.runs
    assert (
        main(["github", "--event-name", "pull_request", "--event-path", str(path), "--repo", str(world.checkout)]) == 0
    )
    assert world.pipeline.runs == runs  # nothing the environment reads changed
    assert world.double.statuses(REPO)[-1]["state"] == "success"


def test_update_rebases_onto_main_only_when_main_changed_setupbots_files(world):
    assert world.run() == 0
    # main gets its own version of a file the pull request proposes: the branch would conflict
    world.write_main({f"{OUT}/Dockerfile": "# generated by setupbot\nFROM python:3.10-slim\n"}, "edit on main")
    world.write_main({"pyproject.toml": PYPROJECT.replace('"six>=1.16"', '"six>=1.17"')})
    assert world.run() == 0
    repo = world.double.repos[REPO]
    head = repo.refs["heads/setupbot/main"]
    assert repo.commits[head]["parents"] == [repo.refs["heads/main"]]  # rebased onto main


def test_a_pull_request_cannot_vouch_for_itself_with_an_edited_plan_json(world):
    """The checkout of a pull request is its author's: a plan JSON they rewrote to match their
    inputs and claim a Full verdict must not stand in for the container work."""
    from bot.config import load_settings
    from bot.incremental import environment_inputs

    _main_with_verified_environment(world)  # the PR adds lxml; its real run fails
    plan_path = world.checkout / OUT / "setupbot-plan.json"
    world.reset_checkout()
    forged = json.loads(plan_path.read_text())
    forged["inputs"] = environment_inputs(world.checkout, load_settings(world.checkout))
    runs = world.pipeline.runs
    event = json.loads((EVENTS / "pull_request_fork.json").read_text())
    path = world.tmp / "fork.json"
    path.write_text(json.dumps(event))
    plan_path.write_text(json.dumps(forged, indent=2, sort_keys=True) + "\n")
    code = main(["github", "--event-name", "pull_request", "--event-path", str(path), "--repo", str(world.checkout)])
    assert world.pipeline.runs == runs + 1, "the forged record was trusted"
    assert code == 22


def test_a_maintainers_own_dockerignore_is_kept_and_the_merged_environment_stays_merged(world):
    own = "node_modules\n.venv\n"  # hand-written: no setupbot marker
    world.write_main({".dockerignore": own}, "our own build context rules")
    assert world.run() == 0
    assert ".dockerignore" not in world.proposed()
    assert world.bot_files()[".dockerignore"] == own  # the PR leaves it as it is
    plan = json.loads(world.bot_files()[f"{OUT}/setupbot-plan.json"])
    assert ".dockerignore" not in plan["outputs"]
    body = world.double.pulls(REPO)[0]["body"]  # the PR says what it would have changed
    assert "Hand-written files left alone" in body and "<code>.dockerignore</code>" in body
    world.merge(1)
    writes, runs = len(world.double.write_calls()), world.pipeline.runs
    assert world.run() == 0
    assert len(world.double.write_calls()) == writes and world.pipeline.runs == runs
    assert outputs(world)["pr-operation"] == "none"
    assert (world.checkout / ".dockerignore").read_text() == own


def test_a_dockerignore_main_got_after_the_checkout_is_not_replaced_by_the_pull_request(world):
    """The files come from the checkout; main may have moved on (or a manual run on a tag builds
    from other content): a hand-written file main holds is never overwritten by the PR."""
    own = "node_modules\n"
    world.double.push(REPO, "main", {".dockerignore": own}, "our own build context rules")
    assert world.run() == 0  # the checkout has no .dockerignore
    pr = world.double.pulls(REPO)[0]
    assert pr["state"] == "open"
    assert world.bot_files()[".dockerignore"] == own
    assert f"{OUT}/Dockerfile" in world.proposed() and ".dockerignore" not in world.proposed()
